"""gk.HashGrid on every device: neighbour sets against a brute-force NumPy reference (points outside the
grid's nominal range, radii wider than a cell, both loop forms), the cell order against Warp's, an
SPH-like density/force kernel and the gradients of a neighbour-force loss against Warp 1.19 and central
differences (float64, reverse and forward mode), and the binding of a grid or its id at launch."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np
import pytest

import gradkit as gk
import gradkit.warp as gwp
from gradkit.core.library.hash_grid import HashGridData

try:
    import warp
    warp.config.quiet = True
    warp.init()
except ImportError:
    warp = None

needs_warp = pytest.mark.skipif(warp is None, reason="warp-lang (the reference) is not installed")


@gk.kernel
def pairs_while(grid: gk.HashGrid, x: gk.array(dtype=gk.vec3), r: float, seen: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    q = gk.hash_grid_query(grid, x[i], r)
    j = int(0)
    while gk.hash_grid_query_next(q, j):
        gk.atomic_add(seen, i, j, 1)


@gk.kernel
def pairs_for(grid: gk.HashGrid, x: gk.array(dtype=gk.vec3), r: float, seen: gk.array2d(dtype=gk.int32)):
    tid = gk.tid()
    i = gk.hash_grid_point_id(grid, tid)
    for j in gk.hash_grid_query(grid, x[i], r):
        gk.atomic_add(seen, i, j, 1)


@pytest.mark.parametrize("loop", [pairs_while, pairs_for], ids=["while", "for"])
@pytest.mark.parametrize("dims,width,r", [((4, 5, 3), 0.5, 0.4), ((3, 2, 4), 0.3, 0.75), ((1, 1, 1), 1.0, 0.5)],
                         ids=["cell>r", "r>cell", "one-cell"])
def test_neighbours_match_brute_force(device, rng, loop, dims, width, r):
    """Every point within r is visited exactly once (the query returns a superset of them, each at most
    once), with points scattered well outside the grid's dim * width box, on both sides."""
    n = 150
    pts = rng.uniform(-2.0, 4.0, (n, 3)).astype(np.float32)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    grid = gk.HashGrid(*dims, device=device)
    grid.build(x, width)
    seen = gk.zeros((n, n), dtype=gk.int32, device=device)
    gk.launch(loop, n, inputs=[grid, x, r, seen])
    seen = seen.numpy()
    near = np.linalg.norm(pts[:, None] - pts[None], axis=-1) <= np.float32(r) * (1 - 1e-6)
    assert seen.max() <= 1                                  # no point twice
    assert (seen[near] == 1).all()                          # every neighbour
    # the candidates are exactly the points in the visited cells: same cell test on the host
    cells = grid._cells(pts, np.float32(1.0) / np.float32(width))
    lo = np.floor((pts - np.float32(r)) * (np.float32(1.0) / np.float32(width))).astype(int)
    hi = np.floor((pts + np.float32(r)) * (np.float32(1.0) / np.float32(width))).astype(int)
    for i in range(0, n, 17):
        ranges = [np.arange(lo[i, a], min(hi[i, a], lo[i, a] + dims[a] - 1) + 1) % dims[a] for a in range(3)]
        visited = {int(z * dims[0] * dims[1] + y * dims[0] + xx) for xx in ranges[0] for y in ranges[1]
                   for z in ranges[2]}
        assert set(np.nonzero(seen[i])[0]) == {j for j in range(n) if cells[j] in visited}


@gk.kernel
def visit_order(grid: gk.HashGrid, x: gk.array(dtype=gk.vec3), r: float, order: gk.array2d(dtype=gk.int32),
                cap: int):
    i = gk.tid()
    k = int(0)
    for j in gk.hash_grid_query(grid, x[i], r):
        if k < cap:
            order[i, k] = j
        k += 1


def _expected_order(pts, r, width, dims, starts, ends, ids) -> list:
    """Each query's indices in Warp's order: the virtual cells of [p - r, p + r] (x fastest, then y, then z;
    a range wider than the grid cut to one lap, a negative r's empty range the start cell p - r's), each
    wrapped to its physical cell, its points in sorted order."""
    inv = np.float32(1.0) / np.float32(width)
    lo = np.floor((pts - np.float32(r)) * inv).astype(np.int64)
    hi = np.floor((pts + np.float32(r)) * inv).astype(np.int64)
    out = []
    for i in range(len(pts)):
        axes = [range(lo[i, a], max(min(hi[i, a], lo[i, a] + dims[a] - 1), lo[i, a]) + 1) for a in range(3)]
        seq = []
        for z in axes[2]:
            for y in axes[1]:
                for xx in axes[0]:
                    c = (z % dims[2]) * dims[0] * dims[1] + (y % dims[1]) * dims[0] + xx % dims[0]
                    seq += [int(v) for v in ids[starts[c]:ends[c]]]
        out.append(seq)
    return out


def _orders(device, grid, x, r, n, cap):
    order = gk.full((n, cap), -1, dtype=gk.int32, device=device)
    gk.launch(visit_order, n, inputs=[grid, x, r, order, cap])
    return [[int(v) for v in row if v >= 0] for row in order.numpy()]


@pytest.mark.parametrize("dims,width,r,spread", [((7, 3, 5), 0.3, 0.5, (-1.0, 3.0)), ((4, 6, 2), 0.5, 0.3, (-2.0, 4.0)),
                                                 ((3, 3, 3), 0.4, 1.0, (0.0, 1.2)), ((64, 2, 2), 0.1, 0.25, (0.0, 6.4)),
                                                 ((5, 4, 3), 0.5, -0.3, (-1.0, 3.0))],
                         ids=["wrapping-runs", "sparse", "range-past-grid", "long-rows", "negative-radius"])
def test_query_visits_cells_in_warps_order(device, rng, dims, width, r, spread):
    """A query returns its cells' points in Warp's order (x fastest, then y, then z; each cell's points in
    sorted order), so sums in a neighbour loop add in Warp's order: also where a row's x range wraps past
    dim_x (two runs of cells), where runs hold empty cells, where the range is wider than the grid, and for a
    negative radius (Warp 1.19 visits the start cell then, checked here)."""
    n = 120
    pts = rng.uniform(*spread, (n, 3)).astype(np.float32)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    grid = gk.HashGrid(*dims, device=device)
    grid.build(x, width)
    want = _expected_order(pts, r, width, dims, grid.cell_starts.numpy(), grid.cell_ends.numpy(),
                           grid.point_ids.numpy())
    cap = max(len(w) for w in want) + 1
    assert _orders(device, grid, x, r, n, cap) == want
    assert sum(map(len, want)) > (n if r > 0 else n // 2)          # the queries do find neighbours


@needs_warp
@pytest.mark.parametrize("r", [-0.3, -2.0, 0.0, 0.6])
def test_visit_order_matches_warp(rng, r):
    """gradkit.warp's query returns Warp 1.19's indices in Warp's order, a negative radius included (Warp
    visits the cell of p - r then, one cell)."""
    n = 150
    pts = rng.uniform(-0.5, 2.5, (n, 3)).astype(np.float32)
    out = {}
    for wp in (warp, gwp):
        @wp.kernel
        def order(grid: wp.uint64, x: wp.array(dtype=wp.vec3), r: float, seq: wp.array2d(dtype=int)):
            i = wp.tid()
            k = int(0)
            for j in wp.hash_grid_query(grid, x[i], r):
                if k < 64:
                    seq[i, k] = j
                k += 1
        grid = wp.HashGrid(5, 4, 3, device="cpu")
        x = wp.array(pts, dtype=wp.vec3, device="cpu")
        grid.build(x, 0.5)
        seq = wp.full((n, 64), -1, dtype=int, device="cpu")
        wp.launch(order, n, inputs=[grid.id, x, r, seq], device="cpu")
        out[wp] = seq.numpy()
    np.testing.assert_array_equal(out[gwp], out[warp])
    assert (out[warp][:, 0] >= 0).sum() > n // 2


def test_empty_cells_may_hold_any_range(device, rng):
    """The queries read an empty cell only as empty (start >= end): a grid whose empty cells hold arbitrary
    such ranges visits exactly what the built grid visits."""
    n, dims, width, r = 100, (9, 4, 6), 0.25, 0.4
    pts = rng.uniform(-0.5, 2.5, (n, 3)).astype(np.float32)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    grid = gk.HashGrid(*dims, device=device)
    grid.build(x, width)
    starts, ends = grid.cell_starts.numpy().copy(), grid.cell_ends.numpy().copy()
    empty = starts >= ends
    assert empty.sum() > len(starts) // 4
    starts[empty] = rng.integers(0, n + 3, empty.sum())
    ends[empty] = starts[empty] - rng.integers(0, 3, empty.sum())
    odd = HashGridData(cell_starts=gk.array(starts, dtype=gk.int32, device=device),
                       cell_ends=gk.array(ends, dtype=gk.int32, device=device), point_ids=grid.point_ids,
                       num_points=n, dim_x=dims[0], dim_y=dims[1], dim_z=dims[2],
                       cell_width_inv=float(np.float32(1.0) / np.float32(width)))
    cap = 64
    want = _orders(device, grid, x, r, n, cap)
    assert _orders(device, odd, x, r, n, cap) == want and sum(map(len, want)) > n


@gk.kernel
def finds_itself(grid: gk.HashGrid, x: gk.array(dtype=gk.vec3), found: gk.array(dtype=gk.int32)):
    i = gk.tid()
    for j in gk.hash_grid_query(grid, x[i], 0.0):
        if j == i:
            found[i] = found[i] + 1


@pytest.mark.parametrize("case", ["inside", "wrapped", "extreme"])
def test_build_puts_each_point_in_the_cell_its_query_visits(device, rng, case):
    """The build's host-side cells (a fast path for finite in-range coordinates, the clamping path for NaN,
    infinities and coordinates past the clamp) are the cells the kernel-side query computes: a query of
    radius 0 at each point finds that point exactly once; and both host paths give the same cells."""
    n, dims, width = 400, (7, 5, 6), 0.5
    if case == "inside":                     # every axis in [0, dim): no wrap needed
        pts = rng.uniform(0.0, 2.4, (n, 3))
    elif case == "wrapped":                  # negative and beyond dim * width, on different axes
        pts = rng.uniform(-9.0, 9.0, (n, 3)) * np.array([1.0, 3.0, 0.2])
    else:
        pts = rng.uniform(-3.0, 3.0, (n, 3))
        bad = rng.choice(n * 3, 60, replace=False)
        pts.reshape(-1)[bad] = rng.choice([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.0e8, -3.0e8], 60)
    pts = pts.astype(np.float32)
    x = gk.array(pts, dtype=gk.vec3, device=device)
    grid = gk.HashGrid(*dims, device=device)
    grid.build(x, width)
    found = gk.zeros(n, dtype=gk.int32, device=device)
    gk.launch(finds_itself, n, inputs=[grid, x, found])
    np.testing.assert_array_equal(found.numpy(), np.ones(n, np.int32))
    inv = np.float32(1.0) / np.float32(width)
    floored = np.floor(pts * inv)
    np.testing.assert_array_equal(grid._cells(pts, inv), grid._cells_clamped(floored))
    ref = np.where(np.isnan(floored), 0, np.clip(floored, -2.0 ** 29, 2.0 ** 29)).astype(np.int64) % dims
    np.testing.assert_array_equal(grid._cells(pts, inv), (ref[:, 2] * dims[1] + ref[:, 1]) * dims[0] + ref[:, 0])
    assert grid._cells(np.zeros((0, 3), np.float32), inv).shape == (0,)


def test_grid_binds_by_object_or_id_and_rebuilds(device, rng):
    """A grid, or its id (Warp's `grid.id`), binds at launch; a rebuild with more points grows its
    arrays; an unbuilt grid's query finds nothing and hash_grid_point_id gives -1."""
    grid = gk.HashGrid(4, 4, 4, device=device)
    n = 40
    seen = gk.zeros((n, n), dtype=gk.int32, device=device)
    x = gk.array(rng.uniform(0, 2, (n, 3)).astype(np.float32), dtype=gk.vec3, device=device)
    gk.launch(pairs_while, n, inputs=[grid.id, x, 0.5, seen])
    assert seen.numpy().sum() == 0
    for m in (10, n):
        grid.build(gk.array(x.numpy()[:m], dtype=gk.vec3, device=device), 0.5)
        seen.zero_()
        gk.launch(pairs_while, m, inputs=[grid.id, x, 0.5, seen])
        assert np.diag(seen.numpy())[:m].all() and seen.numpy()[:, m:].sum() == 0
    assert grid.num_points == n
    with pytest.raises(ValueError, match="no gk.HashGrid has id"):
        gk.launch(pairs_while, n, inputs=[10**9, x, 0.5, seen])
    with pytest.raises(TypeError, match="vec3"):
        grid.build(gk.zeros(3, dtype=gk.vec2, device=device), 0.5)


@needs_warp
def test_cell_order_matches_warp(rng):
    """hash_grid_point_id gives Warp's order: points sorted by cell, index order within a cell."""
    n = 500
    pts = rng.uniform(-3, 5, (n, 3)).astype(np.float32)
    out = {}
    for wp in (warp, gwp):
        @wp.kernel
        def order(grid: wp.uint64, ids: wp.array(dtype=int)):
            tid = wp.tid()
            ids[tid] = wp.hash_grid_point_id(grid, tid)
        grid = wp.HashGrid(5, 3, 4, device="cpu")
        grid.build(wp.array(pts, dtype=wp.vec3, device="cpu"), 0.7)
        ids = wp.zeros(n, dtype=int, device="cpu")
        wp.launch(order, n, inputs=[grid.id, ids], device="cpu")
        out[wp] = ids.numpy()
    np.testing.assert_array_equal(out[gwp], out[warp])


# --------------------------------------------------------------------------- one program, two frameworks

def sph_kernels(wp, dtype):
    """An SPH-like density pass and a pressure-force pass over grid neighbours, written once in Warp's
    language, for `wp` = warp or gradkit.warp; `dtype` float32 or float64."""
    vec3 = wp.types.vector(3, dtype)

    @wp.kernel
    def density(grid: wp.uint64, x: wp.array(dtype=vec3), h: dtype, rho: wp.array(dtype=dtype)):
        tid = wp.tid()
        i = wp.hash_grid_point_id(grid, tid)
        p = x[i]
        acc = dtype(0.0)
        for j in wp.hash_grid_query(grid, p, h):
            d = x[j] - p
            acc += wp.max(h * h - wp.dot(d, d), dtype(0.0)) ** dtype(3.0)
        rho[i] = acc

    @wp.kernel
    def forces(grid: wp.uint64, x: wp.array(dtype=vec3), rho: wp.array(dtype=dtype), h: dtype,
               f: wp.array(dtype=vec3), energy: wp.array(dtype=dtype)):
        i = wp.tid()
        p = x[i]
        acc = vec3()
        e = dtype(0.0)
        query = wp.hash_grid_query(grid, p, h)
        j = int(0)
        while wp.hash_grid_query_next(query, j):
            if j != i:
                d = x[j] - p
                dist = wp.length(d)
                if dist < h:
                    w = (h - dist) * (h - dist)
                    acc += d * (w * (rho[i] + rho[j]) / (dist + dtype(1e-3)))
                    e += w * rho[j] * wp.dot(d, d)
        f[i] = acc
        wp.atomic_add(energy, 0, e + wp.dot(acc, acc))

    return density, forces


def pair_kernels(wp, dtype):
    """The same passes with every neighbour's term added straight into memory (no float carried by the
    loop): the form whose gradient Warp 1.19 gets right (it gets sph_kernels' wrong, see below)."""
    vec3 = wp.types.vector(3, dtype)

    @wp.kernel
    def density(grid: wp.uint64, x: wp.array(dtype=vec3), h: dtype, rho: wp.array(dtype=dtype)):
        i = wp.tid()
        p = x[i]
        for j in wp.hash_grid_query(grid, p, h):
            d = x[j] - p
            wp.atomic_add(rho, i, wp.max(h * h - wp.dot(d, d), dtype(0.0)) ** dtype(3.0))

    @wp.kernel
    def forces(grid: wp.uint64, x: wp.array(dtype=vec3), rho: wp.array(dtype=dtype), h: dtype,
               f: wp.array(dtype=vec3), energy: wp.array(dtype=dtype)):
        i = wp.tid()
        p = x[i]
        query = wp.hash_grid_query(grid, p, h)
        j = int(0)
        while wp.hash_grid_query_next(query, j):
            if j != i:
                d = x[j] - p
                dist = wp.length(d)
                if dist < h:
                    w = (h - dist) * (h - dist)
                    wp.atomic_add(energy, 0, w * (rho[i] + rho[j]) * dist)

    return density, forces


def run_sph(wp, dtype, pts, h, device, tape=False, kernels=sph_kernels):
    vec3 = wp.types.vector(3, dtype)
    density, forces = kernels(wp, dtype)
    x = wp.array(pts, dtype=vec3, device=device, requires_grad=True)
    rho = wp.zeros(len(pts), dtype=dtype, device=device, requires_grad=True)
    f = wp.zeros(len(pts), dtype=vec3, device=device, requires_grad=True)
    energy = wp.zeros(1, dtype=dtype, device=device, requires_grad=True)
    grid = wp.HashGrid(6, 6, 6, device=device, dtype=dtype)
    grid.build(x, h)
    t = wp.Tape()
    with t:
        wp.launch(density, len(pts), inputs=[grid.id, x, h, rho], device=device)
        wp.launch(forces, len(pts), inputs=[grid.id, x, rho, h, f, energy], device=device)
    if tape:
        t.backward(loss=energy)
    return dict(rho=rho.numpy(), f=f.numpy(), energy=energy.numpy()[0], grad=x.grad.numpy() if tape else None,
                grid=grid, kernels=(density, forces), x=x)


def _points(rng, n=120, dtype=np.float32):
    return rng.uniform(-0.5, 2.5, (n, 3)).astype(dtype)


@needs_warp
def test_sph_density_and_forces_match_warp(device, rng):
    pts = _points(rng)
    ours = run_sph(gwp, gwp.float32, pts, 0.45, device)
    ref = run_sph(warp, warp.float32, pts, 0.45, "cpu")
    for k in ("rho", "f"):
        scale = np.abs(ref[k]).max()
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-5, atol=1e-6 * scale)
    assert ref["rho"].min() > 0 and np.abs(ref["f"]).max() > 1e-3


@needs_warp
@pytest.mark.parametrize("kernels", [pair_kernels, sph_kernels], ids=["pairs", "accumulated"])
def test_neighbour_force_gradients_match_warp_and_differences(device, rng, kernels):
    """d energy / d positions through both neighbour loops (float64): gradkit's reverse mode against
    central differences of gradkit's forward values and forward mode against reverse mode; for the
    per-pair form also against Warp's. (For the accumulating form, whose loops carry float sums, one of them
    into dot(acc, acc), Warp 1.19's reverse mode is wrong — up to 5x off central differences — while
    gradkit's matches them: docs/porting/warp.md.)"""
    pts = _points(rng, n=60, dtype=np.float64)
    h = 0.6
    ours = run_sph(gwp, gwp.float64, pts, h, device, tape=True, kernels=kernels)
    scale = np.abs(ours["grad"]).max()
    assert scale > 1e-3
    if kernels is pair_kernels:
        ref = run_sph(warp, warp.float64, pts, h, "cpu", tape=True, kernels=kernels)
        np.testing.assert_allclose(ours["grad"], ref["grad"], rtol=1e-9, atol=1e-11 * scale)

    density, forces = ours["kernels"]
    grid = ours["grid"]             # the grid stays as built: moving points by eps keeps the cells valid

    def energy(p, seed=None):
        x = gk.array(p, dtype=gk.vec3d, device=device)
        rho = gk.zeros(len(p), dtype=gk.float64, device=device)
        f = gk.zeros(len(p), dtype=gk.vec3d, device=device)
        e = gk.zeros(1, dtype=gk.float64, device=device)
        if seed is None:
            gk.launch(density, len(p), inputs=[grid, x, h, rho])
            gk.launch(forces, len(p), inputs=[grid, x, rho, h, f, e])
            return e.numpy()[0]
        with gk.ForwardMode(seeds={x: gk.array(seed, dtype=gk.vec3d, device=device)}):
            gk.launch(density, len(p), inputs=[grid, x, h, rho])
            gk.launch(forces, len(p), inputs=[grid, x, rho, h, f, e])
        return e.dual.numpy()[0]

    eps = 1e-6
    for k in rng.choice(len(pts), 3, replace=False):
        for c in range(3):
            a, b = pts.copy(), pts.copy()
            a[k, c] += eps
            b[k, c] -= eps
            fd = (energy(a) - energy(b)) / (2 * eps)
            assert abs(ours["grad"][k, c] - fd) <= 1e-6 * scale, (k, c)
    v = rng.standard_normal(pts.shape)
    np.testing.assert_allclose(energy(pts, v), np.sum(ours["grad"] * v), rtol=1e-9)


def test_compile_errors_name_the_grid():
    @gk.kernel
    def wrong(x: gk.array(dtype=gk.vec3)):
        i = gk.tid()
        q = gk.hash_grid_query(x, x[i], 1.0)  # noqa: F841

    with pytest.raises(gk.CompileError, match="must be a hash grid"):
        gk.launch(wrong, 1, inputs=[gk.zeros(1, dtype=gk.vec3)])

    @gk.kernel
    def not_a_query(x: gk.array(dtype=gk.vec3)):
        for j in x:
            pass

    with pytest.raises(gk.CompileError, match="hash_grid_query"):
        gk.launch(not_a_query, 1, inputs=[gk.zeros(1, dtype=gk.vec3)])
