"""Taichi's `print(...)` in kernels over gradkit's print instruction (core/builtins/printing.py): the
rewrite (rewrite.py) turns each call into `__ti_print(...)`, this macro. Taichi 1.7 writes values separated
by spaces and ends the line: floats as `%f`, integers and bools as integers, vectors `[a, b]` and matrices
`[[a, b], [c, d]]` with ", " between components; `sep=` and `end=` as Python's. One print per call; the
adjoint kernel prints nothing."""

from __future__ import annotations

from ..core import types as T
from ..core.builtins.printing import Conv
from ..core.frontend.printing import emit_print, scalars_of
from ..core.lang import LangFunction


def _pieces(lw, x, node, pieces: list, values: list) -> None:
    x = getattr(x, "v", x)
    if isinstance(x, str):
        pieces.append(x)
        return
    if isinstance(x, bool):
        pieces.append(str(int(x)))
        return
    if isinstance(x, int):
        pieces.append(str(x))
        return
    if isinstance(x, float):
        pieces.append("%f" % x)
        return
    x = lw.materialize(x, None, node)

    def one(c):
        if c.type.is_bool:
            c = lw.prim("cast", c, to=T.int32, node=node)
        conv = "f" if c.type.is_float else "u" if c.type is T.uint32 else "d"
        values.append(c)
        return Conv("", conv, len(values) - 1)
    comps = scalars_of(lw, x, node)
    if x.type.is_scalar:
        pieces.append(one(comps[0]))
        return
    cols = x.type.length if x.type.is_vector else x.type.shape[1]
    rows = [comps[r:r + cols] for r in range(0, len(comps), cols)]
    text = []
    for row in rows:
        text.append(["["] + [p for k, c in enumerate(row) for p in ([", "] if k else []) + [one(c)]] + ["]"])
    if x.type.is_vector:
        pieces.extend(text[0])
        return
    pieces.append("[")
    for k, row in enumerate(text):
        pieces.extend(([", "] if k else []) + row)
    pieces.append("]")


def _print(E, *args, sep=" ", end="\n"):
    """Taichi's print(*args, sep=' ', end='\\n') in a kernel."""
    if not isinstance(sep, str) or not isinstance(end, str):
        E.fail("sep= and end= must be string literals")
    pieces, values = [], []
    for k, x in enumerate(args):
        if k:
            pieces.append(sep)
        _pieces(E.lw, x, E.node, pieces, values)
    pieces.append(end)
    emit_print(E.lw, pieces, values, "print", E.node)


def _host(*args, **kwargs):
    raise RuntimeError("__ti_print is the kernel form of print()")


TI_PRINT = LangFunction("__ti_print", "macro", macro=_print, host=_host, doc="Taichi's print in kernels")
