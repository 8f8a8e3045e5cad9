"""Scalarize: a mat22 × vec2 product and a vector constructor from scalars."""
import gradkit as gk

STAGES = ("scalarize", "lower")


@gk.kernel
def mat_vec(m: gk.array(dtype=gk.mat22), x: gk.array(dtype=float), out: gk.array(dtype=gk.vec2)):
    i = gk.tid()
    out[i] = m[i] @ gk.vec2(x[i], 1.0)
