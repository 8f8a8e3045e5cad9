"""Adjoint of atomic_add: the output's adjoint is read at the same element and flows to y[i] * y[i]."""
import gradkit as gk

STAGES = ("lower", "adjoint", "tangent")


@gk.kernel
def atomic_sum(y: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, y[i] * y[i])
