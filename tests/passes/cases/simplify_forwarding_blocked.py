"""Simplify: forwarding is kept across a store to a provably different element (another constant index,
another component of the same element) and dropped across one that may be the same element (y[j])."""
import gradkit as gk

STAGES = ("simplify",)


@gk.kernel
def forwarding_blocked(j: int, y: gk.array(dtype=float), v: gk.array(dtype=gk.vec2),
                       out: gk.array(dtype=float)):
    i = gk.tid()
    y[0] = 1.0
    y[1] = 2.0
    out[0] = y[0]
    v[i][0] = 3.0
    v[i][1] = 4.0
    out[1] = v[i][0]
    y[i] = 5.0
    y[j] = 6.0
    out[2] = y[i]
