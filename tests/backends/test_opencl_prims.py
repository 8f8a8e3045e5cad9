"""Every scalar prim of core/builtins/scalar.py on the OpenCL backend, against the builtin's NumPy `eval`.

Tolerances: ops that IEEE 754 / NumPy define exactly (arithmetic with correctly rounded division, floor,
ceil, round, min/max, //, %, casts, comparisons) must match bit for bit; math functions must be within
the OpenCL C specification's ULP bound for the function plus 1 ULP for NumPy's own rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradkit.core.builtins import BUILTINS
from test_opencl_support import BOOL, F32, F64, I32, I64, NP_OF, U32, apply, apply_all

N = 4096
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Same random inputs for a test whatever ran before it in this process (xdist, -k)."""
    global RNG
    RNG = np.random.default_rng([7, sum(map(ord, request.node.name))])

# OpenCL C 1.2 §7.4 ULP bounds (float32 / float64), plus 1 for the reference's own rounding.
ULPS = {"sqrt": 1, "exp": 4, "log": 4, "log2": 4, "log10": 4, "sin": 5, "cos": 5, "tan": 6, "asin": 5,
        "acos": 5, "atan": 6, "sinh": 5, "cosh": 5, "tanh": 6, "atan2": 7, "pow": 17}
# An accuracy sweep over most of each C function's domain: on purpose wider than the builtins' declared
# sampling domains (Builtin.domain, where values and gradients are compared), which keep away from the edges.
DOMAIN = {"sqrt": (0.0, 50.0), "log": (1e-3, 50.0), "log2": (1e-3, 50.0), "log10": (1e-3, 50.0),
          "asin": (-1.0, 1.0), "acos": (-1.0, 1.0), "exp": (-20.0, 20.0), "sinh": (-10.0, 10.0),
          "cosh": (-10.0, 10.0), "tan": (-1.5, 1.5), "sin": (-40.0, 40.0), "cos": (-40.0, 40.0)}


def floats(dtype, lo=-5.0, hi=5.0, n=N):
    return RNG.uniform(lo, hi, n).astype(dtype)


def ulp_error(got, ref, dtype):
    """|got - ref| in units of the spacing of `ref` in `dtype` (NaNs must agree)."""
    got, ref = got.astype(np.float64), np.asarray(ref, np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    spacing = np.spacing(np.abs(ref[ok]).astype(dtype)).astype(np.float64)
    return np.max(np.abs(got[ok] - ref[ok]) / spacing, initial=0.0)


@pytest.mark.parametrize("t", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(ULPS))
def test_math_functions_within_ulp_bounds(name, t):
    dt = NP_OF[t]
    if name in ("atan2", "pow"):
        xs = [floats(dt, 0.05, 4.0), floats(dt, -4.0, 4.0)] if name == "pow" else [floats(dt), floats(dt)]
    else:
        xs = [floats(dt, *DOMAIN.get(name, (-5.0, 5.0)))]
    got = apply(name, xs, [t] * len(xs))
    assert got.dtype == dt
    with np.errstate(all="ignore"):
        ref = BUILTINS[name].eval(*[x.astype(np.float64) for x in xs])
    assert ulp_error(got, ref, dt) <= ULPS[name], name


EXACT_FLOAT = ["add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "neg", "abs", "sign", "floor",
               "ceil", "round", "clamp"]


@pytest.mark.parametrize("t", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", EXACT_FLOAT)
def test_exact_float_ops_match_numpy_bit_for_bit(name, t):
    dt = NP_OF[t]
    arity = {"neg": 1, "abs": 1, "sign": 1, "floor": 1, "ceil": 1, "round": 1, "clamp": 3}.get(name, 2)
    xs = [floats(dt, -9.0, 9.0) for _ in range(arity)]
    if name == "round":
        xs[0][:64] = np.arange(-32, 32).astype(dt) + dt(0.5)      # halves go away from zero
    if name in ("div", "floordiv", "mod"):
        xs[1][np.abs(xs[1]) < 0.25] = dt(0.5)
        xs[0][:8] = np.array([-7.0, 7.0, -6.0, 6.0, -0.0, 0.0, 1e-30, -1e-30], dt)
        xs[1][:8] = np.array([2.0, -2.0, 3.0, -3.0, 2.0, -2.0, 3.0, 3.0], dt)
    if name == "clamp":
        xs[1], xs[2] = np.minimum(xs[1], xs[2]), np.maximum(xs[1], xs[2])
    got = apply(name, xs, [t] * arity)
    ref = np.asarray(BUILTINS[name].eval(*xs)).astype(dt)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))


def ints(dtype, n=N):
    info = np.iinfo(dtype)
    out = RNG.integers(max(info.min, -1000), min(info.max, 1000), n, dtype=dtype, endpoint=True)
    out[:6] = np.array([0, 1, info.max, info.min, 7, 3 if info.min == 0 else -7], dtype=dtype)
    return out


@pytest.mark.parametrize("t", [I32, I64, U32], ids=["i32", "i64", "u32"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "floordiv", "mod", "min", "max", "abs", "sign", "neg",
                                  "clamp"])
def test_integer_ops_wrap_floor_and_never_trap(name, t):
    dt = NP_OF[t]
    arity = {"abs": 1, "sign": 1, "neg": 1, "clamp": 3}.get(name, 2)
    xs = [ints(dt) for _ in range(arity)]
    if name in ("floordiv", "mod"):
        xs[1][:32] = np.array([0, -1, 1, -1, 3, -3, 2, -2] * 4, dtype=np.int64).astype(dt)  # incl. x // 0
        xs[0][:32] = np.array([5, -5, -5, np.iinfo(dt).min, -7, 7, -7, 7] * 4, dtype=np.int64).astype(dt)
    if name == "clamp":
        xs[1], xs[2] = np.minimum(xs[1], xs[2]), np.maximum(xs[1], xs[2])
    got = apply(name, xs, [t] * arity)
    with np.errstate(all="ignore"):
        ref = np.asarray(BUILTINS[name].eval(*xs)).astype(dt)
    if name in ("floordiv", "mod"):
        ref = np.where(xs[1] == 0, dt(0), ref)          # base.py: division by zero gives 0
        if t is not U32:                                 # MIN // -1 wraps to MIN; MIN % -1 is 0
            mn = xs[0] == np.iinfo(dt).min
            ref = np.where(mn & (xs[1] == -1), dt(np.iinfo(dt).min) if name == "floordiv" else dt(0), ref)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("t", [F32, F64, I32, I64, U32], ids=["f32", "f64", "i32", "i64", "u32"])
def test_comparisons_and_where(t):
    dt = NP_OF[t]
    a = ints(dt) if not np.issubdtype(dt, np.floating) else np.round(floats(dt, -3, 3))
    b = ints(dt) if not np.issubdtype(dt, np.floating) else np.round(floats(dt, -3, 3))
    b[:100] = a[:100]
    if np.issubdtype(dt, np.floating):
        a[100:110] = np.nan                       # every comparison with NaN is false except `ne`
        b[105:115] = np.nan
    names = ("lt", "le", "gt", "ge", "eq", "ne")
    cond = RNG.integers(0, 2, N).astype(bool)
    got = apply_all([a, b, cond], [t, t, BOOL], [(n, [0, 1], {}) for n in names] + [("where", [2, 0, 1], {})])
    for name, g in zip(names, got):
        assert g.dtype == np.bool_
        np.testing.assert_array_equal(g, BUILTINS[name].eval(a, b), err_msg=name)
    np.testing.assert_array_equal(got[-1], np.where(cond, a, b))


def test_logic_on_bools():
    p, q = RNG.integers(0, 2, N).astype(bool), RNG.integers(0, 2, N).astype(bool)
    got = apply_all([p, q], [BOOL, BOOL], [("and", [0, 1], {}), ("or", [0, 1], {}), ("not", [0], {}),
                                           ("eq", [0, 1], {}), ("ne", [0, 1], {})])
    for g, ref in zip(got, (p & q, p | q, ~p, p == q, p != q)):
        np.testing.assert_array_equal(g, ref)


CASTABLE = [F32, F64, I32, I64, U32, BOOL]


@pytest.mark.parametrize("src", CASTABLE, ids=lambda t: t.name)
def test_casts_truncate_round_and_convert_bools(src):
    dt = NP_OF[src]
    if src.is_float:
        x = floats(dt, -1000.0, 1000.0)
        x[:8] = np.array([0.5, -0.5, 1.99, -1.99, 0.0, -0.0, 2.5, -2.5], dt)
    elif src.is_bool:
        x = RNG.integers(0, 2, N).astype(bool)
    else:
        x = ints(dt)
    # input 0: x; input 1: |x| (a negative float → uint32 is undefined in C)
    inputs = [x, np.abs(x) if src.is_float else x]
    got = apply_all(inputs, [src, src], [("cast", [1 if to is U32 else 0], {"to": to}) for to in CASTABLE])
    for to, g in zip(CASTABLE, got):
        ref = BUILTINS["cast"].eval(inputs[1 if to is U32 else 0], to)
        np.testing.assert_array_equal(g, ref, err_msg=f"{src.name} -> {to.name}")
