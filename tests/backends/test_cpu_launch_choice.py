"""The CPU backend runs a straight-line kernel of INLINE_BELOW..CHOOSE_BELOW threads on the calling thread or
over the pool, whichever it measured faster at that power-of-two size (backends/cpu/backend.py): the choice
follows the timings, sizes outside the range and kernels with loops never choose, and every launch gives
the same numbers whichever way it ran."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.cpu.backend import CHOOSE_BELOW, INLINE_BELOW, TRIES


@gk.kernel
def axpy(x: gk.array(dtype=float), y: gk.array(dtype=float), a: float):
    i = gk.tid()
    y[i] = a * x[i] + y[i]


@gk.kernel
def summed(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = 0.0
    for k in range(3):
        s += x[i] * float(k)
    y[i] = s


def _compiled(kernel):
    return kernel.specialization(gk.get_device("cpu"), "forward").compiled


def test_the_faster_way_is_chosen_after_timing_both():
    c = _compiled(axpy)
    c.ways.clear()
    n = INLINE_BELOW * 2
    for _ in range(TRIES):
        assert not c.inline(n)             # pooled first
        c.timed(n, False, 1000 * n)
    for _ in range(TRIES):
        assert c.inline(n)                 # then on the calling thread
        c.timed(n, True, 300 * n)
    assert c.inline(n)                     # inline was faster
    c.ways.clear()
    for _ in range(TRIES):
        c.timed(n, False, 100 * n)
        c.timed(n, True, 300 * n)
    assert not c.inline(n)                 # the pool was faster
    assert not c.inline(2 * n)             # another size has its own record: pooled first
    assert not c.inline(CHOOSE_BELOW)      # large launches always take the pool


def test_kernels_with_loops_never_choose():
    c = _compiled(summed)
    assert c.choose_below <= c.inline_below


@pytest.mark.parametrize("n", [INLINE_BELOW, INLINE_BELOW * 3 + 7, 1 << 18])
def test_both_ways_give_the_same_numbers(n):
    rng = np.random.default_rng(n)
    x_np = rng.uniform(-1, 1, n).astype(np.float32)
    y_np = rng.uniform(-1, 1, n).astype(np.float32)
    x, y = gk.array(x_np, device="cpu"), gk.array(y_np, device="cpu")
    want = y_np.astype(np.float64)
    c = _compiled(axpy)
    c.ways.clear()
    ways = set()
    for k in range(2 * TRIES + 3):          # pooled, inline, then the chosen way
        ways.add(c.inline(n) if n < CHOOSE_BELOW else False)
        gk.launch(axpy, n, inputs=[x, y, 0.5], device="cpu")
        want = 0.5 * x_np.astype(np.float64) + want
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    assert ways == {True, False}
