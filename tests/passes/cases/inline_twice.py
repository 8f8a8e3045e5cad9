"""Inline: a @gk.func called twice; each call site gets its own copy of the body."""
import gradkit as gk


@gk.func
def sq_plus(u: float, c: float) -> float:
    return u * u + c


STAGES = ("frontend", "inline", "lower")


@gk.kernel
def inline_twice(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = sq_plus(x[i], 1.0) + sq_plus(y[i], 2.0)
