"""Warp's examples that need wp.Mesh, taken from the installed warp package at test time and run by Warp
1.19 as written and by gradkit with only the `import warp` lines changed (tests/dialects/warp_examples.py),
rendering off: core/example_raycast.py (mesh_query_ray, normals) and core/example_mesh.py (particles
against a deforming mesh: mesh_query_point_sign_normal, mesh_eval_position, refit every step).

Both read bunny.usd through OpenUSD's `pxr`, which is not installed here: a stand-in `pxr` module (the same
in both runs) gives them a closed, jittered sphere mesh in the bunny's place, so what is compared is the
geometry code, not the asset. example_mesh_intersect.py and optim/example_diffray.py, which need
transforms and intersect_tri_tri besides Mesh, run in test_warp_transform_examples.py."""

from __future__ import annotations

import contextlib
import io
import sys
import types

import numpy as np
import pytest

from tests.dialects.warp_examples import close as _close, load, quiet as _quiet, run_both
from gradkit.warp.examples import stand_in_pxr
from tests.geometry.test_mesh import sphere

warp = pytest.importorskip("warp")
warp.config.quiet = True
warp.init()


_fake_pxr = stand_in_pxr


@pytest.fixture
def stand_in_bunny(monkeypatch):
    rng = np.random.default_rng(7)
    pts, tris = sphere(16, 0.05, rng)
    pts = (pts * 0.5 + np.array([0.0, 0.5, 0.0])).astype(np.float32)     # about the bunny's size and place
    monkeypatch.setitem(sys.modules, "pxr", _fake_pxr(pts, tris.reshape(-1)))


def test_raycast_matches_warp(stand_in_bunny):
    """core/example_raycast.py at 64x64: one ray per pixel, colour = normal of the first hit."""
    pixels = {}
    for gk in (False, True):
        mod = load("core/example_raycast.py", gradkit=gk)
        e = mod.Example(height=64, width=64)
        _quiet(e.render)
        pixels[gk] = e.pixels.numpy()
    hit = np.abs(pixels[False]).sum(1) > 0
    assert hit.mean() > 0.03
    np.testing.assert_array_equal(np.abs(pixels[True]).sum(1) > 0, hit)
    np.testing.assert_allclose(pixels[True], pixels[False], rtol=1e-5, atol=1e-5)


def test_mesh_particles_match_warp(stand_in_bunny):
    """core/example_mesh.py: 1,000 particles falling onto a deforming mesh (refit each step); 30 steps,
    from 12 units lower than the example starts them (set from outside; its source is unchanged)."""
    ex = {}
    for gk in (False, True):
        mod = load("core/example_mesh.py", gradkit=gk)
        e = mod.Example(stage_path=None)
        # the particles start 15-25 units up; start them 3-13 up (in both runs) so they reach the mesh
        start = e.positions.numpy() - np.array([0.0, 12.0, 0.0], np.float32)
        e.positions = mod.wp.array(start, dtype=mod.wp.vec3)
        for _ in range(30):
            _quiet(e.step)
        ex[gk] = e
    got, want = ex[True].positions.numpy(), ex[False].positions.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ex[True].mesh.points.numpy(), ex[False].mesh.points.numpy(), rtol=1e-6, atol=1e-6)
    assert np.abs(ex[False].velocities.numpy()).max() > 0.1
    r = np.linalg.norm(want - np.array([0.0, 5.0, 0.0]), axis=1)
    assert (r < 5.5).sum() > 50                              # many particles rest on the mesh
