"""gk.HashGrid's device build (geometry/hash_grid_build.py: kernels on the grid's device) on every device:
its sorted point ids and cell ranges equal the host build's exactly and a NumPy stable sort's (points in index
order within a cell, as Warp's radix sort keeps them), for negative, wrapped, on-boundary, non-finite and float64
points, empty and one-point grids, cells past the parallel-ranking size, rebuilds with other point counts and
builds from two threads; queries after it find exactly the brute-force neighbours; the default is the device
build where the device's memory is not the host's, the host build elsewhere (for few points, sparse and crowded
grids)."""

import threading

import numpy as np
import pytest

import gradkit as gk
from gradkit.geometry import hash_grid_build

LIMIT = 2 ** 29


def reference(pts: np.ndarray, dims, width: float):
    """(sorted ids, cell starts, cell ends) by NumPy: floor(p * inv) in the points' precision, clamped, NaN 0,
    wrapped (floored %), then a stable argsort; empty cells [0, 0)."""
    inv = np.float32(1.0) / np.float32(width)
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.floor(pts * pts.dtype.type(inv))
    c = np.where(np.isnan(f), 0, np.clip(f, -LIMIT, LIMIT)).astype(np.int64) % np.array(dims)
    cell = (c[:, 2] * dims[1] + c[:, 1]) * dims[0] + c[:, 0]
    order = np.argsort(cell, kind="stable")
    counts = np.bincount(cell, minlength=int(np.prod(dims)))
    ends = np.cumsum(counts)
    starts = ends - counts
    starts[counts == 0] = 0
    ends[counts == 0] = 0
    return order.astype(np.int32), starts.astype(np.int32), ends.astype(np.int32)


def build_both(device, pts: np.ndarray, dims, width: float):
    """The host-built and the device-built grid over the same points (float64 points: a float64 grid)."""
    f64 = pts.dtype == np.float64
    x = gk.array(pts, dtype=gk.vec3d if f64 else gk.vec3, device=device)
    grids = []
    for on_device in (False, True):
        g = gk.HashGrid(*dims, device=device, dtype=gk.float64 if f64 else None)
        g.build(x, width, device_build=on_device)
        grids.append(g)
    return x, grids


def arrays(grid) -> tuple:
    n = grid.num_points
    return grid.point_ids.numpy()[:n], grid.cell_starts.numpy(), grid.cell_ends.numpy()


def assert_same(device, pts, dims, width):
    """Both builds equal the NumPy reference, array by array; returns the device-built grid."""
    _, (host, dev) = build_both(device, pts, dims, width)
    want = reference(pts, dims, width)
    for name, h, d, w in zip(("point ids", "cell starts", "cell ends"), arrays(host), arrays(dev), want):
        np.testing.assert_array_equal(h, w, err_msg=f"host build: {name}")
        np.testing.assert_array_equal(d, w, err_msg=f"device build: {name}")
    assert dev.num_points == host.num_points == pts.shape[0]
    assert dev.cell_width == host.cell_width
    return dev


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_random_points_with_negative_and_wrapped_cells(device, rng, dtype):
    """Points on both sides of the origin and far past dim * width on every axis (cells wrap, some many
    times), a non-cubic grid."""
    pts = (rng.uniform(-5.0, 7.0, (900, 3)) * np.array([1.0, 2.5, 0.4])).astype(dtype)
    assert_same(device, pts, (7, 5, 6), 0.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_points_exactly_on_cell_boundaries(device, rng, dtype):
    """Coordinates that are exact multiples of the width (floor(p / w) lands exactly on an integer, both
    signs, -0.0 too), where a build that computed cells differently from the query would differ."""
    width = 0.25
    k = rng.integers(-12, 13, (600, 3))
    pts = (k * width).astype(dtype)
    pts[:20, 0] = -0.0
    assert_same(device, pts, (4, 3, 5), width)


def test_non_finite_and_far_points(device, rng):
    """NaN (cell 0), infinities and coordinates past the +-2^29 clamp take the same cells in both builds, and a
    radius-0 query at each point of the device-built grid finds that point exactly once."""
    pts = rng.uniform(-3.0, 3.0, (500, 3))
    bad = rng.choice(pts.size, 120, replace=False)
    pts.reshape(-1)[bad] = rng.choice([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.0e8, -3.0e8], 120)
    pts = pts.astype(np.float32)
    grid = assert_same(device, pts, (7, 5, 6), 0.5)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    found = gk.zeros(pts.shape[0], dtype=gk.int32, device=device)
    gk.launch(finds_itself, pts.shape[0], inputs=[grid, x, found])
    np.testing.assert_array_equal(found.numpy(), np.ones(pts.shape[0], np.int32))


@gk.kernel
def finds_itself(grid: gk.HashGrid, x: gk.array(dtype=gk.vec3), found: gk.array(dtype=gk.int32)):
    i = gk.tid()
    for j in gk.hash_grid_query(grid, x[i], 0.0):
        if j == i:
            found[i] = found[i] + 1


def test_empty_and_one_point(device, rng):
    """An empty build leaves every cell [0, 0) (also after a build with points), and one point fills one cell."""
    dims = (3, 4, 5)
    assert_same(device, np.zeros((0, 3), np.float32), dims, 0.5)
    assert_same(device, rng.uniform(-2, 2, (1, 3)).astype(np.float32), dims, 0.5)
    grid = gk.HashGrid(*dims, device=device)
    grid.build(gk.array(rng.uniform(-2, 2, (50, 3)).astype(np.float32), dtype=gk.vec3, device=device), 0.5,
               device_build=True)
    assert grid.cell_ends.numpy().any()
    grid.build(gk.zeros(0, dtype=gk.vec3, device=device), 0.5, device_build=True)
    assert grid.num_points == 0
    assert not grid.cell_starts.numpy().any() and not grid.cell_ends.numpy().any()


@pytest.mark.parametrize("crowd", [hash_grid_build.SMALL, hash_grid_build.SMALL + 1, 1500])
def test_many_points_in_one_cell(device, rng, crowd):
    """A cell with `crowd` points (at the parallel ranking's limit, just past it, far past it: one thread
    heap-sorts it), among points spread over other cells, and their indices interleaved with the others'."""
    n = crowd + 400
    pts = rng.uniform(-4.0, 4.0, (n, 3)).astype(np.float32)
    crowded = rng.choice(n, crowd, replace=False)
    pts[crowded] = rng.uniform(0.01, 0.49, (crowd, 3)).astype(np.float32)      # all in cell (0, 0, 0)
    assert_same(device, pts, (6, 6, 6), 0.5)


def test_cells_of_every_size_on_a_big_grid(device, rng):
    """A grid of 64^3 cells (several levels of the block scan) with clustered points: many empty cells, many
    with one point, some with dozens; the ranges and order still match."""
    centres = rng.uniform(0.0, 16.0, (40, 3))
    pts = (centres[rng.integers(0, 40, 3000)] + rng.normal(0.0, 0.3, (3000, 3))).astype(np.float32)
    assert_same(device, pts, (64, 64, 64), 0.25)


@gk.kernel
def pairs(grid: gk.HashGrid, x: gk.array(dtype=gk.vec3), r: float, seen: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    for j in gk.hash_grid_query(grid, x[i], r):
        if gk.length(x[j] - x[i]) <= r:
            gk.atomic_add(seen, i, j, 1)


def neighbours_match(device, grid, pts: np.ndarray, r: float) -> None:
    """Every pair within r (by a float64 NumPy distance) is found exactly once, and no other pair (pairs within
    float32 rounding of r are left out of the comparison)."""
    n = pts.shape[0]
    x = gk.array(pts, dtype=gk.vec3, device=device)
    seen = gk.zeros((n, n), dtype=gk.int32, device=device)
    gk.launch(pairs, n, inputs=[grid, x, r, seen])
    seen = seen.numpy()
    d = np.linalg.norm(pts[:, None].astype(np.float64) - pts[None].astype(np.float64), axis=-1)
    sure = np.abs(d - r) > 1e-5
    assert seen.max() <= 1
    np.testing.assert_array_equal(seen[sure], (d <= r)[sure].astype(np.int32))


@pytest.mark.parametrize("dims,width,r", [((5, 4, 6), 0.5, 0.45), ((3, 3, 3), 0.3, 0.7)], ids=["cell>r", "r>cell"])
def test_queries_after_a_device_build_find_the_brute_force_neighbours(device, rng, dims, width, r):
    pts = rng.uniform(-2.0, 3.0, (300, 3)).astype(np.float32)
    grid = gk.HashGrid(*dims, device=device)
    grid.build(gk.array(pts, dtype=gk.vec3, device=device), width, device_build=True)
    neighbours_match(device, grid, pts, r)


def test_rebuild_with_other_point_counts(device, rng):
    """One grid rebuilt with fewer points, more points (its arrays grow) and another radius: each build equals
    the host build of the same points and its queries find the brute-force neighbours."""
    dims = (6, 5, 4)
    grid = gk.HashGrid(*dims, device=device)
    for n, width in ((200, 0.5), (60, 0.5), (700, 0.4), (1, 0.4), (350, 0.6)):
        pts = rng.uniform(-2.0, 2.5, (n, 3)).astype(np.float32)
        grid.build(gk.array(pts, dtype=gk.vec3, device=device), width, device_build=True)
        for got, want in zip(arrays(grid), reference(pts, dims, width)):
            np.testing.assert_array_equal(got, want)
        neighbours_match(device, grid, pts, width * 0.9)


def test_two_threads_build_two_grids(device, rng):
    """Two threads each rebuild their own grid (other dimensions, radii and points) several times at once;
    every build equals the NumPy reference."""
    jobs = [((5, 6, 7), 0.4, [rng.uniform(-3, 3, (n, 3)).astype(np.float32) for n in (400, 150, 600)]),
            ((9, 4, 3), 0.7, [rng.uniform(-5, 2, (n, 3)).astype(np.float32) for n in (300, 700, 50)])]
    errors, results = [], {}
    start = threading.Barrier(2)

    def work(k):
        dims, width, clouds = jobs[k]
        grid = gk.HashGrid(*dims, device=device)
        start.wait()
        try:
            for rep in range(3):
                for c, pts in enumerate(clouds):
                    grid.build(gk.array(pts, dtype=gk.vec3, device=device), width, device_build=True)
                    results[k, rep, c] = [a.copy() for a in arrays(grid)]
        except Exception as exc:          # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (k, rep, c), got in results.items():
        dims, width, clouds = jobs[k]
        for g, w in zip(got, reference(clouds[c], dims, width)):
            np.testing.assert_array_equal(g, w)
    assert len(results) == 18


@pytest.mark.parametrize("n,dims,spread", [(100, (4, 4, 4), 1.0), (3000, (64, 64, 64), 8.0),
                                           (20000, (10, 10, 10), 6.0)],
                         ids=["small", "sparse-big-grid", "crowded-cells"])
def test_default_build_follows_the_device(device, rng, monkeypatch, n, dims, spread):
    """Without device_build=, the device build runs where the grid's memory is not the host's (OpenCL) and the
    host build elsewhere (cpu, c, numpy: faster there at every size measured, geometry/hash_grid.py
    `default_device_build`), for few points, a sparse 64^3 grid and cells of ~20 points (wrapped: the points
    span twice the grid); device_build= forces either; all three builds equal the NumPy reference; none is
    recorded on a tape."""
    from gradkit.geometry import hash_grid_host_build
    calls = []
    run, order = hash_grid_build.DeviceBuild.run, hash_grid_host_build.HostBuild.order
    monkeypatch.setattr(hash_grid_build.DeviceBuild, "run", lambda self, *a: calls.append("device") or run(self, *a))
    monkeypatch.setattr(hash_grid_host_build.HostBuild, "order", lambda self, *a: calls.append("host") or order(self, *a))
    pts = rng.uniform(-spread, spread, (n, 3)).astype(np.float32)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    grid = gk.HashGrid(*dims, device=device)
    width = 2.0 * spread / (2 * dims[0])          # the points span twice the grid along each axis
    want = reference(pts, dims, width)
    on_device = grid.cell_starts._host is None
    assert gk.geometry.hash_grid.default_device_build(grid) is on_device
    with gk.Tape() as tape:
        grid.build(x, width)
    assert calls == ["device" if on_device else "host"]
    assert not tape.launches
    for forced in (True, False):
        got = [a.copy() for a in arrays(grid)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        grid.build(x, width, device_build=forced)
    assert calls[1:] == ["device", "host"]
    for got, w in zip(arrays(grid), want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("crowd", [5, hash_grid_build.SMALL + 40], ids=["small-cells", "heap-sorted"])
def test_order_restores_index_order_from_any_arrival_order(device, rng, crowd):
    """The scatter and order kernels (order: cells up to SMALL points, order_large: the larger) put each cell's points in index order whatever order the atomic adds
    handed out the ranks in: ranks shuffled within every cell (as a GPU's atomics may give them; a CPU device
    tends to hand them out in index order, which would hide an unstable build)."""
    n, dims = 40 * crowd, (4, 3, 2)
    cell = rng.integers(0, int(np.prod(dims)), n)
    order = np.argsort(cell, kind="stable")
    counts = np.bincount(cell, minlength=int(np.prod(dims)))
    ranks = np.empty(n, np.int64)
    for c in range(counts.size):
        members = np.flatnonzero(cell == c)
        ranks[members] = rng.permutation(members.size)
    ends = np.cumsum(counts)
    starts = np.where(counts > 0, ends - counts, 0)
    ends = np.where(counts > 0, ends, 0)
    ints = dict(dtype=gk.int32, device=device)
    a = {k: gk.array(v.astype(np.int32), **ints) for k, v in
         dict(cells=cell, ranks=ranks, starts=starts, ends=ends).items()}
    slots, point_ids = gk.zeros(n, **ints), gk.zeros(n, **ints)
    k = hash_grid_build.kernels(gk.float32)
    gk.launch(k["scatter"], n, inputs=[a["cells"], a["ranks"], a["starts"], slots])
    assert not np.array_equal(slots.numpy(), order)          # the arrival order differs from index order
    gk.launch(k["order"], n, inputs=[a["cells"], a["starts"], a["ends"], slots, point_ids])
    large = np.flatnonzero(counts > hash_grid_build.SMALL)
    gk.launch(k["order_large"], max(large.size, 1) + 3,           # threads past the listed cells do nothing
              inputs=[gk.array(np.r_[large, 0].astype(np.int32), **ints), gk.array([large.size], **ints),
                      a["starts"], a["ends"], slots, point_ids])
    np.testing.assert_array_equal(point_ids.numpy(), order)


def test_points_in_a_2d_array(device, rng):
    """Points in an array of shape (rows, cols) bucket as the flat array of rows * cols points."""
    pts = rng.uniform(-2.0, 2.0, (12, 25, 3)).astype(np.float32)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    grid = gk.HashGrid(5, 4, 3, device=device)
    grid.build(x, 0.5, device_build=True)
    for got, want in zip(arrays(grid), reference(pts.reshape(-1, 3), (5, 4, 3), 0.5)):
        np.testing.assert_array_equal(got, want)


def test_host_and_device_builds_alternate_on_one_grid(device, rng, monkeypatch):
    """Device and host builds of one grid in any order each leave exactly their own cell ranges (none of the
    other build's cells left filled), also after a device build interrupted before its cell ranges."""
    dims = (6, 6, 6)
    grid = gk.HashGrid(*dims, device=device)
    for on_device in (True, False, True, True, False, False, True):
        pts = rng.uniform(-3.0, 3.0, (int(rng.integers(50, 400)), 3)).astype(np.float32)
        grid.build(gk.array(pts, dtype=gk.vec3, device=device), 0.5, device_build=on_device)
        for got, want in zip(arrays(grid), reference(pts, dims, 0.5)):
            np.testing.assert_array_equal(got, want)
    # a device build stopped before its cell ranges (the counts not yet zeroed): the next one starts clean
    from gradkit.runtime.launch import launch as launch_module
    launch, stop_at = launch_module.launch, hash_grid_build.kernels(gk.float32)["cell_ranges"]

    def interrupting(kernel, *args, **kwargs):
        if kernel is stop_at:
            raise KeyboardInterrupt
        return launch(kernel, *args, **kwargs)
    monkeypatch.setattr(launch_module, "launch", interrupting)
    with pytest.raises(KeyboardInterrupt):
        grid.build(gk.array(pts[::-1] + 1.0, dtype=gk.vec3, device=device), 0.5, device_build=True)
    monkeypatch.undo()
    pts = pts[:40]
    grid.build(gk.array(pts, dtype=gk.vec3, device=device), 0.5, device_build=True)
    for got, want in zip(arrays(grid), reference(pts, dims, 0.5)):
        np.testing.assert_array_equal(got, want)
