"""Whole tapes over the adjoint adds this round changed: thread-owned adds at `x[t, i]` (ad/owned.py: a step
argument `t` beside the thread id) and, on OpenCL, adds onto a work-group-uniform element summed across the
group (backends/opencl/aggregate.py: `adj_w[j]` inside every thread's loop over j). Several launches write
rows of one trajectory array and add into one weight gradient; the taped gradients, in float64 on every
device, are checked against central differences of the whole program along random directions."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk

F64 = gk.float64
STEPS, N, M = 5, 70_000, 24        # N threads: enough for the CPU pool to split the adjoint over workers


@gk.kernel
def advance(x: gk.array(dtype=F64, ndim=2), w: gk.array(dtype=F64), t: int):
    i = gk.tid()
    a = x[t, i]
    mix = gk.float64(0.0)
    for j in range(w.shape[0]):              # every thread reads w[j]: the adjoint adds onto one element at once
        mix += w[j] * gk.sin(a + gk.float64(0.1) * gk.float64(j))
    x[t + 1, i] = a + gk.float64(0.05) * mix


@gk.kernel
def energy(x: gk.array(dtype=F64, ndim=2), t: int, loss: gk.array(dtype=F64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[t, i] * x[t, i])


def program(x0: np.ndarray, w0: np.ndarray, device: str, tape: gk.Tape | None = None):
    start = np.zeros((STEPS + 1, N))
    start[0] = x0
    x = gk.array(start, dtype=F64, device=device, requires_grad=True)
    w = gk.array(w0, dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    with (tape if tape is not None else gk.no_grad()):
        for t in range(STEPS):
            gk.launch(advance, N, inputs=[x, w, t], device=device)
        gk.launch(energy, N, inputs=[x, STEPS], outputs=[loss], device=device)
    return x, w, loss


def loss_of(x0, w0, device) -> float:
    return float(program(x0, w0, device)[2].numpy()[0])


@pytest.mark.slow
def test_trajectory_tape_matches_central_differences(device, rng):
    x0 = rng.uniform(-1.0, 1.0, N)
    w0 = rng.uniform(-0.5, 0.5, M)
    tape = gk.Tape()
    x, w, loss = program(x0, w0, device, tape)
    tape.backward(loss=loss)
    gx0, gw = x.grad.numpy()[0].copy(), w.grad.numpy().copy()
    h = 1e-4        # the loss sums 70 000 squares: its rounding over 2h stays ~1e-6 of the derivative here
    for _ in range(2):
        vx, vw = rng.standard_normal(N), rng.standard_normal(M)
        fd = (loss_of(x0 + h * vx, w0 + h * vw, device) - loss_of(x0 - h * vx, w0 - h * vw, device)) / (2 * h)
        taped = float(gx0 @ vx + gw @ vw)
        assert taped == pytest.approx(fd, rel=2e-5)
    # each part alone too: the weight gradient (the uniform adds) and the state gradient (the owned adds)
    vw = rng.standard_normal(M)
    fd_w = (loss_of(x0, w0 + h * vw, device) - loss_of(x0, w0 - h * vw, device)) / (2 * h)
    assert float(gw @ vw) == pytest.approx(fd_w, rel=2e-5)
    vx = rng.standard_normal(N)
    fd_x = (loss_of(x0 + h * vx, w0, device) - loss_of(x0 - h * vx, w0, device)) / (2 * h)
    assert float(gx0 @ vx) == pytest.approx(fd_x, rel=2e-5)
