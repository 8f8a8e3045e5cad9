"""Simplify (store-to-load forwarding): `y[i] = ...; z = y[i]` reads the stored value, no load."""
import gradkit as gk

STAGES = ("frontend", "simplify")


@gk.kernel
def forwarding(x: gk.array(dtype=float), y: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * 3.0
    z = y[i]
    out[i] = z + 1.0
