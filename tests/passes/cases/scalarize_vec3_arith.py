"""Scalarize: vec3 add, scale and negate become three scalar ops each; loads/stores per component."""
import gradkit as gk

STAGES = ("frontend", "scalarize")


@gk.kernel
def vec3_arith(a: gk.array(dtype=gk.vec3), b: gk.array(dtype=gk.vec3), s: float,
               out: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    out[i] = -(a[i] + s * b[i])
