"""Frontend: `x // 3` and `x % 3` on a negative int constant fold while parsing, with Python's floored
semantics (-7 // 3 == -3, -7 % 3 == 2, 7 // -3 == -3, 7 % -3 == -2): only constants reach the IR.
(Constants the frontend cannot see fold in simplify: simplify_inlined_consts.)"""
import gradkit as gk

STAGES = ("frontend",)


@gk.kernel
def floor_div_mod(out: gk.array(dtype=int)):
    i = gk.tid()
    x = -7
    out[0] = x // 3
    out[1] = x % 3
    y = 7
    out[2] = y // -3
    out[3] = y % -3
