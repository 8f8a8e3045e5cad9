"""Adjoint (value stack) and tangent of a for loop with a loop-carried float s = s * x[k] + 1."""
import gradkit as gk

STAGES = ("lower", "adjoint", "tangent")


@gk.kernel
def loop_carried(x: gk.array(dtype=float), n: int, y: gk.array(dtype=float)):
    i = gk.tid()
    s = float(1.0)
    for k in range(n):
        s = s * x[k] + 1.0
    y[i] = s
