"""Inline: a @gk.func whose body has a loop and an array parameter; the loop is inlined whole."""
import gradkit as gk


@gk.func
def row_sum(a: gk.array(dtype=float, ndim=2), r: int) -> float:
    s = float(0.0)
    for k in range(a.shape[1]):
        s += a[r, k]
    return s


STAGES = ("inline", "lower")


@gk.kernel
def inline_func_with_loop(a: gk.array(dtype=float, ndim=2), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = row_sum(a, i)
