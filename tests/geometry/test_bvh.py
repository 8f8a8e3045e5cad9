"""gk.Bvh on every device: AABB and ray queries against brute-force NumPy overlap sets (both loop forms, the
object or its id), refit after the boxes move, the balanced build, and the same sets as Warp 1.19's
wp.Bvh through gradkit.warp (a wp.uint64 parameter bound to a Bvh)."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np
import pytest

import gradkit as gk
import gradkit.warp as gwp
from gradkit.geometry.bvh import _stable_order, build_tree

try:
    import warp
    warp.config.quiet = True
    warp.init()
except ImportError:
    warp = None

needs_warp = pytest.mark.skipif(warp is None, reason="warp-lang (the reference) is not installed")


@gk.kernel
def aabb_pairs(bvh: gk.Bvh, lo: gk.array(dtype=gk.vec3), hi: gk.array(dtype=gk.vec3),
               seen: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    q = gk.bvh_query_aabb(bvh, lo[i], hi[i])
    j = int(0)
    while gk.bvh_query_next(q, j):
        gk.atomic_add(seen, i, j, 1)


@gk.kernel
def ray_pairs(bvh: gk.Bvh, s: gk.array(dtype=gk.vec3), d: gk.array(dtype=gk.vec3), max_t: float,
              seen: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    q = gk.bvh_query_ray(bvh, s[i], d[i])
    j = int(0)
    while gk.bvh_query_next(q, j, max_t):
        gk.atomic_add(seen, i, j, 1)


@gk.kernel
def aabb_pairs_for(bvh: gk.Bvh, lo: gk.array(dtype=gk.vec3), hi: gk.array(dtype=gk.vec3),
                   seen: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    for j in gk.bvh_query_aabb(bvh, lo[i], hi[i]):
        gk.atomic_add(seen, i, j, 1)


def boxes(rng, n, spread=10.0, size=1.0):
    c = rng.uniform(0, spread, (n, 3))
    h = rng.uniform(0.05, size, (n, 3))
    return (c - h).astype(np.float32), (c + h).astype(np.float32)


def overlap_ref(lo, hi, qlo, qhi):
    return ((lo[None] <= qhi[:, None]) & (hi[None] >= qlo[:, None])).all(-1)


def ray_ref(lo, hi, s, d, max_t=np.inf):
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d.astype(np.float64)
        t0 = (lo[None] - s[:, None]) * inv[:, None]
        t1 = (hi[None] - s[:, None]) * inv[:, None]
        near = np.nan_to_num(np.minimum(t0, t1), nan=-np.inf).max(-1)
        far = np.nan_to_num(np.maximum(t0, t1), nan=np.inf).min(-1)
    return (far >= np.maximum(near, 0.0)) & (near < max_t)


def test_build_is_balanced_and_covers_every_item(rng):
    lo, hi = boxes(rng, 1000)
    tree = build_tree(lo.astype(np.float64), hi.astype(np.float64))
    assert sorted(tree.prims.tolist()) == list(range(1000))
    assert tree.depth <= int(np.ceil(np.log2(1000 / 4))) + 1
    nlo, nhi = tree.bounds(lo.astype(np.float64), hi.astype(np.float64))
    leaf = tree.info[:, 3] > 0
    for node in np.nonzero(leaf)[0][:50]:                    # a leaf's box holds its items'
        start, count = tree.info[node, 2:]
        items = tree.prims[start:start + count]
        assert (nlo[node] <= lo[items]).all() and (nhi[node] >= hi[items]).all()
    assert np.allclose(nlo[0], lo.min(0)) and np.allclose(nhi[0], hi.max(0))


def subtree_bounds_ref(tree, lo, hi):
    """Each node's bounds as the min / max over the items of its subtree, walked one node at a time."""
    out_lo = np.empty((tree.info.shape[0], 3), lo.dtype)
    out_hi = np.empty((tree.info.shape[0], 3), hi.dtype)

    def items(node):
        left, right, start, count = tree.info[node]
        if count > 0:
            return list(tree.prims[start:start + count])
        return items(left) + items(right)

    for node in range(tree.info.shape[0]):
        ids = items(node)
        out_lo[node], out_hi[node] = lo[ids].min(0), hi[ids].max(0)
    return out_lo, out_hi


@pytest.mark.parametrize("n,ties", [(9, False), (300, True), (2000, False), (2000, True)])
def test_each_split_is_at_the_median_of_the_widest_axis(rng, n, ties):
    """Every inner node holds its items' range, split in halves (left: count // 2) along the axis where its
    items' centres spread widest, every left centre <= every right one there; equal centres keep their
    order from the level above (lexsort's rule, which the rank-and-radix sort reproduces)."""
    lo, hi = boxes(rng, n)
    if ties:
        lo, hi = np.round(lo), np.round(lo) + 1.0
    tree = build_tree(lo, hi)
    centres = 0.5 * (lo.astype(np.float64) + hi)

    def items(node):
        left, right, start, count = tree.info[node]
        return tree.prims[start:start + count] if count > 0 else np.concatenate([items(left), items(right)])

    for level in tree.levels:
        for node in level:
            left, right = tree.info[node, :2]
            a, b = items(left), items(right)
            c = centres[np.concatenate([a, b])]
            axis = np.argmax(c.max(0) - c.min(0))
            assert len(a) == (len(a) + len(b)) // 2
            assert centres[a, axis].max() <= centres[b, axis].min()


@pytest.mark.parametrize("bound", [5, 2 ** 16, 2 ** 16 + 3, 2 ** 33, 2 ** 47 + 11])
def test_radix_order_is_a_stable_argsort(rng, bound):
    keys = rng.integers(0, bound, 5000, dtype=np.int64)
    keys[::7] = keys[0]                                       # ties keep their order
    np.testing.assert_array_equal(_stable_order(keys, bound), np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("n", [1, 5, 7, 300, 1001])
def test_node_bounds_are_their_subtrees_in_the_items_precision(rng, n):
    """Tree.bounds (a leaf table folded column by column, then the levels bottom up) equals the min / max over
    each node's subtree, exactly, for float32 items (kept float32: nothing rounded) and float64 ones; a
    float32 set builds the same tree as its float64 copy (centres in float64 either way)."""
    lo, hi = boxes(rng, n)
    lo[: n // 3] = lo[0]                                    # ties in the centres
    hi[: n // 3] = hi[0]
    t32 = build_tree(lo, hi)
    t64 = build_tree(lo.astype(np.float64), hi.astype(np.float64))
    np.testing.assert_array_equal(t32.info, t64.info)
    np.testing.assert_array_equal(t32.prims, t64.prims)
    for tree, a, b in ((t32, lo, hi), (t64, lo.astype(np.float64) + 1e-9, hi.astype(np.float64))):
        got = tree.bounds(a, b)
        assert got[0].dtype == a.dtype
        for g, r in zip(got, subtree_bounds_ref(tree, a, b)):
            np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("loop", [aabb_pairs, aabb_pairs_for], ids=["while", "for"])
def test_aabb_and_ray_queries_match_brute_force(device, rng, loop):
    n, m = 200, 40
    lo, hi = boxes(rng, n)
    bvh = gk.Bvh(gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device))
    qlo, qhi = boxes(rng, m, size=2.0)
    seen = gk.zeros((m, n), dtype=gk.int32, device=device)
    gk.launch(loop, m, inputs=[bvh, gk.array(qlo, dtype=gk.vec3, device=device),
                               gk.array(qhi, dtype=gk.vec3, device=device), seen])
    ref = overlap_ref(lo, hi, qlo, qhi)
    assert ref.sum() > m
    np.testing.assert_array_equal(seen.numpy(), ref.astype(np.int32))
    if loop is aabb_pairs_for:
        return
    s = rng.uniform(-2, 12, (m, 3)).astype(np.float32)
    d = rng.normal(size=(m, 3)).astype(np.float32)
    d[:5, 0] = 0.0                                           # rays parallel to a slab
    for max_t in (1e30, 4.0):
        seen.zero_()
        gk.launch(ray_pairs, m, inputs=[bvh.id, gk.array(s, dtype=gk.vec3, device=device),
                                        gk.array(d, dtype=gk.vec3, device=device), max_t, seen])
        np.testing.assert_array_equal(seen.numpy(), ray_ref(lo, hi, s, d, max_t).astype(np.int32))


def test_refit_follows_moved_boxes(device, rng):
    n, m = 100, 20
    lo, hi = boxes(rng, n)
    glo, ghi = gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device)
    bvh = gk.Bvh(glo, ghi)
    shift = rng.uniform(-3, 3, (n, 3)).astype(np.float32)
    lo2, hi2 = lo + shift, hi + shift
    gk.copy(glo, gk.array(lo2, dtype=gk.vec3, device=device))      # the same arrays, moved in place
    gk.copy(ghi, gk.array(hi2, dtype=gk.vec3, device=device))
    bvh.refit()
    qlo, qhi = boxes(rng, m, size=2.0)
    seen = gk.zeros((m, n), dtype=gk.int32, device=device)
    gk.launch(aabb_pairs, m, inputs=[bvh, gk.array(qlo, dtype=gk.vec3, device=device),
                                     gk.array(qhi, dtype=gk.vec3, device=device), seen])
    np.testing.assert_array_equal(seen.numpy(), overlap_ref(lo2, hi2, qlo, qhi).astype(np.int32))


def test_device_refit_equals_the_host_refit(device, rng):
    """gk.Bvh.refit of float32 boxes runs on the device (geometry/refit.py): the same item and node bounds
    as the host refit of a twin over the same tree, bit for bit, over several moves; unrecorded on a tape;
    a non-finite box raises."""
    n = 300
    lo, hi = boxes(rng, n)
    glo, ghi = gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device)
    bvh = gk.Bvh(glo, ghi)
    twin = gk.Bvh(gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device))
    for k in range(3):
        shift = rng.uniform(-3, 3, (n, 3)).astype(np.float32)
        lo2, hi2 = lo + shift, hi + shift * rng.uniform(0.5, 1.5, (n, 1)).astype(np.float32)
        gk.copy(glo, gk.array(lo2, dtype=gk.vec3, device=device))
        gk.copy(ghi, gk.array(np.maximum(lo2, hi2), dtype=gk.vec3, device=device))
        tape = gk.Tape()
        with tape:
            bvh.refit()
        assert not tape.records
        twin._arrays.refit(glo.numpy().astype(np.float32), ghi.numpy().astype(np.float32))
        for name in ("node_lowers", "node_uppers", "item_lowers", "item_uppers"):
            np.testing.assert_array_equal(getattr(bvh._arrays, name).numpy(), getattr(twin._arrays, name).numpy())
    bad = lo2.copy()
    bad[7, 2] = np.nan
    gk.copy(glo, gk.array(bad, dtype=gk.vec3, device=device))
    with pytest.raises(ValueError, match="must be finite"):
        bvh.refit()


def test_empty_bvh_and_bad_ids(device):
    z = gk.zeros(0, dtype=gk.vec3, device=device)
    bvh = gk.Bvh(z, z)
    seen = gk.zeros((1, 1), dtype=gk.int32, device=device)
    one = gk.zeros(1, dtype=gk.vec3, device=device)
    gk.launch(aabb_pairs, 1, inputs=[bvh.id, one, one, seen])
    assert seen.numpy().sum() == 0
    with pytest.raises(ValueError, match="no geometry object"):
        gk.launch(aabb_pairs, 1, inputs=[10**9, one, one, seen])
    grid = gk.HashGrid(2, 2, 2, device=device)
    with pytest.raises(TypeError, match="names a HashGrid"):
        gk.launch(aabb_pairs, 1, inputs=[grid.id, one, one, seen])


@needs_warp
def test_overlap_sets_match_warp(rng):
    """The same Warp-language kernel (a wp.uint64 parameter) under Warp 1.19 and gradkit.warp."""
    n, m = 300, 30
    lo, hi = boxes(rng, n)
    qlo, qhi = boxes(rng, m, size=2.0)
    s = rng.uniform(-2, 12, (m, 3)).astype(np.float32)
    d = rng.normal(size=(m, 3)).astype(np.float32)
    out = {}
    for wp in (warp, gwp):
        @wp.kernel
        def both(bvh: wp.uint64, qlo: wp.array(dtype=wp.vec3), qhi: wp.array(dtype=wp.vec3),
                 s: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3), box: wp.array2d(dtype=int),
                 ray: wp.array2d(dtype=int)):
            i = wp.tid()
            q = wp.bvh_query_aabb(bvh, qlo[i], qhi[i])
            j = int(0)
            while wp.bvh_query_next(q, j):
                box[i, j] = box[i, j] + 1
            r = wp.bvh_query_ray(bvh, s[i], d[i])
            while wp.bvh_query_next(r, j):
                ray[i, j] = ray[i, j] + 1
        a = dict(dtype=wp.vec3, device="cpu")
        bvh = wp.Bvh(wp.array(lo, **a), wp.array(hi, **a))
        box = wp.zeros((m, n), dtype=int, device="cpu")
        ray = wp.zeros((m, n), dtype=int, device="cpu")
        wp.launch(both, m, inputs=[bvh.id, wp.array(qlo, **a), wp.array(qhi, **a), wp.array(s, **a),
                                   wp.array(d, **a), box, ray], device="cpu")
        out[wp] = box.numpy(), ray.numpy()
    np.testing.assert_array_equal(out[gwp][0], out[warp][0])
    np.testing.assert_array_equal(out[gwp][1], out[warp][1])
