"""Promote: a store inside an `if` in the loop; the branch yields the element's value (then or old)."""
import gradkit as gk

STAGES = ("promote", "lower")


@gk.kernel
def store_in_if(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    for k in range(x.shape[0]):
        if x[k] > 0.0:
            y[i] = y[i] * x[k]
