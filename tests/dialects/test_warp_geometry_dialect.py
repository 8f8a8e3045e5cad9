"""gradkit.warp's geometry additions for Warp's own tests (dialects/warp/geometry.py, queries.py), on every
device: wp.mesh_query_ray_count_intersections against a float64 NumPy count over every triangle;
HashGrid.build and Bvh.rebuild inside wp.ScopedCapture run at each capture_launch on the data as it is then
(against brute-force NumPy neighbour and overlap counts); wp.Mesh's input errors are Warp's RuntimeError and
gradkit's TypeError / ValueError; grouped geometry is a named error."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit.warp as wp
from gradkit.warp.examples import uv_sphere


@wp.kernel
def count_ray_hits(mesh: wp.uint64, starts: wp.array(dtype=wp.vec3), dirs: wp.array(dtype=wp.vec3),
                   counts: wp.array(dtype=int)):
    i = wp.tid()
    counts[i] = wp.mesh_query_ray_count_intersections(mesh, starts[i], dirs[i])


@wp.kernel
def count_neighbours(grid: wp.uint64, points: wp.array(dtype=wp.vec3), radius: float,
                     counts: wp.array(dtype=int)):
    i = wp.tid()
    p = points[i]
    n = int(0)
    for j in wp.hash_grid_query(grid, p, radius):
        if wp.length(points[j] - p) <= radius:
            n += 1
    counts[i] = n


@wp.kernel
def count_overlaps(bvh: wp.uint64, lo: wp.vec3, hi: wp.vec3, counts: wp.array(dtype=int)):
    n = int(0)
    for _j in wp.bvh_query_aabb(bvh, lo, hi):
        n += 1
    counts[0] = n


def _ray_tri_hits(start, d, a, b, c) -> int:
    """Float64 Moller-Trumbore: 1 where the ray start + t d (t >= 0) meets triangle abc."""
    e1, e2 = b - a, c - a
    pv = np.cross(d, e2)
    det = e1 @ pv
    if abs(det) < 1e-12:
        return 0
    tv = start - a
    u = (tv @ pv) / det
    qv = np.cross(tv, e1)
    v = (d @ qv) / det
    t = (e2 @ qv) / det
    return int(u >= 0 and v >= 0 and u + v <= 1 and t >= 0)


def test_mesh_query_ray_count_intersections(device, rng):
    """Rays from random points (inside and outside a jittered sphere) in random directions: a closed surface is
    crossed an odd number of times from inside, even from outside; the count is NumPy's over every face."""
    pts, tris = uv_sphere(8, 0.15, rng)
    mesh = wp.Mesh(points=wp.array(pts, dtype=wp.vec3, device=device),
                   indices=wp.array(tris.reshape(-1), dtype=int, device=device))
    n = 64
    starts = rng.uniform(-1.6, 1.6, (n, 3))
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    counts = wp.zeros(n, dtype=int, device=device)
    wp.launch(count_ray_hits, dim=n, inputs=[mesh.id, wp.array(starts, dtype=wp.vec3, device=device),
                                             wp.array(dirs, dtype=wp.vec3, device=device), counts], device=device)
    p32 = pts.astype(np.float32).astype(np.float64)
    want = [sum(_ray_tri_hits(s, d, *p32[t]) for t in tris) for s, d in zip(starts.astype(np.float32),
                                                                           dirs.astype(np.float32))]
    np.testing.assert_array_equal(counts.numpy(), want)
    assert max(want) >= 2 and min(want) == 0


def test_hash_grid_build_is_captured(device, rng):
    """A HashGrid.build inside wp.ScopedCapture runs at each capture_launch, on the points as they are then."""
    n, radius = 200, 0.3
    points = wp.array(rng.uniform(0, 2, (n, 3)), dtype=wp.vec3, device=device)
    grid = wp.HashGrid(16, 16, 16, device=device)
    counts = wp.zeros(n, dtype=int, device=device)
    with wp.ScopedCapture(device=device) as capture:
        grid.build(points, radius)
        wp.launch(count_neighbours, dim=n, inputs=[grid.id, points, radius, counts], device=device)
    for _ in range(2):
        host = rng.uniform(0, 2, (n, 3)).astype(np.float32)
        points.assign(host)
        wp.capture_launch(capture.graph)
        d = np.linalg.norm(host[:, None, :].astype(np.float64) - host[None, :, :], axis=2)
        np.testing.assert_array_equal(counts.numpy(), (d <= radius).sum(axis=1))


def test_bvh_rebuild_is_captured(device, rng):
    """Bvh.rebuild inside wp.ScopedCapture rebuilds at each capture_launch: boxes moved far from where the tree
    was first built are found, as NumPy's overlap count finds them."""
    n = 50
    lo = rng.uniform(0, 1, (n, 3))
    lowers = wp.array(lo, dtype=wp.vec3, device=device)
    uppers = wp.array(lo + 0.1, dtype=wp.vec3, device=device)
    bvh = wp.Bvh(lowers, uppers)
    q_lo, q_hi = np.array([4.0, 4.0, 4.0]), np.array([5.0, 5.0, 5.0])
    counts = wp.zeros(1, dtype=int, device=device)
    with wp.ScopedCapture(device=device) as capture:
        bvh.rebuild()
        wp.launch(count_overlaps, dim=1, inputs=[bvh.id, wp.vec3(*q_lo), wp.vec3(*q_hi), counts], device=device)
    new_lo = rng.uniform(3.5, 5.5, (n, 3)).astype(np.float32)
    lowers.assign(new_lo)
    uppers.assign(new_lo + np.float32(0.1))
    wp.capture_launch(capture.graph)
    want = np.all((new_lo <= q_hi) & (new_lo + np.float32(0.1) >= q_lo), axis=1).sum()
    assert want > 0
    assert counts.numpy()[0] == want


def test_mesh_errors_are_warps_and_gradkits(device):
    pts = wp.array(np.eye(3), dtype=wp.vec3, device=device)
    with pytest.raises(RuntimeError, match="indices must lie"):
        wp.Mesh(points=pts, indices=wp.array([0, 1, 3], dtype=int, device=device))
    with pytest.raises(ValueError, match="indices must lie"):
        wp.Mesh(points=pts, indices=wp.array([0, 1, 3], dtype=int, device=device))
    with pytest.raises(RuntimeError, match="indices must be a gk.array of int32"):
        wp.Mesh(points=pts, indices=wp.array([0.0, 1.0, 2.0], dtype=float, device=device))
    with pytest.raises(TypeError, match="indices must be a gk.array of int32"):
        wp.Mesh(points=pts, indices=wp.array([0.0, 1.0, 2.0], dtype=float, device=device))


def test_grouped_queries_are_named(device):
    """(bvh_query_sphere, once named here as missing, is gradkit's now: tests/geometry/test_mesh_more_queries.py.)"""
    pts = wp.array(np.eye(3), dtype=wp.vec3, device=device)
    idx = wp.array([0, 1, 2], dtype=int, device=device)
    groups = wp.zeros(1, dtype=int, device=device)
    with pytest.raises(wp.WarpFeatureMissing, match=r"Mesh\(groups=\)"):
        wp.Mesh(points=pts, indices=idx, groups=groups)
    with pytest.raises(wp.WarpFeatureMissing, match=r"Bvh\(groups=\)"):
        wp.Bvh(pts, pts, groups=groups)


def _bad_kernel(x: wp.array(dtype=float)):
    x[0] = undefined_name      # noqa: F821  (the error wp.Kernel must raise when made)


def test_kernel_constructor_lowers_at_once():
    """wp.Kernel(func=f) lowers f forward and adjoint when made (Warp builds its adjoint then): an unknown name
    is a CompileError there, not at a launch; every gradkit kernel is a wp.Kernel."""
    from gradkit.core.errors import CompileError
    assert isinstance(count_overlaps, wp.Kernel)
    with pytest.raises(CompileError, match="undefined_name"):
        wp.Kernel(func=_bad_kernel)
    k = wp.Kernel(func=count_neighbours.pyfunc)
    assert isinstance(k, wp.Kernel) and "adjoint" in k.ir(adjoint=True)
