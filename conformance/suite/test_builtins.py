"""Every scalar builtin a backend receives as a `prim`, op by op on the device, against its NumPy semantics
(`BUILTINS[name].eval`) for every scalar type it takes, over edge values (NaN, ±0, ±inf, the largest
finite values, integer extremes, halves for rounding) and random ones, every pair of them for binary ops.

Tolerances (backends/README.md, "Numbers"): exact — arithmetic `+ - *`, negation, comparisons, logic,
min/max (NaN-propagating), abs, floor/ceil/round (half away from zero), integer ops (wrapping modulo
2**bits, C's truncating idiv/irem, floored // and % with x // 0 == 0), bit ops, casts; within 3 ULP —
`/` and sqrt (correctly rounded where the device can); the C math functions within the OpenCL C bounds
(+1 ULP for NumPy's own rounding). NaN must come out where the reference has NaN, infinities exactly.
Inputs whose result C leaves undefined are not sent: integer division by zero or MIN / -1 for idiv/irem,
float → int casts of NaN, infinities or values out of the target's range."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gradkit.conformance.irkit import apply, result_type
from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS

SCALARS = (T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_)
EXACT_FLOAT = {"add", "sub", "mul", "neg", "abs", "floor", "ceil", "round", "min", "max", "sign", "clamp",
               "where", "cast"}
NEAR_ULPS = {"div": 3, "sqrt": 3, "rsqrt": 3}
# OpenCL C's bounds (the loosest of the targets a backend may compile to), plus 1 for the reference
MATH_ULPS = {"exp": 4, "log": 4, "log2": 4, "log10": 4, "sin": 5, "cos": 5, "tan": 6, "asin": 5, "acos": 5,
             "atan": 6, "sinh": 5, "cosh": 5, "tanh": 6, "atan2": 7, "pow": 17, "erf": 17}
FLOORED = {"floordiv", "mod"}
NOT_PRIMS = {"cast"}     # checked below over every pair of scalar types
INT_ONLY = {"idiv", "irem"}     # emitted only for integers (the expansion of // and %)


def _edges(t) -> np.ndarray:
    if t.is_bool:
        return np.array([False, True])
    if t.is_float:
        big = np.finfo(t.np_dtype).max
        return np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, 1e-3, -7.25, 40.0, 8193.0, -1e5,
                         3.0e7, 1e20, -6.5e33, big, -big, np.inf, -np.inf, np.nan], dtype=t.np_dtype)
    info = np.iinfo(t.np_dtype)
    values = [0, 1, 2, 7, info.max, info.max - 1]
    if info.min < 0:
        values += [-1, -2, -7, info.min, info.min + 1]
    return np.array(values, dtype=t.np_dtype)


def _random(t, n, rng) -> np.ndarray:
    if t.is_bool:
        return rng.random(n) < 0.5
    if t.is_float:
        return rng.uniform(-5, 5, n).astype(t.np_dtype)
    return rng.integers(0 if t is T.uint32 else -20, 21, n).astype(t.np_dtype)


def _signature(name: str, t):
    """The argument types of prim `name` on scalar type t, or None when it does not take them."""
    b = BUILTINS[name]
    if b.eval is None or b.arity is None or name in NOT_PRIMS or (name in INT_ONLY and not t.is_int):
        return None
    types = [T.bool_, t, t] if name == "where" else [t] * b.arity
    try:
        result_type(name, types)
    except Exception:
        return None
    return types


CASES = [(name, t) for name in sorted(BUILTINS) for t in SCALARS if _signature(name, t) is not None]


def _inputs(name, types, rng):
    """Columns of arguments: every combination of edge values (pairs for binary ops), then random ones."""
    edges = [_edges(t) for t in types]
    combos = list(itertools.product(*edges)) if len(types) <= 2 else \
        [tuple(e[k % len(e)] for e in edges) for k in range(64)]
    cols = [np.array([c[j] for c in combos], dtype=t.np_dtype) for j, t in enumerate(types)]
    cols = [np.concatenate([c, _random(t, 200, rng)]) for c, t in zip(cols, types)]
    if name in INT_ONLY:                    # C leaves these undefined; gradkit never emits them
        a, b = cols
        bad = (b == 0) | ((a == np.iinfo(a.dtype).min) & (b == -1)) if a.dtype.kind == "i" else (b == 0)
        cols = [c[~bad] for c in cols]
    return cols


def _ulps(got, want, dtype) -> np.ndarray:
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    # a process whose floating-point unit flushes subnormals (FTZ/DAZ, set by some native library) makes the
    # spacing at 0 itself 0, and 0 / 0 a NaN "error": measure there against the smallest normal instead
    spacing = np.where(spacing > 0, spacing, np.finfo(dtype).tiny)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing


def _check_floats(name, got, want, dtype, cols):
    what = f"{name} on {np.dtype(dtype).name}"
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN where the reference has none (or the reverse) at " \
        f"inputs {[c[np.isnan(got) != nan][:4].tolist() for c in cols]}"
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf]), f"{what}: infinities differ"
    finite = ~nan & ~inf
    g, w = got[finite], want[finite]
    if name in FLOORED:          # a quotient within rounding of an integer may floor either way: not judged
        q = cols[0][finite].astype(np.float64) / cols[1][finite].astype(np.float64)
        clear = np.abs(q - np.round(q)) > 8 * np.finfo(dtype).eps * np.maximum(np.abs(q), 1)
        g, w = g[clear], w[clear]
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    bound = 0 if name in EXACT_FLOAT else NEAR_ULPS.get(name, MATH_ULPS.get(name, 4))
    if bound == 0:
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    err = _ulps(g, w, dtype)
    worst = int(np.argmax(err)) if err.size else 0
    assert err.size == 0 or err[worst] <= bound, \
        f"{what}: {err[worst]:.1f} ULP from the reference (bound {bound}) at {[c[finite][worst] for c in cols]}"


@pytest.mark.parametrize("name,t", CASES, ids=[f"{n}-{t.name}" for n, t in CASES])
def test_prim_matches_its_numpy_semantics(device, name, t, rng):
    types = _signature(name, t)
    cols = _inputs(name, types, rng)
    got = apply(device, name, cols, types)
    rtype = result_type(name, types)
    with np.errstate(all="ignore"):
        want = np.asarray(BUILTINS[name].eval(*cols)).astype(rtype.np_dtype)
    assert got.dtype == rtype.np_dtype
    if rtype.is_float:
        _check_floats(name, got, want, rtype.np_dtype, cols)
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{name} on {t.name}")


CASTS = [(src, dst) for src in SCALARS for dst in SCALARS]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s.name}-{d.name}" for s, d in CASTS])
def test_cast(device, src, dst, rng):
    """Float → int truncates toward zero, ints wrap, anything → bool is `!= 0`; float → int of a value the
    target cannot hold (NaN, inf, out of range) is undefined in C and not sent."""
    x = np.concatenate([_edges(src), _random(src, 100, rng)])
    if src.is_float and dst.is_int:
        info = np.iinfo(dst.np_dtype)
        with np.errstate(invalid="ignore"):
            x = x[np.isfinite(x) & (np.trunc(x) >= info.min) & (np.trunc(x) <= info.max)]
    got = apply(device, "cast", [x], [src], to=dst)
    with np.errstate(all="ignore"):
        want = np.asarray(BUILTINS["cast"].eval(x, dst))
    if dst.is_float:
        _check_floats("cast", got, want.astype(dst.np_dtype), dst.np_dtype, [x])
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"cast {src.name} -> {dst.name}")
