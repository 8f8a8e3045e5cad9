"""Frontend: a scalar parameter, a load, arithmetic and a store, typed (float32 throughout)."""
import gradkit as gk

STAGES = ("frontend", "lower")


@gk.kernel
def saxpy(a: float, x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a * x[i] + y[i]
