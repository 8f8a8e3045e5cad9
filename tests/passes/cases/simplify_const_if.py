"""Simplify: an `if` whose condition becomes constant after inlining keeps only the taken branch (the
frontend already folds `if` on Python constants), and `where` on a constant picks its operand."""
import gradkit as gk


@gk.func
def scaled(v: float, flag: int) -> float:
    r = v
    if flag > 0:
        r = v * 2.0
    else:
        r = v * 3.0
    return gk.where(flag < 0, r, -r)


STAGES = ("inline", "simplify")


@gk.kernel
def const_if(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = scaled(x[i], 1)
