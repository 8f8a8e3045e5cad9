"""Scalarize: a vec3 parameter split into three (param_split) and a vec3 loop-carried value flattened."""
import gradkit as gk

STAGES = ("frontend", "scalarize")


@gk.kernel
def vec_param_loop(g: gk.vec3, n: int, out: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    v = gk.vec3(0.0, 0.0, 0.0)
    for k in range(n):
        v = v + g
    out[i] = v
