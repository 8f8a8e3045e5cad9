"""Simplify (common subexpressions): a repeated load and a repeated expression are computed once."""
import gradkit as gk

STAGES = ("simplify",)


@gk.kernel
def cse(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.exp(x[i] * 2.0) + gk.exp(x[i] * 2.0)
