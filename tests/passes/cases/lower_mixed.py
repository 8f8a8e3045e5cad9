"""Lower (whole pipeline): a @gk.func on vec3, a loop and a constant; everything inlined, scalar, folded."""
import gradkit as gk


@gk.func
def spring(d: gk.vec3, k: float) -> gk.vec3:
    return d * (k * gk.length(d))


STAGES = ("frontend", "lower")


@gk.kernel
def lower_mixed(p: gk.array(dtype=gk.vec3), f: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    acc = gk.vec3(0.0, 0.0, 0.0)
    for k in range(2):
        acc += spring(p[i] - p[k], 2.0 * 0.5)
    f[i] = acc
