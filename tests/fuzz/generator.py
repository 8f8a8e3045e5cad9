"""Random well-typed kernels as Python source (Hypothesis strategies), with a float64 reference.

One generated program is written twice: as a gradkit kernel (thread index from gk.tid()) and as a plain
Python function of the thread index that evaluates the same statements with NumPy float64 — the
independent reference. Programs use arithmetic, builtins inside their domains, branches, conditional
expressions, loops with carried locals, a generated @gk.func, and atomics.
"""

from __future__ import annotations

import importlib.util
import itertools
import pathlib
import textwrap

from hypothesis import strategies as st

UNARY = ["gk.sin({})", "gk.cos({})", "gk.tanh({})", "gk.atan({})", "gk.sqrt({} * {} + 1.0)",
         "gk.log({} * {} + 1.0)", "gk.exp(gk.sin({}))", "helper({})"]
BINARY = ["({} + {})", "({} - {})", "({} * {})", "({} / ({} * {} + 1.0))", "gk.max({}, {})", "gk.min({}, {})",
          "gk.atan2({}, {} * {} + 1.0)"]


@st.composite
def expressions(draw, names, depth=0):
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(names + ["C"]))
        if leaf == "C":
            # Literals ride on a float64 value: a literal-only expression is float32 by design (as in Warp),
            # which the float64 reference would not model.
            return f"(xi * 0.0 + {draw(st.sampled_from([0.5, -1.25, 2.0, 0.1]))!r})"
        return leaf
    kind = draw(st.integers(0, 2))
    if kind == 0:
        template = draw(st.sampled_from(UNARY))
        e = draw(expressions(names, depth + 1))
        return template.format(*([e] * template.count("{}")))
    if kind == 1:
        template = draw(st.sampled_from(BINARY))
        a, b = draw(expressions(names, depth + 1)), draw(expressions(names, depth + 1))
        return template.format(a, *([b] * (template.count("{}") - 1)))
    c, a, b = (draw(expressions(names, depth + 1)) for _ in range(3))
    return f"({a} if {c} > 0.0 else {b})"


@st.composite
def programs(draw):
    """A list of statement lines (4-space indented body) using inputs xi, yi and locals a, b."""
    names = ["xi", "yi"]
    lines = []
    for var in ("a", "b"):
        lines.append(f"{var} = {draw(expressions(names))}")
        names.append(var)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "if", "for", "while"]))
        target = draw(st.sampled_from(["a", "b"]))
        if kind == "assign":
            lines.append(f"{target} = {draw(expressions(names))}")
        elif kind == "if":
            lines.append(f"if {draw(expressions(names))} > 0.0:")
            lines.append(f"    {target} = {draw(expressions(names))}")
            lines.append("else:")
            lines.append(f"    {target} = {target} * {draw(expressions(names))}")
        elif kind == "for":
            trips = draw(st.integers(0, 4))
            lines.append(f"for k in range({trips}):")
            lines.append(f"    {target} = {draw(expressions(names + ['fk']))}".replace("fk", "gk.float64(k)"))
            if draw(st.booleans()):
                lines.append(f"    if {target} > 3.0:")
                lines.append("        break")
        else:
            lines.append("w = 0")
            lines.append(f"while w < {draw(st.integers(0, 3))}:")
            lines.append(f"    {target} = {draw(expressions(names))}")
            lines.append("    w += 1")
    lines.append(f"res = {draw(expressions(names))}")
    return lines


KERNEL = '''
import gradkit as gk
import numpy as np


@gk.func
def helper(v: gk.float64) -> gk.float64:
    return gk.sin(v) * 0.5 + v * v * 0.25


@gk.kernel
def fuzz_kernel(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64),
                total: gk.array(dtype=gk.float64)):
    i = gk.tid()
    xi = x[i]
    yi = y[i]
{body}
    out[i] = res
    gk.atomic_add(total, 0, res * 0.5)


def reference(x, y):
    """The same program in plain NumPy float64, thread by thread."""
    out = np.zeros(len(x))
    total = 0.0
    for i in range(len(x)):
        xi = x[i]
        yi = y[i]
{ref_body}
        out[i] = res
        total += res * 0.5
    return out, total


def ref_helper(v):
    return np.sin(v) * 0.5 + v * v * 0.25
'''

_ids = itertools.count()


def build_module(lines: list[str], folder: pathlib.Path):
    """Write the kernel + reference for `lines` into a fresh module file and import it."""
    body = textwrap.indent("\n".join(lines), "    ")
    ref_lines = [ln.replace("helper(", "ref_helper(") for ln in lines]
    ref = textwrap.indent("\n".join(ref_lines), "        ")
    ref = ref.replace("gk.", "np_gk.")
    src = KERNEL.format(body=body, ref_body=ref)
    src = src.replace("def reference(x, y):", "def reference(x, y):\n    np_gk = _NumpyGK()")
    src += '''

class _NumpyGK:
    """gk.* builtins as float64 NumPy functions for the reference."""
    sin, cos, tanh, atan, sqrt, log, exp, atan2 = (np.sin, np.cos, np.tanh, np.arctan, np.sqrt, np.log, np.exp,
                                                   np.arctan2)
    max, min = np.maximum, np.minimum
    float64 = np.float64
'''
    path = folder / f"fuzz_case_{next(_ids)}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, src
