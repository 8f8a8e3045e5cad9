"""Frontend: `2 * 3 + 1` folds to the int 7 while parsing; a mixed constant expression folds to one float
(7 * 0.5 + 1.5 * 2.0 == 6.5). (simplify_inlined_consts: the same folding in simplify.)"""
import gradkit as gk

STAGES = ("frontend",)


@gk.kernel
def const_arith(out: gk.array(dtype=float), k: gk.array(dtype=int)):
    i = gk.tid()
    k[i] = 2 * 3 + 1
    out[i] = (2 * 3 + 1) * 0.5 + 1.5 * 2.0
