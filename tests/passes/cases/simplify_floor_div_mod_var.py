"""Simplify: `//` and `%` of a runtime value by a constant stay as prims (the backend floors them);
an int division by a zero constant is not folded (backend semantics)."""
import gradkit as gk

STAGES = ("simplify",)


@gk.kernel
def floor_div_mod_var(out: gk.array(dtype=int)):
    i = gk.tid()
    out[i] = i // 3 + i % 3 + i // 0
