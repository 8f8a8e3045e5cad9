"""Backward's row-precise version check (runtime/tape/version_check.py) over a DiffTaichi-style trajectory,
with its per-pass memo: later tape launches writing rows no adjoint reads are accepted (gradient against the
float64 recurrence), one writing a row an earlier adjoint reads is refused, on every pass of the same tape."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def _advance(x: gk.array(dtype=float, ndim=2), v: gk.array(dtype=float, ndim=2), t: int, dt: float):
    i = gk.tid()
    v[t + 1, i] = v[t, i] - dt * gk.sin(x[t, i])
    x[t + 1, i] = x[t, i] + dt * v[t, i]


@gk.kernel
def _set_row(x: gk.array(dtype=float, ndim=2), t: int, value: float):
    i = gk.tid()
    x[t, i] = value


def _trajectory(device, rng, n, steps):
    x0, v0 = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    xs, vs = np.zeros((steps + 2, n), np.float32), np.zeros((steps + 2, n), np.float32)
    xs[0], vs[0] = x0, v0
    return (x0, v0, gk.array(xs, device=device, requires_grad=True),
            gk.array(vs, device=device, requires_grad=True))


def _reference(x0, v0, steps, dt):
    """x_T and d(sum x_T)/d(x_0, v_0) in float64 (forward recurrence, then its transpose)."""
    xs, vs = [x0], [v0]
    for _ in range(steps):
        x, v = xs[-1], vs[-1]
        vs.append(v - dt * np.sin(x))
        xs.append(x + dt * v)
    gx, gv = np.ones_like(x0), np.zeros_like(x0)
    for t in range(steps - 1, -1, -1):
        gx, gv = gx - dt * np.cos(xs[t]) * gv, gv + dt * gx
    return xs[-1], gx, gv


@pytest.mark.parametrize("passes", [1, 3])
def test_later_writes_to_unread_rows_are_accepted(device, rng, passes):
    n, steps, dt = 5, 120, 0.05
    x0, v0, x, v = _trajectory(device, rng, n, steps)
    with gk.Tape() as tape:
        for t in range(steps):
            gk.launch(_advance, n, inputs=[x, v, t, dt], device=device)
        gk.launch(_set_row, n, inputs=[x, steps + 1, 7.0], device=device)    # a row no adjoint reads
    xt, gx, gv = _reference(x0, v0, steps, dt)
    seed = np.zeros((steps + 2, n), np.float32)
    seed[steps] = 1.0
    for _ in range(passes):
        x.grad.zero_()
        v.grad.zero_()
        tape.backward(grads={x: gk.array(seed, device=device)})
    np.testing.assert_allclose(x.numpy()[steps], xt, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy()[0], gx, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(v.grad.numpy()[0], gv, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("row", [0, 37])
def test_a_later_write_into_a_read_row_is_refused(device, rng, row):
    n, steps, dt = 5, 60, 0.05
    _, _, x, v = _trajectory(device, rng, n, steps)
    with gk.Tape() as tape:
        for t in range(steps):
            gk.launch(_advance, n, inputs=[x, v, t, dt], device=device)
        gk.launch(_set_row, n, inputs=[x, row, 7.0], device=device)
    seed = np.zeros((steps + 2, n), np.float32)
    seed[steps] = 1.0
    for _ in range(2):                          # the memo of one pass does not excuse the next
        with pytest.raises(gk.GradientRuleError, match=f"row {row}"):
            tape.backward(grads={x: gk.array(seed, device=device)})
