"""Tangent (forward mode) of a sqrt/sin/exp chain: each step multiplies by its derivative."""
import gradkit as gk

STAGES = ("lower", "tangent", "adjoint")


@gk.kernel
def chain(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.exp(gk.sin(gk.sqrt(x[i])))
