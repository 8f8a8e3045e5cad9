"""Warp's own examples that need no geometry, taken from the installed warp package at test time and run
twice in the same test: by Warp 1.19 as written and by gradkit with only the `import warp` lines changed
(tests/dialects/warp_examples.py), a few steps each; states, losses and gradients agree to float32
tolerance."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from tests.dialects.warp_examples import close as _close, load, quiet as _quiet, run_both

warp = pytest.importorskip("warp")
warp.config.quiet = True


def test_wave_runs_unchanged():
    """core/example_wave.py: wave equation on a 128x128 grid, `%` and `//` on the thread index, @wp.func,
    wp.ScopedTimer and wp.render.UsdRenderer (headless) — three frames of 16 substeps."""
    ex = {}
    for gk in (False, True):
        mod = load("core/example_wave.py", gradkit=gk)
        e = mod.Example(stage_path=None)
        for _ in range(3):
            _quiet(e.step)
        ex[gk] = e
    _close(ex[True].sim_grid0.numpy(), ex[False].sim_grid0.numpy())
    _close(ex[True].sim_verts.numpy(), ex[False].sim_verts.numpy())
    assert np.abs(ex[False].sim_grid0.numpy()).max() > 0.1          # the wave moved


def test_wave_with_a_renderer_is_headless(tmp_path, capsys):
    mod = load("core/example_wave.py", gradkit=True)
    e = mod.Example(stage_path=str(tmp_path / "wave.usd"))
    _quiet(e.step)
    e.render()
    assert not (tmp_path / "wave.usd").exists()


def test_fluid_runs_unchanged():
    """core/example_fluid.py: stable fluids on 256x128 with 100 Jacobi iterations a substep captured with
    wp.ScopedCapture and replayed by wp.capture_launch; wp.constant, wp.lerp, 2-D arrays of vec2; its
    lookup_vel returns from inside a branch without a return annotation (typed by its first return, as
    Warp types it). Only the import changes."""
    ex = run_both("core/example_fluid.py", (), setup=lambda e: setattr(e, "iterations", 100))
    _close(ex[True].rho0.numpy(), ex[False].rho0.numpy(), rtol=1e-3, atol=1e-4)
    _close(ex[True].u0.numpy(), ex[False].u0.numpy(), rtol=1e-3, atol=1e-4)
    assert ex[False].rho0.numpy().max() > 0.5


def test_fluid_checkpoint_gradients_match():
    """optim/example_fluid_checkpoint.py: a differentiable fluid with manual checkpointing (two segments,
    tapes replayed segment by segment, adjoint launches with adj_inputs/adj_outputs, `%` on negative
    indices in cyclic_index) and warp.optim.Adam; loss, initial-velocity gradients and one Adam step."""
    out = {}
    for gk in (False, True):
        mod = load("optim/example_fluid_checkpoint.py", gradkit=gk)
        e = mod.Example(sim_steps=2, pressure_iterations=3, segment_size=1)
        # a non-zero initial velocity, the same for both
        rng = np.random.default_rng(7)
        vx0 = rng.normal(0.0, 2.0, e.vx_arrays[0].shape).astype(np.float32)
        vy0 = rng.normal(0.0, 2.0, e.vy_arrays[0].shape).astype(np.float32)
        e.vx_arrays[0].assign(vx0)
        e.vy_arrays[0].assign(vy0)
        e.forward()
        e.backward()
        loss = float(e.loss.numpy()[0])
        gx, gy = e.vx_arrays[0].grad.numpy().copy(), e.vy_arrays[0].grad.numpy().copy()
        e.optimizer.step([e.vx_arrays[0].grad.flatten(), e.vy_arrays[0].grad.flatten()])
        out[gk] = loss, gx, gy, e.vx_arrays[0].numpy().copy()
    assert out[True][0] == pytest.approx(out[False][0], rel=1e-5)
    assert np.abs(out[False][1]).max() > 0
    for k in (1, 2, 3):
        _close(out[True][k], out[False][k], rtol=1e-3, atol=1e-4)


def test_raymarch_runs_unchanged():
    """core/example_raymarch.py: an SDF ray marcher (quat_rpy, quat_rotate, loops re-assigning locals,
    `**` of floats) on a 64x32 image. Only the import changes: `d`, first assigned inside the march loop,
    is read after it (Warp's rule: the last trip's value), and shadow() returns from inside its loop
    without a return annotation."""
    px = {}
    for gk in (False, True):
        mod = load("core/example_raymarch.py", gradkit=gk)
        e = mod.Example(height=32, width=64)
        _quiet(e.render)
        px[gk] = e.pixels.numpy()
    close = np.isclose(px[True], px[False], rtol=1e-3, atol=1e-3).all(axis=1)
    assert close.mean() > 0.99, f"{(~close).sum()} of {close.size} pixels differ"
