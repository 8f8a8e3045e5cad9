"""Accuracy of the LLVM backend's vectorisable math functions (backends/llvm/mathlib.py): max ULP error on
dense sweeps against NumPy float64, and IEEE special values (inf, NaN, signed zeros) like NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from gradkit.core import types as T

from test_llvm_support import apply

NP = dict(sin=np.sin, cos=np.cos, tan=np.tan, exp=np.exp, log=np.log, log2=np.log2, log10=np.log10,
          asin=np.arcsin, acos=np.arccos, atan=np.arctan, sinh=np.sinh, cosh=np.cosh, tanh=np.tanh,
          pow=np.power, atan2=np.arctan2)
SWEEP = 400_001

# name: (float32 inputs, float64 inputs, max ULP float32, max ULP float64) — the table in mathlib.py
def _trig(big):
    return lambda rng: np.concatenate([np.linspace(-10, 10, SWEEP // 2), rng.uniform(-big, big, SWEEP // 2)])


def _logs(tiny):
    return lambda rng: np.concatenate([np.geomspace(tiny, 1e30, SWEEP // 2), np.linspace(0.5, 2, SWEEP // 2)])


TABLE = {
    "sin": (_trig(1e4), _trig(1e5), 2, 2),
    "cos": (_trig(1e4), _trig(1e5), 2, 2),
    "tan": (_trig(1e4), _trig(1e4), 4, 4),
    "exp": (lambda r: np.linspace(-100, 88, SWEEP), lambda r: np.linspace(-740, 709, SWEEP), 1, 1),
    "log": (_logs(1e-44), _logs(1e-320), 2, 1),
    "log2": (_logs(1e-44), _logs(1e-320), 2, 2),
    "log10": (_logs(1e-44), _logs(1e-320), 2, 3),
    "asin": (lambda r: np.linspace(-1, 1, SWEEP),) * 2 + (3, 2),
    "acos": (lambda r: np.linspace(-1, 1, SWEEP),) * 2 + (2, 1),
    "atan": (lambda r: np.concatenate([np.linspace(-10, 10, SWEEP // 2), r.uniform(-1e4, 1e4, SWEEP // 2)]),) * 2
    + (3, 2),
    "sinh": (lambda r: np.linspace(-88, 88, SWEEP), lambda r: np.linspace(-709, 709, SWEEP), 2, 2),
    "cosh": (lambda r: np.linspace(-88, 88, SWEEP), lambda r: np.linspace(-709, 709, SWEEP), 2, 1),
    "tanh": (lambda r: np.linspace(-20, 20, SWEEP),) * 2 + (2, 2),
}


def ulp_error(got: np.ndarray, ref64: np.ndarray, dt) -> np.ndarray:
    """|got - ref| in units of the spacing of the result type at ref (0 where both are NaN or equal)."""
    with np.errstate(over="ignore", invalid="ignore"):
        ref_t = ref64.astype(dt)
        spacing = np.spacing(np.abs(ref_t)).astype(np.float64)
        spacing = np.where(spacing == 0, np.finfo(dt).smallest_subnormal, spacing)
        err = np.abs(got.astype(np.float64) - ref64) / spacing
    same = (got == ref_t) | (np.isnan(got) & np.isnan(ref64))
    return np.where(same, 0.0, err)


def _run(name, t, *inputs):
    return apply(name, [t] * len(inputs), t, lambda b, *a: b.prim(name, *a), list(inputs))


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(TABLE))
def test_unary_ulp(name, t, rng):
    in32, in64, b32, b64 = TABLE[name]
    dt = np.float32 if t is T.float32 else np.float64
    x = (in32 if dt is np.float32 else in64)(rng).astype(dt)
    got = _run(name, t, x)
    err = ulp_error(got, NP[name](x.astype(np.float64)), dt)
    k = int(np.argmax(err))
    assert err[k] <= (b32 if dt is np.float32 else b64), f"{name}({x[k]!r}) = {got[k]!r}: {err[k]:.2f} ULP"


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
def test_pow_ulp(t, rng):
    dt = np.float32 if t is T.float32 else np.float64
    x, y = rng.uniform(0, 100, SWEEP).astype(dt), rng.uniform(-20, 20, SWEEP).astype(dt)
    err = ulp_error(_run("pow", t, x, y), np.power(x.astype(np.float64), y.astype(np.float64)), dt)
    assert err.max() <= (1 if dt is np.float32 else 2)


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
def test_atan2_ulp(t, rng):
    dt = np.float32 if t is T.float32 else np.float64
    x = (rng.standard_normal(SWEEP) * 10.0 ** rng.uniform(-3, 3, SWEEP)).astype(dt)
    y = rng.standard_normal(SWEEP).astype(dt)
    err = ulp_error(_run("atan2", t, y, x), np.arctan2(y.astype(np.float64), x.astype(np.float64)), dt)
    assert err.max() <= 3


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan, 1e-30,
                    1e30, -1e30, 100.0, -100.0, 1000.0, -1000.0])


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(TABLE))
def test_unary_special_values(name, t):
    dt = np.float32 if t is T.float32 else np.float64
    x = SPECIAL.astype(dt)
    if name in ("sin", "cos", "tan"):
        x = x[~(np.abs(x) >= 1e30)]              # past the accurate range: see test_trig_huge_arguments
    got = _run(name, t, x)
    with np.errstate(all="ignore"):
        ref = NP[name](x.astype(np.float64))
    err = ulp_error(got, ref, dt)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), f"{name}: NaN pattern {got} vs {ref}"
    assert err.max() <= 4, f"{name}: {got} vs {ref}"
    zero = ref == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(ref[zero])), f"{name}: signed zeros"


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
@pytest.mark.parametrize("name", ["pow", "atan2"])
def test_binary_special_values(name, t):
    dt = np.float32 if t is T.float32 else np.float64
    vals = np.concatenate([SPECIAL, [0.25, 4.0, -4.0, 0.75, 1.5, -1.5]])
    x, y = (g.reshape(-1).astype(dt) for g in np.meshgrid(vals, vals))
    got = _run(name, t, x, y)
    with np.errstate(all="ignore"):
        ref = NP[name](x.astype(np.float64), y.astype(np.float64))
    nan_ok = np.isnan(got) == np.isnan(ref)
    assert nan_ok.all(), f"{name}: NaN mismatch at x={x[~nan_ok]} y={y[~nan_ok]}: {got[~nan_ok]} vs {ref[~nan_ok]}"
    err = ulp_error(got, ref, dt)
    k = int(np.argmax(err))
    assert err[k] <= 4, f"{name}({x[k]}, {y[k]}) = {got[k]} vs {ref[k]}"
    zero = ref == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(ref[zero])), f"{name}: signed zeros"


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
def test_trig_huge_arguments_stay_bounded(t, rng):
    dt = np.float32 if t is T.float32 else np.float64
    x = (rng.choice([-1, 1], 10_000) * 10.0 ** rng.uniform(6 if dt is np.float32 else 14, 37, 10_000)).astype(dt)
    for name in ("sin", "cos"):
        got = _run(name, t, x)
        assert np.isfinite(got).all() and np.abs(got).max() <= 1.0
    assert np.isfinite(_run("tan", t, x)).all()
    lim = 2.0 ** 20 if dt is np.float32 else 2.0 ** 49        # the documented accurate range
    near = rng.uniform(-lim, lim, 100_000).astype(dt)
    for name, f in (("sin", np.sin), ("cos", np.cos)):
        assert ulp_error(_run(name, t, near), f(near.astype(np.float64)), dt).max() <= 2
