"""gk.Bvh's device build (geometry/bvh_build.py: a linear BVH in kernels) on every device: a valid tree (every
item once, leaves of 1..LEAF_SIZE items tiling the primitive order, children after their parent at left and
left + 1, node boxes the exact min / max of their items', miss links and the 8 ray-octant walks visiting every
node once, near child first along one axis), AABB and ray query sets equal to the host build's and to
brute force, refit after the boxes move, degenerate inputs (one item, a few, all at one point, NaN boxes
refused as the host build refuses them), two builds from two threads, and the default choice by device."""

import threading

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.library.bvh import LEAF_SIZE
from gradkit.geometry.bvh import build_tree
from gradkit.warp.examples import uv_sphere

from tests.geometry.test_bvh import boxes, overlap_ref, ray_pairs, ray_ref
from tests.geometry.test_mesh import closest_on_triangles


@gk.kernel
def aabb_pairs(bvh: gk.Bvh, lo: gk.array(dtype=gk.vec3), hi: gk.array(dtype=gk.vec3),
               seen: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    for j in gk.bvh_query_aabb(bvh, lo[i], hi[i]):
        gk.atomic_add(seen, i, j, 1)


def make(device, lo, hi, device_build):
    return gk.Bvh(gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device),
                  device_build=device_build)


def check_tree(bvh, lo, hi):
    """Every structural property a query relies on, from the device arrays read back (a Bvh's or a Mesh's)."""
    a = bvh._arrays if isinstance(bvh, gk.Bvh) else bvh._bvh
    n = lo.shape[0]
    info = a.node_info.numpy().reshape(-1, 4).astype(np.int64)
    prims = a.prims.numpy().reshape(-1)[:n]
    nodes = info.shape[0]
    assert sorted(prims.tolist()) == list(range(n))                 # every item once
    inner = info[:, 0] >= 0
    leaves = np.flatnonzero(~inner)
    assert nodes == 2 * leaves.size - 1
    counts = info[leaves, 3]
    assert ((counts >= 1) & (counts <= LEAF_SIZE)).all()
    order = np.argsort(info[leaves, 2])                            # the leaves tile [0, n)
    starts, counts = info[leaves[order], 2], counts[order]
    assert starts[0] == 0 and (starts[1:] == starts[:-1] + counts[:-1]).all() and starts[-1] + counts[-1] == n
    left = info[inner, 0]
    assert (left > np.flatnonzero(inner)).all() and (info[inner, 3] == 0).all()
    children = np.concatenate([left, left + 1])
    assert sorted(children.tolist()) == list(range(1, nodes))       # each node but the root a child once
    # node boxes: exactly the min / max over their subtree's items (a leaf's items, then children's boxes)
    nlo, nhi = a.node_lowers.numpy().reshape(-1, 3), a.node_uppers.numpy().reshape(-1, 3)
    for leaf in leaves:
        items = prims[info[leaf, 2]:info[leaf, 2] + info[leaf, 3]]
        assert (nlo[leaf] == lo[items].min(0)).all() and (nhi[leaf] == hi[items].max(0)).all()
    ids = np.flatnonzero(inner)
    assert (nlo[ids] == np.minimum(nlo[info[ids, 0]], nlo[info[ids, 0] + 1])).all()
    assert (nhi[ids] == np.maximum(nhi[info[ids, 0]], nhi[info[ids, 0] + 1])).all()
    # miss links: a depth-first, left-first walk's; the octant walks: near child first along one axis
    miss = np.full(nodes, -1, np.int64)
    ray = a.ray_order.numpy().reshape(8, nodes, 2).astype(np.int64)
    for node in ids:                                                # ids ascend: parents before children
        miss[info[node, 0]] = info[node, 0] + 1
        miss[info[node, 0] + 1] = miss[node]
    assert (info[:, 1] == miss).all()
    for node in ids:
        near = ray[:, node, 0] - info[node, 0]
        assert set(near.tolist()) <= {0, 1}
        assert any(all(near[o] == (o >> ax) & 1 for o in range(8)) for ax in range(3)), (node, near)
    assert (ray[:, leaves, 0] == -1).all()
    for o in range(8):
        first, link = ray[o, :, 0], ray[o, :, 1]
        assert link[0] == -1
        for node in ids:
            far = 2 * info[node, 0] + 1 - first[node]
            assert link[first[node]] == far and link[far] == link[node]
        walked, node = [], 0                                        # the walk visits every node once
        while node >= 0 and len(walked) <= nodes:
            walked.append(node)
            node = first[node] if first[node] >= 0 else link[node]
        assert sorted(walked) == list(range(nodes))


def query_sets(device, bvh, lo, hi, rng):
    """The (AABB query, ray query) hit tables of random queries about the boxes."""
    m, n = 64, lo.shape[0]
    centre = rng.uniform(lo.min(), hi.max(), (m, 3)).astype(np.float32)
    half = rng.uniform(0.0, 1.5, (m, 3)).astype(np.float32)
    qlo, qhi = centre - half, centre + half
    seen = gk.zeros((m, n), dtype=gk.int32, device=device)
    gk.launch(aabb_pairs, m, inputs=[bvh, gk.array(qlo, dtype=gk.vec3, device=device),
                                     gk.array(qhi, dtype=gk.vec3, device=device), seen], device=device)
    s = rng.uniform(-2.0, 12.0, (m, 3)).astype(np.float32)
    d = rng.normal(size=(m, 3)).astype(np.float32)
    d[:8, 1:] = 0.0                                              # along an axis: zero components
    hits = gk.zeros((m, n), dtype=gk.int32, device=device)
    gk.launch(ray_pairs, m, inputs=[bvh, gk.array(s, dtype=gk.vec3, device=device),
                                    gk.array(d, dtype=gk.vec3, device=device), 6.0, hits], device=device)
    return (seen.numpy(), overlap_ref(lo, hi, qlo, qhi)), (hits.numpy(), ray_ref(lo, hi, s, d, 6.0))


@pytest.mark.parametrize("n", [5, 300, 3000])
def test_device_build_is_a_valid_tree(device, rng, n):
    lo, hi = boxes(rng, n)
    check_tree(make(device, lo, hi, True), lo, hi)


@pytest.mark.parametrize("n", [1, 3, LEAF_SIZE])
def test_a_few_items_make_one_leaf(device, rng, n):
    lo, hi = boxes(rng, n)
    bvh = make(device, lo, hi, True)
    check_tree(bvh, lo, hi)
    assert bvh._arrays.node_info.shape[0] == 1
    (seen, want), (hits, want_ray) = query_sets(device, bvh, lo, hi, rng)
    assert (seen == want).all() and (hits == want_ray).all()


@pytest.mark.parametrize("kind", ["one point", "two points", "integer grid"])
def test_equal_centres(device, rng, kind):
    """Equal Morton codes (the same box many times, or two, or boxes on a coarse lattice): split by index."""
    n = 700
    if kind == "one point":
        lo = np.tile(rng.uniform(0, 1, (1, 3)), (n, 1)).astype(np.float32)
    elif kind == "two points":
        lo = rng.uniform(0, 1, (2, 3))[rng.integers(0, 2, n)].astype(np.float32)
    else:
        lo = rng.integers(0, 3, (n, 3)).astype(np.float32)
    hi = lo + np.float32(0.5)
    bvh = make(device, lo, hi, True)
    check_tree(bvh, lo, hi)
    assert bvh._arrays.node_info.shape[0] <= 4 * n                 # balanced by index: depth ~ log2 n
    (seen, want), (hits, want_ray) = query_sets(device, bvh, lo, hi, rng)
    assert (seen == want).all() and (hits == want_ray).all()


@pytest.mark.parametrize("n", [1000, 5000])
def test_queries_equal_the_host_build_and_brute_force(device, rng, n):
    lo, hi = boxes(rng, n, spread=20.0)
    (dseen, want), (dhits, want_ray) = query_sets(device, make(device, lo, hi, True), lo, hi,
                                                  np.random.default_rng(n))
    (hseen, _), (hhits, _) = query_sets(device, make(device, lo, hi, False), lo, hi, np.random.default_rng(n))
    assert want.any() and want_ray.any()
    assert (dseen == want).all() and (dhits == want_ray).all()
    assert (dseen == hseen).all() and (dhits == hhits).all()


def test_refit_after_a_device_build(device, rng):
    """The refits read the device-built tree (its host copy read back for the level-by-level refit)."""
    n = 2000
    lo, hi = boxes(rng, n)
    L, H = gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device)
    bvh = gk.Bvh(L, H, device_build=True)
    shift = rng.normal(scale=2.0, size=(n, 3)).astype(np.float32)
    lo2, hi2 = lo + shift, hi + shift
    L.assign(lo2)
    H.assign(hi2)
    bvh.refit()
    check_tree(bvh, lo2, hi2)
    (seen, want), (hits, want_ray) = query_sets(device, bvh, lo2, hi2, rng)
    assert (seen == want).all() and (hits == want_ray).all()


def test_host_refit_of_a_device_built_tree(device, rng):
    """The host refit (NumPy, over the tree read back from the device) gives the device-built tree's bounds."""
    lo, hi = boxes(rng, 1500)
    bvh = make(device, lo, hi, True)
    shift = rng.normal(size=(1500, 3)).astype(np.float32)
    bvh._arrays.refit(lo + shift, hi + shift)
    check_tree(bvh, lo + shift, hi + shift)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_boxes_are_refused_as_by_the_host_build(device, rng, bad):
    lo, hi = boxes(rng, 100)
    hi[37, 1] = bad
    for device_build in (False, True):
        with pytest.raises(ValueError, match="finite"):
            make(device, lo, hi, device_build)


def test_two_builds_from_two_threads(device, rng):
    """Builds in two threads at once give the trees each gives alone (the build is deterministic)."""
    inputs = [boxes(rng, n) for n in (3000, 2000)]
    alone = [make(device, lo, hi, True)._arrays for lo, hi in inputs]
    out, errors = [None, None], []

    def run(k):
        try:
            out[k] = make(device, *inputs[k], True)._arrays
        except Exception as error:          # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for a, b, (lo, hi) in zip(alone, out, inputs):
        for name in ("node_info", "ray_order", "prims", "node_lowers", "node_uppers"):
            assert np.array_equal(getattr(a, name).numpy(), getattr(b, name).numpy()), name


def test_default_is_the_device_build_where_memory_is_not_the_hosts(device, rng):
    """device_build=None: the device build where the memory is not the host's, or as Warp's constructor asks
    ("lbvh": the device's; "sah", "median": the host's); a device-built tree has no host copy until a refit
    reads it back."""
    lo, hi = boxes(rng, 200)
    L, H = gk.array(lo, dtype=gk.vec3, device=device), gk.array(hi, dtype=gk.vec3, device=device)
    on_device = L._host is None
    assert (gk.Bvh(L, H)._arrays._tree is None) == on_device
    assert gk.Bvh(L, H, constructor="lbvh")._arrays._tree is None
    for constructor in ("sah", "median"):           # the host build's tree itself
        assert np.array_equal(gk.Bvh(L, H, constructor=constructor)._arrays._tree.prims, build_tree(lo, hi).prims)
    pts, tris = uv_sphere(6, 0.0, rng)
    P = gk.array(pts.astype(np.float32), dtype=gk.vec3, device=device)
    indices = gk.array(tris.reshape(-1), dtype=gk.int32, device=device)
    assert (gk.Mesh(P, indices)._bvh._tree is None) == on_device
    assert gk.Mesh(P, indices, bvh_constructor="lbvh")._bvh._tree is None
    assert gk.Mesh(P, indices, bvh_constructor="sah")._bvh._tree is not None
    lo64 = lo.astype(np.float64)
    with pytest.raises(ValueError, match="device build"):
        gk.Bvh(gk.array(lo64, dtype=gk.vec3d, device=device), gk.array(lo64 + 1, dtype=gk.vec3d, device=device),
               device_build=True)


@gk.kernel
def mesh_queries(mesh: gk.Mesh, x: gk.array(dtype=gk.vec3), d: gk.array(dtype=gk.vec3),
                 dist: gk.array(dtype=float), sign: gk.array(dtype=float), t: gk.array(dtype=float),
                 boxes: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    q = gk.mesh_query_point_no_sign(mesh, x[i], 0.5)
    dist[i] = -1.0
    if q.result:
        dist[i] = gk.length(gk.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])
    sign[i] = gk.mesh_query_point_sign_normal(mesh, x[i], 10.0).sign
    r = gk.mesh_query_ray(mesh, x[i], d[i], 1.0e6)
    t[i] = -1.0
    if r.result:
        t[i] = r.t
    for j in gk.mesh_query_aabb(mesh, x[i] - gk.vec3(0.1, 0.1, 0.1), x[i] + gk.vec3(0.1, 0.1, 0.1)):
        boxes[i, j] = boxes[i, j] + 1


def mesh_results(device, pts, tris, x, d, device_build):
    mesh = gk.Mesh(gk.array(pts, dtype=gk.vec3, device=device),
                   gk.array(tris.reshape(-1), dtype=gk.int32, device=device), device_build=device_build)
    m = x.shape[0]
    out = [gk.zeros(m, dtype=float, device=device) for _ in range(3)]
    boxes = gk.zeros((m, tris.shape[0]), dtype=gk.int32, device=device)
    gk.launch(mesh_queries, m, inputs=[mesh, gk.array(x, dtype=gk.vec3, device=device),
                                       gk.array(d, dtype=gk.vec3, device=device), *out, boxes], device=device)
    return mesh, [a.numpy() for a in out] + [boxes.numpy()]


def test_mesh_queries_equal_the_host_build_and_brute_force(device, rng):
    """Closest distances and sides, first hits and AABB triangle sets of a device-built mesh BVH: the same
    numbers as the host-built one's, and the brute-force ones over every triangle (float64)."""
    pts, tris = uv_sphere(24, 0.1, rng)
    pts = pts.astype(np.float32)
    m = 200
    x = rng.uniform(-1.4, 1.4, (m, 3)).astype(np.float32)
    d = rng.normal(size=(m, 3)).astype(np.float32)
    mesh, dev = mesh_results(device, pts, tris, x, d, True)
    check_tree(mesh, *mesh_bounds(pts, tris))
    assert abs(mesh._edge - mesh_edge(pts, tris)) <= 1e-6 * mesh._edge
    _, host = mesh_results(device, pts, tris, x, d, False)
    for got, want in zip(dev, host):
        assert np.array_equal(got, want)
    lo, hi = mesh_bounds(pts, tris)
    assert (dev[3] == overlap_ref(lo, hi, x - np.float32(0.1), x + np.float32(0.1))).all()
    p64 = pts.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = np.linalg.norm(closest_on_triangles(a, b, c, x.astype(np.float64)) - x[:, None], axis=-1).min(1)
    within = ref < 0.5
    assert within.any() and ((dev[0] >= 0) == within).all()
    np.testing.assert_allclose(dev[0][within], ref[within], rtol=1e-5, atol=1e-6)
    t_ref = ray_triangle_ref(a, b, c, x.astype(np.float64), d.astype(np.float64))
    hit = np.isfinite(t_ref)
    assert hit.any() and ((dev[2] >= 0) == hit).all()
    np.testing.assert_allclose(dev[2][hit], t_ref[hit], rtol=1e-4, atol=1e-5)


def test_mesh_refit_after_a_device_build(device, rng):
    pts, tris = uv_sphere(12, 0.1, rng)
    pts = pts.astype(np.float32)
    points = gk.array(pts, dtype=gk.vec3, device=device)
    mesh = gk.Mesh(points, gk.array(tris.reshape(-1), dtype=gk.int32, device=device), device_build=True)
    moved = (pts * 1.5 + rng.normal(scale=0.05, size=pts.shape)).astype(np.float32)
    points.assign(moved)
    mesh.refit()
    check_tree(mesh, *mesh_bounds(moved, tris))


def test_mesh_device_build_refuses_non_finite_points(device, rng):
    pts, tris = uv_sphere(6, 0.0, rng)
    pts = pts.astype(np.float32)
    pts[3, 2] = np.nan
    for device_build in (False, True):
        with pytest.raises(ValueError, match="finite"):
            gk.Mesh(gk.array(pts, dtype=gk.vec3, device=device),
                    gk.array(tris.reshape(-1), dtype=gk.int32, device=device), device_build=device_build)


def mesh_bounds(pts, tris):
    a, b, c = (pts[tris[:, k]] for k in range(3))
    return np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)


def mesh_edge(pts, tris):
    a, b, c = (pts[tris[:, k]].astype(np.float64) for k in range(3))
    return np.mean([np.linalg.norm(a - b, axis=1), np.linalg.norm(b - c, axis=1), np.linalg.norm(c - a, axis=1)])


def ray_triangle_ref(a, b, c, s, d):
    """The first hit t of each ray (s, d) on any triangle (inf: none), Moller-Trumbore in float64."""
    e1, e2 = b - a, c - a
    p = np.cross(d[:, None], e2[None])
    det = (e1[None] * p).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / det
        tv = s[:, None] - a[None]
        u = (tv * p).sum(-1) * inv
        q = np.cross(tv, e1[None])
        v = (d[:, None] * q).sum(-1) * inv
        t = (e2[None] * q).sum(-1) * inv
    ok = (np.abs(det) > 1e-12) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    return np.where(ok, t, np.inf).min(1)
