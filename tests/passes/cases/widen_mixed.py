"""Widen (core/passes/widen.py, Kernel.widened): every float32 type of the typed IR becomes float64 — the
vec3 array and its loads (vec3d), the scalar parameter, the cast's target, constants and results — while
int32 values (the thread index, k) keep their type."""
import gradkit as gk

STAGES = ("frontend", "widen")


@gk.kernel
def scaled_norm(x: gk.array(dtype=gk.vec3), s: float, k: int, out: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i] * s
    out[i] = gk.length(v) + float(k) * 0.5
