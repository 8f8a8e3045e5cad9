"""Adjoint of an if/else: the reverse pass re-tests the condition and runs each branch's adjoint."""
import gradkit as gk

STAGES = ("lower", "adjoint", "tangent")


@gk.kernel
def if_else(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    if v > 0.0:
        r = v * v
    else:
        r = 2.0 * v
    y[i] = r
