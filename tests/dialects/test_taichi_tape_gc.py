"""ti.ad.Tape pauses Python's cyclic garbage collector from entering to the end of its backward pass (its
records would otherwise set off full collections) and restores it however the block ends; gradients are
unchanged (checked against the analytic derivative)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import gradkit.taichi as ti


def _program(n=6):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy(k: ti.f64):
        for i in x:
            loss[None] += k * ti.sin(x[i]) * x[i]
    return x, loss, energy


def test_the_tape_pauses_the_collector_and_gives_the_analytic_gradient(rng):
    x, loss, energy = _program()
    xs = rng.uniform(-2, 2, 6)
    x.from_numpy(xs)
    assert gc.isenabled()
    seen = []
    with ti.ad.Tape(loss=loss):
        energy(0.5)
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    np.testing.assert_allclose(x.grad.to_numpy(), 0.5 * (np.cos(xs) * xs + np.sin(xs)), rtol=1e-13, atol=0)
    assert loss[None] == pytest.approx(float(np.sum(0.5 * np.sin(xs) * xs)), rel=1e-13)


def test_the_collector_is_restored_after_an_error_and_left_paused_if_it_was(rng):
    x, loss, energy = _program()
    x.from_numpy(rng.uniform(-2, 2, 6))
    with pytest.raises(ZeroDivisionError):
        with ti.ad.Tape(loss=loss):
            energy(0.5)
            1 / 0
    assert gc.isenabled()
    gc.disable()
    try:
        with ti.ad.Tape(loss=loss):
            energy(0.5)
        assert not gc.isenabled()           # the user's own pause stays
    finally:
        gc.enable()
