"""Scalarize: dot and length decompose into scalar muls, adds and a sqrt."""
import gradkit as gk

STAGES = ("frontend", "scalarize", "lower")


@gk.kernel
def dot_length(a: gk.array(dtype=gk.vec3), b: gk.array(dtype=gk.vec3), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.dot(a[i], b[i]) + gk.length(a[i])
