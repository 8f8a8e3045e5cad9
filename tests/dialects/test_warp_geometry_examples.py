"""Warp's examples that need wp.HashGrid, taken from the installed warp package at test time and run twice
in the same test: by Warp 1.19 as written and by gradkit with only the `import warp` lines changed
(tests/dialects/warp_examples.py), a few substeps each (rendering off);
positions and velocities agree to float32 tolerance."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from tests.dialects.warp_examples import close as _close, load, quiet as _quiet, run_both

warp = pytest.importorskip("warp")
warp.config.quiet = True
warp.init()        # the examples build a wp.HashGrid before their first launch initialises Warp


def test_sph_runs_unchanged():
    """core/example_sph.py: 62,500 particles, density and pressure/viscosity forces over wp.HashGrid
    neighbours (`for index in neighbors`), wp.randn jitter; two frames of 2 substeps each. Only the import
    changes: its diff_pressure_kernel and diff_viscous_kernel return from inside a branch without a return
    annotation (typed by their first return, as Warp types them)."""
    ex = {}
    for gk in (False, True):
        mod = load("core/example_sph.py", gradkit=gk)
        e = mod.Example(stage_path=None)
        e.sim_step_to_frame_ratio = 2
        for _ in range(2):
            _quiet(e.step)
        ex[gk] = e
    _close(ex[True].x.numpy(), ex[False].x.numpy(), rtol=1e-5, atol=1e-6)
    _close(ex[True].v.numpy(), ex[False].v.numpy(), rtol=1e-3, atol=1e-3)
    _close(ex[True].rho.numpy(), ex[False].rho.numpy(), rtol=1e-5, atol=1e-5)
    assert np.abs(ex[False].v.numpy()).max() > 1e-2            # the fluid moved


def test_dem_runs_unchanged():
    """core/example_dem.py: particles on a 128^3 wp.HashGrid, contact and friction forces over neighbours,
    `min` of Python; two frames of 8 substeps. The example's 32x64x32 block of particles (a second per
    substep in each framework on this CPU) is made 8x16x8 by wrapping its `particle_grid` method, in both
    runs alike; its source is unchanged."""
    ex = {}
    for gk in (False, True):
        mod = load("core/example_dem.py", gradkit=gk)
        full = mod.Example.particle_grid
        mod.Example.particle_grid = lambda self, dx, dy, dz, *rest: full(self, dx // 4, dy // 4, dz // 4, *rest)
        e = mod.Example(stage_path=None)
        e.sim_substeps = 8
        for _ in range(2):
            _quiet(e.step)
        ex[gk] = e
    _close(ex[True].x.numpy(), ex[False].x.numpy(), rtol=1e-5, atol=1e-6)
    _close(ex[True].v.numpy(), ex[False].v.numpy(), rtol=1e-4, atol=1e-5)


def test_particle_repulsion_runs_unchanged():
    """optim/example_particle_repulsion.py: the NVIDIA logo's particles on a periodic 128x128x1 wp.HashGrid,
    Coulomb repulsion and damping; two frames of 8 substeps. Only the import changes: its force is
    `f_i -= wp.grad(compute_potential)(d)` of a vec3 `d` (Warp's wp.grad: dialects/warp/grad.py)."""
    pytest.importorskip("PIL")
    ex = run_both("optim/example_particle_repulsion.py", setup=lambda e: setattr(e, "sim_substeps", 8))
    _close(ex[True].positions.numpy(), ex[False].positions.numpy(), rtol=1e-5, atol=1e-6)
    _close(ex[True].velocities.numpy(), ex[False].velocities.numpy(), rtol=1e-3, atol=1e-4)
    assert np.abs(ex[False].velocities.numpy()).max() > 1e-3
