"""Adjoint and tangent of a straight-line kernel: y = a * sin(x) (the quickstart kernel)."""
import gradkit as gk

STAGES = ("adjoint", "tangent")


@gk.kernel
def sin_mul(x: gk.array(dtype=float), a: float, y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a * gk.sin(x[i])
