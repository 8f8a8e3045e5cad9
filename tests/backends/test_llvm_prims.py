"""Every scalar primitive of the builtins table, compiled by the LLVM backend from hand-built lowered IR,
against the builtin's own NumPy `eval` (in float64 for float inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS

from test_llvm_support import NP_OF, apply

FLOATS = [T.float32, T.float64]
INTS = [T.int32, T.int64, T.uint32]
# rtol per float type for non-transcendental ops (exact up to rounding) and for math functions
RTOL = {T.float32: 2e-6, T.float64: 1e-14}
MATH_RTOL = {T.float32: 3e-6, T.float64: 5e-15}

UNARY_DOMAINS = {
    "neg": (-10, 10), "abs": (-10, 10), "sign": (-3, 3), "floor": (-10, 10), "ceil": (-10, 10),
    "round": (-10, 10), "sqrt": (0, 100), "exp": (-20, 20), "log": (1e-3, 1e3), "log2": (1e-3, 1e3),
    "log10": (1e-3, 1e3), "sin": (-20, 20), "cos": (-20, 20), "tan": (-1.5, 1.5), "asin": (-1, 1),
    "acos": (-1, 1), "atan": (-20, 20), "sinh": (-10, 10), "cosh": (-10, 10), "tanh": (-5, 5),
}
BINARY_DOMAINS = {
    "add": ((-10, 10), (-10, 10)), "sub": ((-10, 10), (-10, 10)), "mul": ((-10, 10), (-10, 10)),
    "div": ((-10, 10), (0.5, 10)), "floordiv": ((-10, 10), (0.5, 10)), "mod": ((-10, 10), (0.5, 10)),
    "pow": ((0.01, 10), (-4, 4)), "min": ((-10, 10), (-10, 10)), "max": ((-10, 10), (-10, 10)),
    "atan2": ((-10, 10), (-10, 10)),
}
TRANSCENDENTAL = {"exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                  "tanh", "pow", "atan2"}


def _close(got, ref, t, name):
    rtol = (MATH_RTOL if name in TRANSCENDENTAL else RTOL)[t]
    ref = np.asarray(ref, dtype=np.float64)
    atol = rtol * max(1.0, float(np.nanmax(np.abs(ref)))) if name in ("sin", "cos", "tan", "atan2", "mod") else 0
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=atol, err_msg=f"{name} {t.name}")


@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
def test_float_unary(name, t, rng):
    lo, hi = UNARY_DOMAINS[name]
    x = rng.uniform(lo, hi, 1001).astype(NP_OF[t])
    if name == "round":
        x[:8] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.0]
    got = apply(name, [t], t, lambda b, a: b.prim(name, a), [x])
    ref = BUILTINS[name].eval(x.astype(np.float64))
    if name == "round":     # half away from zero, exactly (the eval's float64 arithmetic agrees here)
        ref = np.sign(x.astype(np.float64)) * np.floor(np.abs(x.astype(np.float64)) + 0.5)
    _close(got, ref, t, name)


@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(BINARY_DOMAINS))
def test_float_binary(name, t, rng):
    (lo1, hi1), (lo2, hi2) = BINARY_DOMAINS[name]
    x = rng.uniform(lo1, hi1, 1001).astype(NP_OF[t])
    y = rng.uniform(lo2, hi2, 1001).astype(NP_OF[t])
    if name in ("floordiv", "mod"):
        y[:500] *= -1
    got = apply(name, [t, t], t, lambda b, a, c: b.prim(name, a, c), [x, y])
    ref = BUILTINS[name].eval(x.astype(np.float64), y.astype(np.float64))
    if name in ("floordiv", "mod") and t is T.float32:
        # float32 a/b can round across an integer; compare with the builtin evaluated in float32 there
        ref32 = BUILTINS[name].eval(x, y).astype(np.float64)
        ref = np.where(np.abs(got - ref) <= np.abs(got - ref32), ref, ref32)
    _close(got, ref, t, name)


@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
def test_float_clamp_where_and_nan_rules(t):
    nan = np.nan
    x = np.array([1.0, -5.0, 9.0, nan, 2.0, 0.0], NP_OF[t])
    y = np.array([2.0, nan, 3.0, 1.0, 2.0, -0.0], NP_OF[t])
    got_min = apply("mn", [t, t], t, lambda b, a, c: b.prim("min", a, c), [x, y])
    got_max = apply("mx", [t, t], t, lambda b, a, c: b.prim("max", a, c), [x, y])
    np.testing.assert_array_equal(got_min, np.minimum(x, y))      # NaN propagates like NumPy
    np.testing.assert_array_equal(got_max, np.maximum(x, y))
    lo, hi = np.full(6, -1.0, NP_OF[t]), np.full(6, 4.0, NP_OF[t])
    got = apply("cl", [t, t, t], t, lambda b, a, c, d: b.prim("clamp", a, c, d), [x, lo, hi])
    np.testing.assert_array_equal(got, BUILTINS["clamp"].eval(x, lo, hi))
    got = apply("wh", [t, t], t, lambda b, a, c: b.prim("where", b.prim("gt", a, c), a, c), [x, y])
    np.testing.assert_array_equal(got, np.where(x > y, x, y))
    sign = apply("sg", [t], t, lambda b, a: b.prim("sign", a), [x])
    np.testing.assert_array_equal(sign, np.sign(x))


@pytest.mark.parametrize("t", FLOATS + INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_comparisons(name, t, rng):
    if t.is_float:
        x = rng.integers(-3, 4, 500).astype(NP_OF[t])
        y = rng.integers(-3, 4, 500).astype(NP_OF[t])
        x[:5] = np.nan                                  # NaN: false except ne
    else:
        lo = 0 if t.kind == "uint" else -3
        x = rng.integers(lo, 4, 500).astype(NP_OF[t])
        y = rng.integers(lo, 4, 500).astype(NP_OF[t])
        if t.kind == "uint":
            x[:5] = 0xFFFFFFF0                          # unsigned order
    got = apply(name, [t, t], T.bool_, lambda b, a, c: b.prim(name, a, c), [x, y])
    np.testing.assert_array_equal(got, BUILTINS[name].eval(x, y))


def test_logic_ops(rng):
    p, q = rng.integers(0, 2, 64).astype(bool), rng.integers(0, 2, 64).astype(bool)
    bt = T.bool_
    np.testing.assert_array_equal(apply("a", [bt, bt], bt, lambda b, x, y: b.prim("and", x, y), [p, q]), p & q)
    np.testing.assert_array_equal(apply("o", [bt, bt], bt, lambda b, x, y: b.prim("or", x, y), [p, q]), p | q)
    np.testing.assert_array_equal(apply("n", [bt], bt, lambda b, x: b.prim("not", x), [p]), ~p)


@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "floordiv", "mod", "min", "max"])
def test_int_binary(name, t, rng):
    info = np.iinfo(NP_OF[t])
    lo = 0 if t.kind == "uint" else -50
    x = rng.integers(lo, 50, 2000).astype(NP_OF[t])
    y = rng.integers(lo, 50, 2000).astype(NP_OF[t])
    x[:4] = [info.max, info.min, info.max, 7]
    y[:4] = [2, 0 if t.kind == "uint" else -1, 0, 0]                # wrap-around, INT_MIN // -1, x // 0
    got = apply(name, [t, t], t, lambda b, a, c: b.prim(name, a, c), [x, y])
    with np.errstate(all="ignore"):
        if name in ("floordiv", "mod"):
            safe = np.where(y == 0, 1, y).astype(NP_OF[t])
            ref = np.where(y == 0, 0, BUILTINS[name].eval(x, safe)).astype(NP_OF[t])
        else:
            ref = BUILTINS[name].eval(x, y).astype(NP_OF[t])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", ["neg", "abs", "sign"])
def test_int_unary(name, t, rng):
    lo = 0 if t.kind == "uint" else -100
    x = rng.integers(lo, 100, 500).astype(NP_OF[t])
    got = apply(name, [t], t, lambda b, a: b.prim(name, a), [x])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.asarray(BUILTINS[name].eval(x)).astype(NP_OF[t]))


def test_int_clamp(rng):
    x = rng.integers(-100, 100, 300).astype(np.int32)
    lo, hi = np.full(300, -10, np.int32), np.full(300, 20, np.int32)
    t = T.int32
    got = apply("c", [t, t, t], t, lambda b, a, c, d: b.prim("clamp", a, c, d), [x, lo, hi])
    np.testing.assert_array_equal(got, np.clip(x, -10, 20))


SCALARS = [T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_]


@pytest.mark.parametrize("src", SCALARS, ids=lambda t: t.name)
@pytest.mark.parametrize("dst", SCALARS, ids=lambda t: t.name)
def test_casts(src, dst, rng):
    if src.is_float:
        lo = 0 if dst.kind == "uint" else -1000
        x = rng.uniform(lo, 1000, 400).astype(NP_OF[src])
        x[:6] = [2.7, 0.0, 0.999, 1e-3, 5.5, 3.0] if dst.kind == "uint" else [-2.7, 2.7, -0.5, 0.0, -1e-3, 3.0]
    elif src.is_bool:
        x = rng.integers(0, 2, 400).astype(bool)
    else:
        lo = 0 if src.kind == "uint" or dst.kind == "uint" else -100000
        x = rng.integers(lo, 100000, 400).astype(NP_OF[src])
    got = apply("cast", [src], dst, lambda b, a: b.cast(a, dst), [x])
    np.testing.assert_array_equal(got, BUILTINS["cast"].eval(x, to=dst))
