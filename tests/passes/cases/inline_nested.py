"""Inline: a @gk.func calling another @gk.func (inlined transitively), result used twice."""
import gradkit as gk


@gk.func
def half(u: float) -> float:
    return u * 0.5


@gk.func
def mid(u: float, v: float) -> float:
    return half(u + v)


STAGES = ("frontend", "inline")


@gk.kernel
def inline_nested(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    m = mid(x[i], y[i])
    y[i] = m * m
