"""Promote: a loop accumulating into `a[i, 0]` (plain read and write) reads it once before the loop,
carries it as a loop value and stores it once after; the adjoint then differentiates the carried value."""
import gradkit as gk

STAGES = ("simplify", "promote", "lower", "adjoint")


@gk.kernel
def accumulate(x: gk.array(dtype=float), a: gk.array(dtype=float, ndim=2)):
    i = gk.tid()
    for k in range(x.shape[0]):
        a[i, 0] = a[i, 0] + x[k] * x[k]
