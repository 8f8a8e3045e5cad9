"""Promote: `a[i, 0] += ...` is an atomic add (augmented assignment to an array element), which promote
leaves alone: the loop keeps its load of a[i, 0] and its atomic."""
import gradkit as gk

STAGES = ("frontend", "promote")


@gk.kernel
def atomic_accumulate(x: gk.array(dtype=float), a: gk.array(dtype=float, ndim=2)):
    i = gk.tid()
    for k in range(x.shape[0]):
        a[i, 0] += x[k] * a[i, 0]
