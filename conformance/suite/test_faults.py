"""Faults a backend reports instead of crashing or writing wrong memory: with `gk.config.debug = True` an
out-of-range read, write or atomic is an IndexError naming the kernel, the array, the index, the axis and
the extent, and nothing outside the array is written; a reverse pass deeper than the value stack is a
StackOverflowError naming the kernel and `adjoint_stack_size`. A launch after a fault works normally."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.conformance.plugin import require


@gk.kernel
def shifted_read(x: gk.array(dtype=float), y: gk.array(dtype=float), off: int):
    i = gk.tid()
    y[i] = x[i + off]


@gk.kernel
def shifted_write(x: gk.array(dtype=float), y: gk.array(dtype=float), off: int):
    i = gk.tid()
    y[i + off] = x[i]


@gk.kernel
def scatter(idx: gk.array(dtype=int), y: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(y, idx[i], 1.0)


@gk.kernel
def rows(m: gk.array(dtype=float, ndim=2), out: gk.array(dtype=float), j: int):
    i = gk.tid()
    out[i] = m[i, j]


@pytest.fixture
def debug():
    old = gk.config.debug
    gk.config.debug = True
    yield
    gk.config.debug = old


def test_out_of_range_accesses_are_index_errors(device, debug):
    require(device, "bounds")
    x, y = gk.ones(16, device=device), gk.zeros(16, device=device)
    guard = gk.zeros(64, device=device)
    with pytest.raises(IndexError, match=r"shifted_read.*index 16.*axis 0.*'x'.*extent 16"):
        gk.launch(shifted_read, 16, inputs=[x, y, 1], device=device)
    with pytest.raises(IndexError, match=r"shifted_write.*index 1[6-8].*axis 0.*'y'.*extent 16"):
        gk.launch(shifted_write, 16, inputs=[x, y, 3], device=device)
    with pytest.raises(IndexError, match=r"scatter.*'y'.*extent 16"):
        gk.launch(scatter, 4, inputs=[gk.array(np.array([0, 5, 16, -1], np.int32), device=device), y],
                  device=device)
    m = gk.ones((4, 3), device=device)
    with pytest.raises(IndexError, match=r"rows.*index 3.*axis 1.*'m'.*extent 3"):
        gk.launch(rows, 4, inputs=[m, gk.zeros(4, device=device), 3], device=device)
    assert float(np.abs(guard.numpy()).sum()) == 0.0
    # the device works normally afterwards
    gk.launch(shifted_read, 15, inputs=[x, y, 1], device=device)
    np.testing.assert_array_equal(y.numpy()[:15], 1.0)


@gk.kernel
def product_loop(x: gk.array(dtype=float), out: gk.array(dtype=float), n: int):
    p = float(1.0)
    for k in range(n):
        p = p * gk.sin(x[k])
    out[0] = p


def test_value_stack_overflow_is_an_error_and_within_it_gradients_are_right(device, rng):
    require(device, "stack")
    old = gk.config.adjoint_stack_size
    gk.config.adjoint_stack_size = 16
    try:
        x0 = rng.uniform(0.5, 1.5, 100)
        x = gk.array(x0.astype(np.float32), device=device, requires_grad=True)
        out = gk.zeros(1, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(product_loop, 1, inputs=[x, out, 100], device=device)
        with pytest.raises(gk.StackOverflowError, match=r"product_loop.*test_faults.py:\d+.*adjoint_stack_size"):
            tape.backward(loss=out)
        tape = gk.Tape()
        x.grad.zero_()
        with tape:
            gk.launch(product_loop, 1, inputs=[x, out, 12], device=device)      # 12 iterations fit
        tape.backward(loss=out)
        s = np.sin(x0[:12].astype(np.float32).astype(np.float64))
        want = np.prod(s) / s * np.cos(x0[:12].astype(np.float32).astype(np.float64))
        np.testing.assert_allclose(x.grad.numpy()[:12], want, rtol=1e-4)
        np.testing.assert_array_equal(x.grad.numpy()[12:], 0.0)
    finally:
        gk.config.adjoint_stack_size = old
