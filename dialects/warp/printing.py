"""Warp's printing builtins as macros over gradkit's print instruction (core/builtins/printing.py):
`wp.printf(fmt, *args)`, `wp.print(x)` and the test helpers `wp.expect_eq` / `expect_neq` / `expect_near`,
which print Warp 1.19's messages (its native builtin.h, vec.h, mat.h, quat.h) when the expectation fails.

Warp writes a value as `print(x)` does in its native code: an integer `%d` (`%u` unsigned), a float `%g`, a
bool True / False, a vector or matrix row its components as floats each followed by a space, a quaternion
`%g %g %g %g`, each then a newline. Each message is one print (one printf), so the lines of one failure stay
together; nothing prints in the adjoint kernel and no gradient flows through these calls. Called from
Python, expect_eq / expect_neq / expect_near write the same text to sys.stdout (Warp exports them);
printf and print raise Warp's RuntimeError (it exports neither).
"""

from __future__ import annotations

import sys

import numpy as np

from ..core import types as T
from ..core.builtins.printing import Conv
from ..core.frontend.printing import emit_print, lower_printf, scalars_of


def _raw(x):
    return getattr(x, "v", x)


def warp_pieces(lw, x, node, pieces: list, values: list) -> None:
    """Append Warp's `print(x)` of the kernel value `x` (newline included) to pieces / values."""
    x = lw.materialize(_raw(x), None, node)
    t = x.type
    comps = scalars_of(lw, x, node)
    if t.is_scalar:
        s = t.scalar
        conv = "b" if s.is_bool else "g" if s.is_float else "u" if s is T.uint32 else "d"
        pieces += [Conv("", conv, len(values)), "\n"]
        values.append(x)
        return
    floats = [c if c.type is T.float32 else lw.prim("cast", c, to=T.float32, node=node) for c in comps]
    if t.is_quat:
        for k, c in enumerate(floats):
            pieces += [Conv("", "g", len(values))] + ([" "] if k < 3 else ["\n"])
            values.append(c)
        return
    cols = t.length if t.is_vector else t.shape[1]
    for k, c in enumerate(floats):
        pieces += [Conv("", "g", len(values)), " "] + (["\n"] if (k + 1) % cols == 0 else [])
        values.append(c)


def _print_when(lw, node, cond, parts: list, what: str) -> None:
    """One print of `parts` (str text or kernel values printed as Warp does) in the threads where `cond`."""
    def emit():
        pieces, values = [], []
        for p in parts:
            if isinstance(p, str):
                pieces.append(p)
            else:
                warp_pieces(lw, p, node, pieces, values)
        emit_print(lw, pieces, values, what, node)
    if cond is None:
        emit()
    else:
        lw.if_blocks(cond, emit, lambda: None, node)


def _pair(E, a, b, what: str):
    lw, node = E.lw, E.node
    a, b = lw.unify(_raw(a), _raw(b), node)
    a, b = lw.materialize(a, None, node), lw.materialize(b, None, node)
    if a.type is not b.type:
        raise lw.error(node, f"{what}(): Can't test equality for objects with different types "
                             f"({a.type.name} and {b.type.name})")
    return a, b


def _any_differs(lw, node, a, b):
    diff = None
    for x, y in zip(scalars_of(lw, a, node), scalars_of(lw, b, node)):
        ne = lw.prim("ne", x, y, node=node)
        diff = ne if diff is None else lw.prim("or", diff, ne, node=node)
    return diff


def printf(E, fmt, *args):
    """Warp's wp.printf(fmt, *args): a C format (d i u o x X c, f F e E g G; %s of a string literal)."""
    lower_printf(E.lw, E.node, fmt, [_raw(a) for a in args], "printf")


def print_(E, x):
    """Warp's print(x) / wp.print(x): the value as Warp's native print writes it, then a newline."""
    _print_when(E.lw, E.node, None, [x], "print")


def expect_eq(E, a, b):
    """Print Warp's error message when a != b (any component)."""
    a, b = _pair(E, a, b, "expect_eq")
    _print_when(E.lw, E.node, _any_differs(E.lw, E.node, a, b),
                ["Error, expect_eq() failed:\n\t Expected: ", b, "\t Actual: ", a], "expect_eq")


def expect_neq(E, a, b):
    """Print Warp's error message when a == b (every component)."""
    a, b = _pair(E, a, b, "expect_neq")
    same = E.lw.prim("not", _any_differs(E.lw, E.node, a, b), node=E.node)
    _print_when(E.lw, E.node, same, ["Error, expect_neq() failed:\n\t Expected: ", b, "\t Actual: ", a],
                "expect_neq")


def expect_near(E, a, b, tolerance=1.0e-6):
    """Print Warp's error message when |a - b| (the largest over components) exceeds the tolerance, a float
    of a's scalar type."""
    lw, node = E.lw, E.node
    a, b = _pair(E, a, b, "expect_near")
    s = a.type.scalar
    if not s.is_float:
        raise lw.error(node, f"expect_near(): needs float values, got {a.type.name}")
    tol = lw.coerce(_raw(tolerance), s, node, "expect_near() tolerance")
    diff = None
    for x, y in zip(scalars_of(lw, a, node), scalars_of(lw, b, node)):
        d = lw.prim("abs", lw.prim("sub", x, y, node=node), node=node)
        diff = d if diff is None else lw.prim("where", lw.prim("gt", d, diff, node=node), d, diff, node=node)
    cond = lw.prim("gt", diff, tol, node=node)
    label = "    Absolute difference: " if a.type.is_scalar else "    Max absolute difference: "
    _print_when(lw, node, cond, ["Error, expect_near() failed with tolerance ", tol, "    Expected: ", b,
                                 "    Actual: ", a, label, diff], "expect_near")


# ---------------------------------------------------------------- called from Python (Warp exports them)

def _host_text(x) -> str:
    """Warp's native print of a host value: %d / %g / True, vector components each followed by a space."""
    a = np.asarray(x)
    if a.ndim == 0:
        v = a.item()
        return f"{v}\n" if isinstance(v, bool) else f"{v}\n" if isinstance(v, int) else "%g\n" % v
    rows = a.reshape(1, -1) if a.ndim == 1 else a.reshape(a.shape[0], -1)
    return "".join("".join("%g " % float(c) for c in row) + "\n" for row in rows)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _undefined(name: str):
    def host(*args, **kwargs):      # Warp 1.19's own error: it exports no host form of these
        raise RuntimeError(f"Error calling function '{name}', function is undefined")
    return host


def _host_expect_eq(a, b):
    if not np.array_equal(np.asarray(a), np.asarray(b)):
        _write(f"Error, expect_eq() failed:\n\t Expected: {_host_text(b)}\t Actual: {_host_text(a)}")


def _host_expect_neq(a, b):
    if np.array_equal(np.asarray(a), np.asarray(b)):
        _write(f"Error, expect_neq() failed:\n\t Expected: {_host_text(b)}\t Actual: {_host_text(a)}")


def _host_expect_near(a, b, tolerance=1.0e-6):
    diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    worst = diff.max() if diff.ndim else diff
    if worst > tolerance:
        label = "Absolute difference" if diff.ndim == 0 else "Max absolute difference"
        _write(f"Error, expect_near() failed with tolerance {_host_text(tolerance)}    Expected: {_host_text(b)}"
               f"    Actual: {_host_text(a)}    {label}: {_host_text(worst)}")


# name -> (macro, host): merged into builtins.MACROS
MACROS = {"printf": (printf, _undefined("printf")), "print": (print_, _undefined("print")),
          "expect_eq": (expect_eq, _host_expect_eq),
          "expect_neq": (expect_neq, _host_expect_neq), "expect_near": (expect_near, _host_expect_near)}
