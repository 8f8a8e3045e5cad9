"""Adjoint and tangent through vector ops: out = length(p[i] - q) (scalarized before AD)."""
import gradkit as gk

STAGES = ("adjoint", "tangent")


@gk.kernel
def vec_length(p: gk.array(dtype=gk.vec2), q: gk.vec2, out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.length(p[i] - q)
