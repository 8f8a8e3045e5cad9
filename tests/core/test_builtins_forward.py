"""Every builtin's forward value against NumPy float64, in float32 and float64, on every device."""

import math

import numpy as np
import pytest

import gradkit as gk
from tests.builtin_table import BINARY, OPERATORS, TOL, UNARY, operator_kernel

DTYPES = [gk.float32, gk.float64]


def _unary_kernel(fn, T):
    @gk.kernel
    def k(x: gk.array(dtype=T), y: gk.array(dtype=T)):
        i = gk.tid()
        y[i] = fn(x[i])
    return k


def _binary_kernel(fn, T):
    @gk.kernel
    def k(a: gk.array(dtype=T), b: gk.array(dtype=T), y: gk.array(dtype=T)):
        i = gk.tid()
        y[i] = fn(a[i], b[i])
    return k


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype, device, rng):
    fn, ref, _, (lo, hi) = UNARY[name]
    x = rng.uniform(lo, hi, 257).astype(dtype.np_dtype)
    if name == "round":
        x[:4] = [0.5, -0.5, 1.5, -2.5]          # half away from zero
    xa = gk.array(x, device=device)
    ya = gk.zeros(len(x), dtype=dtype, device=device)
    gk.launch(_unary_kernel(fn, dtype), len(x), inputs=[xa], outputs=[ya], device=device)
    np.testing.assert_allclose(ya.numpy(), ref(x.astype(np.float64)), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype, device, rng):
    fn, ref, _, (da, db) = BINARY[name]
    a = rng.uniform(*da, 129).astype(dtype.np_dtype)
    b = rng.uniform(*db, 129).astype(dtype.np_dtype)
    y = gk.zeros(129, dtype=dtype, device=device)
    gk.launch(_binary_kernel(fn, dtype), 129, inputs=[gk.array(a, device=device), gk.array(b, device=device)],
              outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), ref(a.astype(np.float64), b.astype(np.float64)), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operators(name, dtype, device, rng):
    op, _ = OPERATORS[name]
    a = rng.uniform(-2, 2, 100).astype(dtype.np_dtype)
    b = rng.uniform(0.5, 2, 100).astype(dtype.np_dtype)
    y = gk.zeros(100, dtype=dtype, device=device)
    gk.launch(operator_kernel(name, dtype), 100, inputs=[gk.array(a, device=device), gk.array(b, device=device)],
              outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), op(a.astype(np.float64), b.astype(np.float64)), **TOL[dtype])


@gk.kernel
def int_ops(a: gk.array(dtype=int), b: gk.array(dtype=int), out: gk.array(dtype=int, ndim=2)):
    i = gk.tid()
    x = a[i]
    y = b[i]
    out[i, 0] = x // y
    out[i, 1] = x % y
    out[i, 2] = gk.min(x, y)
    out[i, 3] = gk.max(x, y)
    out[i, 4] = gk.abs(x)
    out[i, 5] = x * y - x + y
    out[i, 6] = gk.clamp(x, -3, 3)
    out[i, 7] = x ** 2


def test_integer_semantics(device, rng):
    """Python floored // and %; division by zero gives 0 instead of trapping."""
    a = rng.integers(-50, 50, 200).astype(np.int32)
    b = rng.integers(-7, 8, 200).astype(np.int32)
    b[:5] = 0
    out = gk.zeros((200, 8), dtype=gk.int32, device=device)
    gk.launch(int_ops, 200, inputs=[gk.array(a, device=device), gk.array(b, device=device)], outputs=[out],
              device=device)
    got = out.numpy()
    safe = np.where(b == 0, 1, b)
    np.testing.assert_array_equal(got[:, 0], np.where(b == 0, 0, a // safe))
    np.testing.assert_array_equal(got[:, 1], np.where(b == 0, 0, a % safe))
    np.testing.assert_array_equal(got[:, 2], np.minimum(a, b))
    np.testing.assert_array_equal(got[:, 3], np.maximum(a, b))
    np.testing.assert_array_equal(got[:, 4], np.abs(a))
    np.testing.assert_array_equal(got[:, 5], a * b - a + b)
    np.testing.assert_array_equal(got[:, 6], np.clip(a, -3, 3))
    np.testing.assert_array_equal(got[:, 7], a * a)


@gk.kernel
def casts(x: gk.array(dtype=float), i_out: gk.array(dtype=int), f_out: gk.array(dtype=gk.float64),
          b_out: gk.array(dtype=gk.int32)):
    i = gk.tid()
    i_out[i] = int(x[i])
    f_out[i] = gk.float64(x[i]) * 2.0
    b_out[i] = gk.int32(bool(x[i]))


def test_casts(device, rng):
    x = rng.uniform(-5, 5, 64).astype(np.float32)
    x[0] = 0.0
    xa = gk.array(x, device=device)
    io, fo, bo = (gk.zeros(64, dtype=t, device=device) for t in (gk.int32, gk.float64, gk.int32))
    gk.launch(casts, 64, inputs=[xa], outputs=[io, fo, bo], device=device)
    np.testing.assert_array_equal(io.numpy(), np.trunc(x).astype(np.int32))
    np.testing.assert_allclose(fo.numpy(), x.astype(np.float64) * 2.0)
    np.testing.assert_array_equal(bo.numpy(), (x != 0).astype(np.int32))


def test_every_public_math_builtin_has_a_table_row():
    """A public float builtin (a C math function or float-only) is tested through tests/builtin_table.py's
    rows, forward here and both gradient modes in tests/ad/test_builtin_grads.py: adding one without its row
    fails here."""
    from gradkit.core.builtins import BUILTINS
    math_builtins = {n for n, e in BUILTINS.items() if e.public and (e.float_only or e.cmath)}
    assert math_builtins - set(UNARY) - set(BINARY) == set()


@gk.kernel
def _python_math(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = math.erf(x[i]) + math.tanh(x[i]) * math.log2(x[i] + 3.0) + math.asin(x[i] * 0.5)


def test_python_math_functions_are_the_builtins(device, rng):
    """`math.<f>` inside a kernel is gk.<f> for every builtin computed by the C function of that name."""
    x = rng.uniform(-1.5, 1.5, 65)
    y = gk.zeros(65, dtype=gk.float64, device=device)
    gk.launch(_python_math, 65, inputs=[gk.array(x, device=device)], outputs=[y], device=device)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(y.numpy(), erf(x) + np.tanh(x) * np.log2(x + 3) + np.arcsin(x / 2), rtol=1e-12)


@gk.kernel
def _int_edges(a: gk.array(dtype=gk.int32), b: gk.array(dtype=gk.int32), q: gk.array(dtype=gk.int32),
               r: gk.array(dtype=gk.int32), s: gk.array(dtype=gk.int32)):
    i = gk.tid()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    s[i] = gk.abs(a[i]) + gk.sign(b[i]) + gk.clamp(a[i], -5, 5)


@gk.kernel
def _float_edges(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = gk.sign(x[i])


def test_expanded_primitives_at_their_edges(device):
    """The expand pass's floored // and %, abs, sign and clamp at the edges every backend must agree on:
    division by 0 gives 0, MIN // -1 wraps, signs of the remainder follow the divisor, abs(MIN) wraps, and a
    float sign is NumPy's (NaN stays NaN, ±0 gives +0; before the expand pass the CPU gave 0 for NaN and
    OpenCL -0.0 for -0.0)."""
    lo = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, -7, 7, lo, lo, 0, 5, -9, lo, 3], np.int32)
    b = np.array([3, 3, -3, -3, 0, -1, 1, 4, -1, 2, 7, 0], np.int32)
    out = [gk.zeros(len(a), dtype=gk.int32, device=device) for _ in range(3)]
    gk.launch(_int_edges, len(a), inputs=[gk.array(a, device=device), gk.array(b, device=device)], outputs=out,
              device=device)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    wrap = lambda v: ((v + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.testing.assert_array_equal(out[0].numpy(), wrap(np.where(b64 == 0, 0, a64 // safe)))
    np.testing.assert_array_equal(out[1].numpy(), wrap(np.where(b64 == 0, 0, a64 % safe)))
    np.testing.assert_array_equal(out[2].numpy(), wrap(np.abs(a64) + np.sign(b64) + np.clip(a64, -5, 5)))
    x = np.array([np.nan, 0.0, -0.0, 2.5, -1e-300, np.inf, -np.inf])
    y = gk.zeros(len(x), dtype=gk.float64, device=device)
    gk.launch(_float_edges, len(x), inputs=[gk.array(x, device=device)], outputs=[y], device=device)
    got = y.numpy()
    np.testing.assert_array_equal(got, np.sign(x))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.sign(x)))
