"""gk.Mesh on every device: closest points, distances and signs, first ray hits and AABB triangle sets
against brute-force NumPy references over all triangles; refit after the vertices move; gradients of a
loss of closest-point distances and ray t's with respect to the query points and the mesh's vertices
against central differences (float64, reverse and forward mode); and the same kernels as Warp 1.19
through gradkit.warp (distances, t, signs; the query-point gradient of Warp's test_adj_mesh_query_point)."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np
import pytest

import gradkit as gk
import gradkit.warp as gwp
from gradkit.warp.examples import uv_sphere

try:
    import warp
    warp.config.quiet = True
    warp.init()
except ImportError:
    warp = None

needs_warp = pytest.mark.skipif(warp is None, reason="warp-lang (the reference) is not installed")


def sphere(n=6, jitter=0.0, rng=None):
    """A closed, outward-oriented UV sphere (radius ~1), vertices optionally jittered radially."""
    return uv_sphere(n, jitter, rng)


def closest_on_triangles(a, b, c, p):
    """Closest points of each triangle (a, b, c: (t, 3)) to each point p (n, 3): (n, t, 3) (Ericson's)."""
    p = p[:, None]
    ab, ac = b - a, c - a
    ap, bp, cp = p - a, p - b, p - c
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        den = 1.0 / (va + vb + vc)
        out = a + ab * (vb * den)[..., None] + ac * (vc * den)[..., None]
        regions = [
            (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0),
            (vb <= 0) & (d2 >= 0) & (d6 <= 0),
            (d6 >= 0) & (d5 <= d6),
            (vc <= 0) & (d1 >= 0) & (d3 <= 0),
            (d3 >= 0) & (d4 <= d3),
            (d1 <= 0) & (d2 <= 0),
        ]
        values = [
            b + ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[..., None] * (c - b),
            a + (d2 / (d2 - d6))[..., None] * ac,
            c + 0 * p, a + (d1 / (d1 - d3))[..., None] * ab, b + 0 * p, a + 0 * p,
        ]
    for mask, v in zip(regions, values):         # later rows take precedence, as Ericson's order
        out = np.where(mask[..., None], v, out)
    return out


def ray_hits(a, b, c, s, d):
    """t of each ray (s, d: (n, 3)) with each triangle ((t, 3)): (n, t), inf on a miss."""
    e1, e2 = b - a, c - a
    pv = np.cross(d[:, None], e2)
    det = (e1 * pv).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / det
        tv = s[:, None] - a
        u = (tv * pv).sum(-1) * inv
        qv = np.cross(tv, e1)
        v = (d[:, None] * qv).sum(-1) * inv
        t = (e2 * qv).sum(-1) * inv
    ok = (det != 0) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    return np.where(ok, t, np.inf)


@gk.kernel
def point_queries(mesh: gk.Mesh, x: gk.array(dtype=gk.vec3), max_dist: float, dist: gk.array(dtype=float),
                  signs: gk.array2d(dtype=float)):
    i = gk.tid()
    q = gk.mesh_query_point_no_sign(mesh, x[i], max_dist)
    dist[i] = -1.0
    if q.result:
        dist[i] = gk.length(gk.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])
    signs[i, 0] = gk.mesh_query_point(mesh, x[i], max_dist).sign
    signs[i, 1] = gk.mesh_query_point_sign_normal(mesh, x[i], max_dist).sign
    signs[i, 2] = gk.mesh_query_point_sign_winding_number(mesh, x[i], max_dist).sign


@gk.kernel
def ray_queries(mesh: gk.Mesh, s: gk.array(dtype=gk.vec3), d: gk.array(dtype=gk.vec3), t: gk.array(dtype=float),
                normal_dot: gk.array(dtype=float), boxes: gk.array2d(dtype=gk.int32)):
    i = gk.tid()
    q = gk.mesh_query_ray(mesh, s[i], d[i], 1.0e6)
    t[i] = -1.0
    if q.result:
        t[i] = q.t
        hit = gk.mesh_eval_position(mesh, q.face, q.u, q.v)
        normal_dot[i] = gk.length(hit - (s[i] + q.t * d[i])) + gk.abs(gk.length(q.normal) - 1.0)
    for j in gk.mesh_query_aabb(mesh, s[i] - gk.vec3(0.3, 0.3, 0.3), s[i] + gk.vec3(0.3, 0.3, 0.3)):
        boxes[i, j] = boxes[i, j] + 1


def make_mesh(device, rng, dtype=gk.vec3, n=6, jitter=0.1):
    pts, tris = sphere(n, jitter, rng)
    np_dtype = np.float64 if dtype is gk.vec3d else np.float32
    pts = pts.astype(np_dtype)
    mesh = gk.Mesh(gk.array(pts, dtype=dtype, device=device, requires_grad=True),
                   gk.array(tris.reshape(-1), dtype=gk.int32, device=device))
    return mesh, pts, tris


def test_point_queries_match_brute_force(device, rng):
    mesh, pts, tris = make_mesh(device, rng)
    n = 80
    x = rng.uniform(-1.6, 1.6, (n, 3)).astype(np.float32)
    dist = gk.zeros(n, dtype=float, device=device)
    signs = gk.zeros((n, 3), dtype=float, device=device)
    gk.launch(point_queries, n, inputs=[mesh, gk.array(x, dtype=gk.vec3, device=device), 0.8, dist, signs])
    p64 = pts.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = np.linalg.norm(closest_on_triangles(a, b, c, x.astype(np.float64)) - x[:, None], axis=-1).min(1)
    got = dist.numpy()
    within = ref < 0.8
    np.testing.assert_allclose(got[within], ref[within], rtol=1e-5, atol=1e-6)
    assert (got[~within] == -1.0).all() and within.sum() > n // 2
    # inside / outside of the closed mesh by every sign (points near the surface left out)
    r = np.linalg.norm(x, axis=1)
    sure = within & ((r < 0.8) | (r > 1.2))
    want = np.where(r < 1.0, -1.0, 1.0)
    for k in range(3):
        np.testing.assert_array_equal(signs.numpy()[sure, k], want[sure])


def test_ray_and_aabb_queries_match_brute_force(device, rng):
    mesh, pts, tris = make_mesh(device, rng)
    n = 60
    s = rng.uniform(-1.5, 1.5, (n, 3)).astype(np.float32)
    s[: n // 2] *= 0.4                                      # starts inside: these all hit
    d = rng.normal(size=(n, 3)).astype(np.float32)
    t = gk.zeros(n, dtype=float, device=device)
    err = gk.zeros(n, dtype=float, device=device)
    boxes = gk.zeros((n, len(tris)), dtype=gk.int32, device=device)
    gk.launch(ray_queries, n, inputs=[mesh.id, gk.array(s, dtype=gk.vec3, device=device),
                                      gk.array(d, dtype=gk.vec3, device=device), t, err, boxes])
    p64 = pts.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = ray_hits(a, b, c, s.astype(np.float64), d.astype(np.float64)).min(1)
    got = t.numpy()
    hit = np.isfinite(ref)
    assert hit.sum() > n // 3
    np.testing.assert_allclose(got[hit], ref[hit], rtol=1e-4, atol=1e-5)
    assert (got[~hit] == -1.0).all()
    assert err.numpy()[hit].max() < 1e-4            # mesh_eval_position(face, u, v) is the hit point; |normal| 1
    lo, hi = np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)
    want = ((lo[None] <= s[:, None] + 0.3) & (hi[None] >= s[:, None] - 0.3)).all(-1)
    np.testing.assert_array_equal(boxes.numpy(), want.astype(np.int32))


def test_refit_after_moving_vertices(device, rng):
    mesh, pts, tris = make_mesh(device, rng)
    n = 40
    x = rng.uniform(-3, 3, (n, 3)).astype(np.float32)
    moved = (pts * 1.5 + np.array([1.0, 0.0, 0.5])).astype(np.float32)
    gk.copy(mesh.points, gk.array(moved, dtype=gk.vec3, device=device))
    mesh.refit()
    dist = gk.zeros(n, dtype=float, device=device)
    signs = gk.zeros((n, 3), dtype=float, device=device)
    gk.launch(point_queries, n, inputs=[mesh, gk.array(x, dtype=gk.vec3, device=device), 10.0, dist, signs])
    p64 = moved.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = np.linalg.norm(closest_on_triangles(a, b, c, x.astype(np.float64)) - x[:, None], axis=-1).min(1)
    np.testing.assert_allclose(dist.numpy(), ref, rtol=1e-5, atol=1e-6)
    # the refit's host side: the BVH's node bounds equal a fresh build's over the moved points (same
    # triangles), and the average edge length is Warp's (mean of the three edge lengths) of the moved mesh
    fresh = gk.Mesh(gk.array(moved, dtype=gk.vec3, device=device), mesh.indices)
    for name in ("node_lowers", "node_uppers", "item_lowers", "item_uppers"):
        np.testing.assert_array_equal(getattr(mesh._bvh, name).numpy(), getattr(fresh._bvh, name).numpy())
    edge = np.mean([np.linalg.norm(u - v, axis=-1) for u, v in ((a, b), (a, c), (c, b))])
    assert mesh._gk_struct_value().average_edge_length == pytest.approx(edge, rel=1e-6)


@pytest.mark.parametrize("dtype", [gk.vec3, gk.vec3d], ids=["float32", "float64"])
def test_refit_on_the_device_equals_the_host_build(device, rng, dtype):
    """A refit (float32 points: two kernels on the mesh's device, geometry/refit.py; float64: on the host)
    gives the node bounds the host computes for the same tree (a twin mesh of the same points, refitted by
    geometry/bvh.py's NumPy code), bit for bit, several refits in a row, and every node's box holds its
    subtree's triangles; it is not recorded on a tape; non-finite points raise (and a later refit of finite
    ones recovers)."""
    from tests.geometry.test_bvh import subtree_bounds_ref
    mesh, pts, tris = make_mesh(device, rng, dtype=dtype, n=9)
    twin = gk.Mesh(gk.array(pts, dtype=dtype, device=device), mesh.indices)
    for k in range(3):
        moved = (pts * rng.uniform(0.5, 2.0, 3) + rng.uniform(-2, 2, 3)).astype(pts.dtype)
        gk.copy(mesh.points, gk.array(moved, dtype=dtype, device=device))
        tape = gk.Tape()
        with tape:
            mesh.refit()
        assert not tape.records
        gk.copy(twin.points, gk.array(moved, dtype=dtype, device=device))
        twin._bvh.refit(*twin._bounds())
        for name in ("node_lowers", "node_uppers", "item_lowers", "item_uppers"):
            np.testing.assert_array_equal(getattr(mesh._bvh, name).numpy(), getattr(twin._bvh, name).numpy())
        assert mesh._gk_struct_value().average_edge_length == pytest.approx(twin._edge, rel=1e-6)
        corners = moved.astype(np.float64)[tris]
        ref_lo, ref_hi = subtree_bounds_ref(mesh._bvh.tree, corners.min(1), corners.max(1))
        assert (mesh._bvh.node_lowers.numpy() <= ref_lo).all() and (mesh._bvh.node_uppers.numpy() >= ref_hi).all()
    bad = moved.copy()
    bad[3, 1] = np.inf
    gk.copy(mesh.points, gk.array(bad, dtype=dtype, device=device))
    with pytest.raises(ValueError, match="must be finite"):
        mesh.refit()
    gk.copy(mesh.points, gk.array(moved, dtype=dtype, device=device))
    mesh.refit()
    np.testing.assert_array_equal(mesh._bvh.node_lowers.numpy(), twin._bvh.node_lowers.numpy())


REFIT_WAYS = {"fused": (True, None), "walk": (True, 0), "levels": (False, 0)}     # (walk, fuse_below)


def device_refit(mesh, way: str):
    """geometry/refit.py's DeviceRefit for `mesh`, forced to one of its three ways: the triangles and nodes in
    one thread's walk (mesh_walk, CPUs' below FUSE_BELOW triangles), the triangles in parallel and then the
    nodes by one thread (node_walk), or by a launch per level."""
    from gradkit.geometry.refit import DeviceRefit
    walk, fuse_below = REFIT_WAYS[way]
    refit = DeviceRefit(mesh.num_tris, mesh.device, walk=walk)
    if fuse_below is not None:
        refit.fuse_below = fuse_below
    return refit


@pytest.mark.parametrize("way", list(REFIT_WAYS))
def test_every_refit_way_gives_the_host_bounds(device, rng, way):
    """geometry/refit.py's three ways (the fused walk, triangles then a walk, a launch per level) each give
    the host refit's item and node bounds bit for bit and its average edge length, on every device."""
    mesh, pts, tris = make_mesh(device, rng, n=11)
    refit = device_refit(mesh, way)
    for _ in range(2):
        moved = (pts * rng.uniform(0.5, 2.0, 3) + rng.uniform(-2, 2, 3)).astype(np.float32)
        gk.copy(mesh.points, gk.array(moved, dtype=gk.vec3, device=device))
        edge = refit.mesh(mesh.points, mesh.indices, mesh.num_tris, mesh._bvh)
        names = ("node_lowers", "node_uppers", "item_lowers", "item_uppers")
        got = {name: getattr(mesh._bvh, name).numpy().copy() for name in names}
        mesh._bvh.refit(*mesh._bounds())                         # the host's, over the same tree
        for name, value in got.items():
            np.testing.assert_array_equal(value, getattr(mesh._bvh, name).numpy())
        a, b, c = (moved.astype(np.float64)[tris[:, k]] for k in range(3))
        ref = np.mean([np.linalg.norm(u - v, axis=-1) for u, v in ((a, b), (a, c), (c, b))])
        assert edge == pytest.approx(ref, rel=1e-6)
        assert edge == pytest.approx(mesh._edge, rel=1e-6)


@pytest.mark.parametrize("way", list(REFIT_WAYS))
def test_every_refit_way_refuses_non_finite_points(device, rng, way):
    """A NaN, +inf or -inf coordinate of any corner raises in each way (the fused walk finds NaN in the edge
    sum and infinities in the root's box, with no test per triangle), and a refit of finite points after
    it gives the host's bounds again."""
    mesh, pts, tris = make_mesh(device, rng, n=7)
    refit = device_refit(mesh, way)
    used = np.unique(tris)
    for bad_value in (np.nan, np.inf, -np.inf):
        for _ in range(2):
            bad = pts.copy()
            bad[rng.choice(used), rng.integers(3)] = bad_value
            gk.copy(mesh.points, gk.array(bad, dtype=gk.vec3, device=device))
            with pytest.raises(ValueError, match="must be finite"):
                refit.mesh(mesh.points, mesh.indices, mesh.num_tris, mesh._bvh)
    gk.copy(mesh.points, gk.array(pts, dtype=gk.vec3, device=device))
    refit.mesh(mesh.points, mesh.indices, mesh.num_tris, mesh._bvh)
    got = mesh._bvh.node_lowers.numpy().copy()
    mesh._bvh.refit(*mesh._bounds())
    np.testing.assert_array_equal(got, mesh._bvh.node_lowers.numpy())


@pytest.mark.parametrize("way", list(REFIT_WAYS))
def test_every_refit_way_reads_the_indices_as_they_are(device, rng, way):
    """A refit after the mesh's indices array was overwritten (the same triangles in another order, corners
    rotated) bounds the triangles the indices now name: item t's box is triangle t's as the array holds it
    (the fused walk keeps the corners in leaf order and remakes them when the indices' version moved)."""
    mesh, pts, tris = make_mesh(device, rng, n=7)
    refit = device_refit(mesh, way)
    refit.mesh(mesh.points, mesh.indices, mesh.num_tris, mesh._bvh)
    new = np.roll(tris[rng.permutation(len(tris))], 1, axis=1).astype(np.int32)
    gk.copy(mesh.indices, gk.array(new.reshape(-1), dtype=gk.int32, device=device))
    refit.mesh(mesh.points, mesh.indices, mesh.num_tris, mesh._bvh)
    corners = pts.astype(np.float32)[new]
    np.testing.assert_array_equal(mesh._bvh.item_lowers.numpy(), corners.min(1))
    np.testing.assert_array_equal(mesh._bvh.item_uppers.numpy(), corners.max(1))
    lo, hi = mesh._bvh.tree.bounds(corners.min(1), corners.max(1))
    np.testing.assert_array_equal(mesh._bvh.node_lowers.numpy(), lo)
    np.testing.assert_array_equal(mesh._bvh.node_uppers.numpy(), hi)


@gk.kernel
def surface_loss(mesh: gk.Mesh[gk.float64], x: gk.array(dtype=gk.vec3d), s: gk.array(dtype=gk.vec3d),
                 d: gk.array(dtype=gk.vec3d), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    q = gk.mesh_query_point_no_sign(mesh, x[i], 10.0)
    e = gk.float64(0.0)
    if q.result:
        p = gk.mesh_eval_position(mesh, q.face, q.u, q.v)
        e += gk.length(p - x[i]) + 0.3 * gk.dot(p, p)     # (u, v themselves jump where two faces tie)
    r = gk.mesh_query_ray(mesh, s[i], d[i], 100.0)
    if r.result:
        e += r.t * r.t + 0.5 * r.u - 0.25 * r.v
    gk.atomic_add(loss, 0, e)


def test_gradients_match_central_differences(device, rng):
    """d loss / d (query points, ray starts and directions, mesh vertices), float64: reverse mode and
    forward mode against central differences of the forward values."""
    mesh, pts, tris = make_mesh(device, rng, dtype=gk.vec3d, n=4, jitter=0.15)
    n = 12
    x = rng.uniform(-1.4, 1.4, (n, 3))
    s = rng.uniform(-0.4, 0.4, (n, 3))
    d = rng.normal(size=(n, 3))
    arrays = {k: gk.array(v, dtype=gk.vec3d, device=device, requires_grad=True) for k, v in
              (("x", x), ("s", s), ("d", d))}
    arrays["points"] = mesh.points
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(surface_loss, n, inputs=[mesh, arrays["x"], arrays["s"], arrays["d"], loss])
    tape.backward(loss)
    grads = {k: a.grad.numpy().copy() for k, a in arrays.items()}
    assert np.abs(grads["points"]).max() > 1e-3 and np.abs(grads["x"]).max() > 1e-3

    host = {"x": x, "s": s, "d": d, "points": pts}

    def value(vals, seeds=None):
        gk.copy(mesh.points, gk.array(vals["points"], dtype=gk.vec3d, device=device))
        ins = [gk.array(vals[k], dtype=gk.vec3d, device=device) for k in ("x", "s", "d")]
        out = gk.zeros(1, dtype=gk.float64, device=device)
        if seeds is None:
            gk.launch(surface_loss, n, inputs=[mesh, *ins, out])
            return out.numpy()[0]
        named = dict(zip(("x", "s", "d"), ins), points=mesh.points)
        with gk.ForwardMode(seeds={named[k]: gk.array(v, dtype=gk.vec3d, device=device) for k, v in seeds.items()}):
            gk.launch(surface_loss, n, inputs=[mesh, *ins, out])
        return out.dual.numpy()[0]

    eps = 1e-6
    scale = max(np.abs(g).max() for g in grads.values())
    for k in ("x", "s", "d", "points"):
        for row in rng.choice(len(host[k]), 2, replace=False):
            for comp in range(3):
                hi = {kk: v.copy() for kk, v in host.items()}
                lo = {kk: v.copy() for kk, v in host.items()}
                hi[k][row, comp] += eps
                lo[k][row, comp] -= eps
                fd = (value(hi) - value(lo)) / (2 * eps)
                assert abs(grads[k][row, comp] - fd) <= 1e-6 * scale, (k, row, comp, grads[k][row, comp], fd)
    seeds = {k: rng.standard_normal(host[k].shape) for k in host}
    want = sum(np.sum(grads[k] * seeds[k]) for k in host)
    np.testing.assert_allclose(value(host, seeds), want, rtol=1e-9)


# --------------------------------------------------------------------------- the same kernels under Warp

def warp_queries(wp, pts, tris, x, s, d):
    @wp.kernel
    def run(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), s: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3),
            out: wp.array2d(dtype=float)):
        i = wp.tid()
        q = wp.mesh_query_point_no_sign(mesh, x[i], 0.9)
        if q.result:
            out[i, 0] = wp.length(wp.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])
        out[i, 1] = wp.mesh_query_point(mesh, x[i], 0.9).sign
        out[i, 2] = wp.mesh_query_point_sign_normal(mesh, x[i], 0.9).sign
        out[i, 3] = wp.mesh_query_point_sign_winding_number(mesh, x[i], 0.9).sign
        r = wp.mesh_query_ray(mesh, s[i], d[i], 1.0e6)
        if r.result:
            out[i, 4] = r.t
            out[i, 5] = wp.sign(r.sign)
            p = wp.mesh_eval_position(mesh, r.face, r.u, r.v)
            out[i, 6] = p[0] + p[1] + p[2]
            out[i, 7] = wp.dot(r.normal, d[i])

    a = dict(dtype=wp.vec3, device="cpu")
    mesh = wp.Mesh(points=wp.array(pts, **a), indices=wp.array(tris.reshape(-1), dtype=wp.int32, device="cpu"),
                   support_winding_number=True)
    out = wp.zeros((len(x), 8), dtype=float, device="cpu")
    wp.launch(run, len(x), inputs=[mesh.id, wp.array(x, **a), wp.array(s, **a), wp.array(d, **a), out],
              device="cpu")
    return out.numpy()


@needs_warp
def test_queries_match_warp(rng):
    pts, tris = sphere(8, 0.1, rng)
    pts = pts.astype(np.float32)
    n = 100
    x = rng.uniform(-1.6, 1.6, (n, 3)).astype(np.float32)
    s = rng.uniform(-0.5, 0.5, (n, 3)).astype(np.float32)
    d = rng.normal(size=(n, 3)).astype(np.float32)
    ours, ref = warp_queries(gwp, pts, tris, x, s, d), warp_queries(warp, pts, tris, x, s, d)
    np.testing.assert_allclose(ours[:, 0], ref[:, 0], rtol=1e-5, atol=1e-6)       # distances
    r = np.linalg.norm(x, axis=1)
    sure = (r < 0.8) | (r > 1.2)
    np.testing.assert_array_equal(ours[sure, 1:4], ref[sure, 1:4])               # signs off the surface
    np.testing.assert_allclose(ours[:, 4], ref[:, 4], rtol=1e-5, atol=1e-6)       # ray t
    np.testing.assert_array_equal(ours[:, 5], ref[:, 5])                          # which side it hit
    np.testing.assert_allclose(ours[:, 6:], ref[:, 6:], rtol=1e-4, atol=1e-5)     # hit point (u, v), normal


@needs_warp
def test_query_point_gradient_matches_warp(rng):
    """Warp's test_adj_mesh_query_point: d |p - closest(p)| / dp, here on a jittered sphere from points
    around it (Warp differentiates u, v with respect to the query point as gradkit does)."""
    pts, tris = sphere(8, 0.1, rng)
    pts = pts.astype(np.float32)
    x = rng.uniform(-2, 2, (50, 3)).astype(np.float32)
    grads = {}
    for wp in (warp, gwp):
        @wp.kernel
        def dist_loss(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
            i = wp.tid()
            q = wp.mesh_query_point(mesh, x[i], 100.0)
            p = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
            wp.atomic_add(loss, 0, wp.length(p - x[i]))

        mesh = wp.Mesh(points=wp.array(pts, dtype=wp.vec3, device="cpu"),
                       indices=wp.array(tris.reshape(-1), dtype=wp.int32, device="cpu"))
        xa = wp.array(x, dtype=wp.vec3, device="cpu", requires_grad=True)
        loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(dist_loss, len(x), inputs=[mesh.id, xa, loss], device="cpu")
        tape.backward(loss)
        grads[wp] = xa.grad.numpy()
    np.testing.assert_allclose(grads[gwp], grads[warp], rtol=1e-4, atol=1e-5)


def test_mesh_grad_via_mesh_get():
    """Warp's test_mesh_grad (tests/test_grad.py): triangle areas from wp.mesh_get(id).points, whose
    gradient lands in mesh.points.grad."""
    pos = gwp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=gwp.vec3,
                    requires_grad=True)
    indices = gwp.array([0, 1, 2, 0, 2, 3, 0, 3, 1, 1, 3, 2], dtype=gwp.int32)
    mesh = gwp.Mesh(points=pos, indices=indices)

    @gwp.func
    def area(mesh_id: gwp.uint64, tri: int) -> float:
        m = gwp.mesh_get(mesh_id)
        a = m.points[m.indices[tri * 3]]
        b = m.points[m.indices[tri * 3 + 1]]
        c = m.points[m.indices[tri * 3 + 2]]
        return gwp.length(gwp.cross(b - a, c - a)) * 0.5

    @gwp.kernel
    def total(mesh_id: gwp.uint64, out: gwp.array(dtype=float)):
        gwp.atomic_add(out, 0, area(mesh_id, gwp.tid()))

    out = gwp.zeros(1, dtype=float, requires_grad=True)
    tape = gwp.Tape()
    with tape:
        gwp.launch(total, 4, inputs=[mesh.id], outputs=[out])
    tape.backward(loss=out)
    g = mesh.points.grad.numpy()

    def area_sum(p):
        t = np.array([0, 1, 2, 0, 2, 3, 0, 3, 1, 1, 3, 2]).reshape(-1, 3)
        return 0.5 * np.linalg.norm(np.cross(p[t[:, 1]] - p[t[:, 0]], p[t[:, 2]] - p[t[:, 0]]), axis=1).sum()

    p0 = pos.numpy().astype(np.float64)
    fd = np.zeros_like(p0)
    for k in np.ndindex(p0.shape):
        hi, lo = p0.copy(), p0.copy()
        hi[k] += 1e-6
        lo[k] -= 1e-6
        fd[k] = (area_sum(hi) - area_sum(lo)) / 2e-6
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-5)


def test_compile_errors_name_the_mesh():
    @gk.kernel
    def wrong(x: gk.array(dtype=gk.vec3)):
        i = gk.tid()
        q = gk.mesh_query_point(x, x[i], 1.0)  # noqa: F841

    with pytest.raises(gk.CompileError, match="must be a mesh"):
        gk.launch(wrong, 1, inputs=[gk.zeros(1, dtype=gk.vec3)])
