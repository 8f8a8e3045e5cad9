"""Simplify: float x * 1.0, 1.0 * x, x - 0.0 and x / 1.0 vanish (exact for every float, -0.0 and NaN
included); x + 0.0 and x * 0.0 must stay (-0.0 + 0.0 is +0.0; inf * 0.0 is NaN)."""
import gradkit as gk

STAGES = ("simplify",)


@gk.kernel
def identities(x: gk.array(dtype=float), y: gk.array(dtype=float), z: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = (1.0 * (v * 1.0 + 0.0) - 0.0) / 1.0
    z[i] = v * 0.0
