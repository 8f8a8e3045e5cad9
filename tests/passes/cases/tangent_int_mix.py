"""Tangent: int values (tid, casts, int params) carry no tangent; only float paths do."""
import gradkit as gk

STAGES = ("tangent",)


@gk.kernel
def int_mix(x: gk.array(dtype=float), n: int, y: gk.array(dtype=float)):
    i = gk.tid()
    j = (i + n) % 4
    y[i] = x[j] * float(j) + gk.floor(x[i])
