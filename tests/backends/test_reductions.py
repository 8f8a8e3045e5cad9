"""Reductions onto one element (partial sums per chunk or work-group) on every device: exact sums, and
no deferral when the kernel also reads the accumulated element (each thread must see its own add)."""

import numpy as np

import gradkit as gk


@gk.kernel
def sum_squares(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


@gk.kernel
def add_then_read(x: gk.array(dtype=float), total: gk.array(dtype=float), seen: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(total, 0, x[i])
    seen[i] = total[0]


def test_reduction_sum_matches_float64(device, rng):
    x0 = rng.uniform(-1, 1, 100_003).astype(np.float32)
    loss = gk.zeros(1, device=device)
    gk.launch(sum_squares, x0.size, inputs=[gk.array(x0, device=device)], outputs=[loss], device=device)
    expected = np.sum(x0.astype(np.float64) ** 2)
    np.testing.assert_allclose(loss.numpy()[0], expected, rtol=1e-5)


def test_thread_sees_its_own_atomic_add(device, rng):
    x0 = rng.uniform(0.5, 1.5, 4099).astype(np.float32)
    total = gk.zeros(1, device=device)
    seen = gk.zeros(x0.size, device=device)
    gk.launch(add_then_read, x0.size, inputs=[gk.array(x0, device=device)], outputs=[total, seen], device=device)
    np.testing.assert_allclose(total.numpy()[0], np.sum(x0.astype(np.float64)), rtol=1e-5)
    # every thread added a positive value before reading: it reads at least its own contribution
    assert np.all(seen.numpy() >= x0 * (1 - 1e-6))
