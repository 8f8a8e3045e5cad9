"""Warp 1.19's geometry queries beyond points, rays and boxes (#40), written through gradkit.warp so the same
kernels run in Warp: `bvh_query_sphere` / `bvh_query_capsule` (also chosen at run time), `mesh_query_sphere`,
`mesh_query_aabb` advanced by `mesh_query_next`, `mesh_get_bvh`, `mesh_query_furthest_point_no_sign` (struct and
out-argument forms) and `mesh_query_ray_anyhit`, on every device: each against a float64 NumPy brute force over
every item or face (items within 1e-4 of a test's boundary, where float32 and float64 may disagree, are left
out), against Warp 1.19 on the same inputs where it is installed, and the furthest point's squared distance
differentiated with respect to the query points and the mesh points against central differences; a loss summed
over the faces the sphere and AABB queries report differentiated with respect to the centers; and gradkit's
float64 meshes (which Warp does not have) against the same brute force."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np
import pytest

import gradkit.warp as gwp
from gradkit.warp.examples import uv_sphere

try:
    import warp
    warp.config.quiet = True
except ImportError:                 # the Warp comparisons are skipped; the NumPy references still run
    warp = None

EPS = 1e-4
_KERNELS: dict = {}


def _kernels(wp):
    """The kernels, defined once per module (Warp or gradkit.warp)."""
    if wp not in _KERNELS:
        _KERNELS[wp] = _define(wp)
    return _KERNELS[wp]


def _define(wp):
    @wp.kernel
    def bvh_hits(bvh: wp.uint64, kinds: wp.array(dtype=int), a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3),
                 radii: wp.array(dtype=float), n: int, flags: wp.array(dtype=int)):
        i = wp.tid()
        if kinds[i] == 0:
            q = wp.bvh_query_sphere(bvh, a[i], radii[i])
        else:
            q = wp.bvh_query_capsule(bvh, a[i], b[i] - a[i], radii[i])
        j = int(0)
        while wp.bvh_query_next(q, j, 1.0):
            wp.atomic_add(flags, i * n + j, 1)

    @wp.kernel
    def mesh_hits(m: wp.uint64, kinds: wp.array(dtype=int), c: wp.array(dtype=wp.vec3), radii: wp.array(dtype=float),
                  n: int, flags: wp.array(dtype=int), bvh_flags: wp.array(dtype=int)):
        i = wp.tid()
        r = radii[i]
        if kinds[i] == 0:
            q = wp.mesh_query_sphere(m, c[i], r)
        else:
            q = wp.mesh_query_aabb(m, c[i] - wp.vec3(r, r, r), c[i] + wp.vec3(r, r, r))
        f = int(0)
        while wp.mesh_query_next(q, f):
            wp.atomic_add(flags, i * n + f, 1)
        bq = wp.bvh_query_sphere(wp.mesh_get_bvh(m), c[i], r)
        g = int(0)
        while wp.bvh_query_next(bq, g):         # (Warp 1.19 has no `for` over a typed sphere query)
            wp.atomic_add(bvh_flags, i * n + g, 1)

    @wp.kernel
    def furthest(m: wp.uint64, p: wp.array(dtype=wp.vec3), min_dist: float, d: wp.array(dtype=float),
                 d_out: wp.array(dtype=float)):
        i = wp.tid()
        q = wp.mesh_query_furthest_point_no_sign(m, p[i], min_dist)
        if q.result:
            d[i] = wp.length_sq(wp.mesh_eval_position(m, q.face, q.u, q.v) - p[i])
        face = int(0)
        u = float(0.0)
        v = float(0.0)
        if wp.mesh_query_furthest_point_no_sign(m, p[i], min_dist, face, u, v):
            d_out[i] = wp.length_sq(wp.mesh_eval_position(m, face, u, v) - p[i])

    @wp.kernel
    def anyhit(m: wp.uint64, p: wp.array(dtype=wp.vec3), dirs: wp.array(dtype=wp.vec3), max_t: wp.array(dtype=float),
               hit: wp.array(dtype=int), first: wp.array(dtype=int)):
        i = wp.tid()
        hit[i] = wp.where(wp.mesh_query_ray_anyhit(m, p[i], dirs[i], max_t[i]), 1, 0)
        r = wp.mesh_query_ray(m, p[i], dirs[i], max_t[i])
        first[i] = wp.where(r.result, 1, 0)

    return {"bvh_hits": bvh_hits, "mesh_hits": mesh_hits, "furthest": furthest, "anyhit": anyhit}


def _peers(device):
    """(module, device) pairs to run: gradkit.warp on the device, and Warp on its cpu where installed."""
    return [(gwp, device)] + ([(warp, "cpu")] if warp is not None else [])


# --------------------------------------------------------------------------- float64 references

def _box_dist(c, lo, hi):
    """Distance from c to each box [lo, hi] (0 inside)."""
    d = np.maximum(np.maximum(lo - c, c - hi), 0.0)
    return np.sqrt((d * d).sum(-1))


def _segment_box_gap(p0, p1, lo, hi):
    """How far the segment p0 -> p1 stays from meeting each box: the slab test's (t_enter - t_exit) clipped to
    [0, 1] (<= 0 where they meet; a component of d that is 0 keeps the axis only if p0 lies in the slab)."""
    d = p1 - p0
    out = []
    for l, h in zip(lo, hi):
        t0, t1, gap = 0.0, 1.0, 0.0
        for k in range(3):
            if d[k] == 0.0:
                gap = max(gap, l[k] - p0[k], p0[k] - h[k])
            else:
                a, b = (l[k] - p0[k]) / d[k], (h[k] - p0[k]) / d[k]
                t0, t1 = max(t0, min(a, b)), min(t1, max(a, b))
        out.append(max(gap, (t0 - t1) * np.linalg.norm(d)))
    return np.array(out)


def _closest_on_triangle(p, a, b, c):
    """The point of triangle abc closest to p (Ericson's regions; a zero-area triangle by its longest edge)."""
    ab, ac = b - a, c - a
    if np.dot(np.cross(ab, ac), np.cross(ab, ac)) == 0.0:
        edges = [(a, b), (a, c), (b, c)]
        s, e = max(edges, key=lambda st: np.dot(st[1] - st[0], st[1] - st[0]))
        L = np.dot(e - s, e - s)
        t = 0.0 if L == 0 else np.clip(np.dot(p - s, e - s) / L, 0.0, 1.0)
        return s + t * (e - s)
    ap, bp, cp = p - a, p - b, p - c
    d1, d2, d3, d4, d5, d6 = ab @ ap, ac @ ap, ab @ bp, ac @ bp, ab @ cp, ac @ cp
    if d1 <= 0 and d2 <= 0:
        return a
    if d3 >= 0 and d4 <= d3:
        return b
    vc = d1 * d4 - d3 * d2
    if vc <= 0 and d1 >= 0 and d3 <= 0:
        return a + d1 / (d1 - d3) * ab
    if d6 >= 0 and d5 <= d6:
        return c
    vb = d5 * d2 - d1 * d6
    if vb <= 0 and d2 >= 0 and d6 <= 0:
        return a + d2 / (d2 - d6) * ac
    va = d3 * d6 - d5 * d4
    if va <= 0 and d4 - d3 >= 0 and d5 - d6 >= 0:
        return b + (d4 - d3) / ((d4 - d3) + (d5 - d6)) * (c - b)
    den = 1.0 / (va + vb + vc)
    return a + ab * vb * den + ac * vc * den


def _ray_hits(p, d, tris):
    """Every t >= 0 (in multiples of |d|) at which the ray meets a triangle, by Moller-Trumbore in float64."""
    ts = []
    for a, b, c in tris:
        e1, e2 = b - a, c - a
        pv = np.cross(d, e2)
        det = e1 @ pv
        if det == 0:
            continue
        tv = p - a
        u = tv @ pv / det
        qv = np.cross(tv, e1)
        v = d @ qv / det
        if u >= -1e-9 and v >= -1e-9 and u + v <= 1 + 1e-9:
            t = e2 @ qv / det
            if t >= 0:
                ts.append(t)
    return np.array(ts)


def _soup(rng, n=120, spread=3.0, size=0.5):
    """n small independent triangles, the last one zero-area (collinear corners, Warp's degenerate case)."""
    centers = rng.random((n, 3)) * spread
    verts = centers[:, None, :] + (rng.random((n, 3, 3)) - 0.5) * size
    verts[-1] = [centers[-1], centers[-1] + [0.2, 0.1, 0.0], centers[-1] + [0.4, 0.2, 0.0]]
    return verts.astype(np.float32)


# --------------------------------------------------------------------------- the tests

def test_bvh_sphere_and_capsule_queries(device, rng):
    """Sphere: the boxes within radius of the center; capsule: the boxes grown by radius that the segment
    p0 -> p1 (max_dist 1.0, closed) meets; the kind chosen per thread at run time; each item once."""
    n, nq = 150, 24
    lo = (rng.random((n, 3)) * 5.0).astype(np.float32)
    hi = (lo + rng.random((n, 3)) * 0.8).astype(np.float32)
    kinds = np.arange(nq) % 2
    a = (rng.random((nq, 3)) * 5.0).astype(np.float32)
    b = (a + rng.normal(size=(nq, 3)) * 1.5).astype(np.float32)
    b[1, 1:] = a[1, 1:]                       # a capsule along x only (zero direction components)
    radii = (rng.random(nq) * 1.2).astype(np.float32)
    radii[2] = radii[3] = -0.5                # negative: 0 (a point, a bare segment)
    want = np.zeros((nq, n), bool)
    margin = np.zeros((nq, n))
    r = np.maximum(radii.astype(np.float64), 0.0)
    for i in range(nq):
        if kinds[i] == 0:
            gap = _box_dist(a[i].astype(np.float64), lo, hi) - r[i]
        else:
            gap = _segment_box_gap(a[i].astype(np.float64), b[i].astype(np.float64), lo - r[i], hi + r[i])
        want[i], margin[i] = gap <= 0, np.abs(gap)
    sure = margin > EPS
    assert want.sum() > 20 and (~want).sum() > 20
    for wp, dev in _peers(device):
        bvh = wp.Bvh(wp.array(lo, dtype=wp.vec3, device=dev), wp.array(hi, dtype=wp.vec3, device=dev))
        flags = wp.zeros(nq * n, dtype=int, device=dev)
        wp.launch(_kernels(wp)["bvh_hits"], nq, inputs=[bvh.id, wp.array(kinds, dtype=int, device=dev),
                                                        wp.array(a, dtype=wp.vec3, device=dev),
                                                        wp.array(b, dtype=wp.vec3, device=dev),
                                                        wp.array(radii, dtype=float, device=dev), n, flags],
                  device=dev)
        got = flags.numpy().reshape(nq, n)
        assert got.max() <= 1, wp.__name__       # each item reported once
        np.testing.assert_array_equal(got.astype(bool)[sure], want[sure], err_msg=wp.__name__)


def test_mesh_sphere_aabb_and_get_bvh_queries(device, rng):
    """mesh_query_sphere: the faces whose closest point lies within radius (the zero-area face by its longest
    edge); mesh_query_aabb through mesh_query_next; mesh_get_bvh's sphere query: the faces' boxes within
    radius."""
    verts = _soup(rng)
    nt, nq = len(verts), 20
    tris = verts.astype(np.float64)
    lo, hi = tris.min(1), tris.max(1)
    kinds = np.arange(nq) % 2
    c = (rng.random((nq, 3)) * 3.0).astype(np.float32)
    c[0] = verts[-1].mean(0) + [0.0, 0.0, 0.05]        # just above the degenerate face
    radii = (rng.random(nq) * 0.6 + 0.1).astype(np.float32)
    radii[0] = 0.1
    gaps = {"faces": np.zeros((nq, nt)), "boxes": np.zeros((nq, nt))}
    for i in range(nq):
        p, r = c[i].astype(np.float64), float(radii[i])
        if kinds[i] == 0:
            gaps["faces"][i] = [np.linalg.norm(_closest_on_triangle(p, *t) - p) - r for t in tris]
        else:
            gaps["faces"][i] = np.max(np.maximum(lo - p - r, p - r - hi), axis=1)
        gaps["boxes"][i] = _box_dist(p, lo, hi) - r
    assert (gaps["faces"][0, -1] <= 0) and ((gaps["faces"] <= 0).sum() > 10)
    for wp, dev in _peers(device):
        mesh = wp.Mesh(points=wp.array(verts.reshape(-1, 3), dtype=wp.vec3, device=dev),
                       indices=wp.array(np.arange(3 * nt, dtype=np.int32), dtype=int, device=dev))
        flags, bvh_flags = (wp.zeros(nq * nt, dtype=int, device=dev) for _ in range(2))
        wp.launch(_kernels(wp)["mesh_hits"], nq, inputs=[mesh.id, wp.array(kinds, dtype=int, device=dev),
                                                         wp.array(c, dtype=wp.vec3, device=dev),
                                                         wp.array(radii, dtype=float, device=dev), nt, flags,
                                                         bvh_flags], device=dev)
        for name, arr in (("faces", flags), ("boxes", bvh_flags)):
            got = arr.numpy().reshape(nq, nt)
            assert got.max() <= 1, (wp.__name__, name)
            sure = np.abs(gaps[name]) > EPS
            np.testing.assert_array_equal(got.astype(bool)[sure], (gaps[name] <= 0)[sure], err_msg=(wp.__name__, name))


def _furthest(wp, dev, pts, tris, q, min_dist, grads=False):
    mesh_pts = wp.array(pts, dtype=wp.vec3, device=dev, requires_grad=grads)
    mesh = wp.Mesh(points=mesh_pts, indices=wp.array(tris.reshape(-1), dtype=int, device=dev))
    qa = wp.array(q, dtype=wp.vec3, device=dev, requires_grad=grads)
    d, d_out = (wp.zeros(len(q), dtype=float, device=dev, requires_grad=grads) for _ in range(2))
    if not grads:
        wp.launch(_kernels(wp)["furthest"], len(q), inputs=[mesh.id, qa, min_dist, d, d_out], device=dev)
        return d.numpy(), d_out.numpy()
    tape = wp.Tape()
    with tape:
        wp.launch(_kernels(wp)["furthest"], len(q), inputs=[mesh.id, qa, min_dist, d, d_out], device=dev)
    tape.backward(grads={d: wp.array(np.ones(len(q), np.float32), dtype=float, device=dev)})
    return d.numpy(), d_out.numpy(), qa.grad.numpy(), mesh_pts.grad.numpy()


def test_furthest_point(device, rng):
    """The furthest point is the farthest vertex (squared distance against float64 brute force, both forms);
    none past min_dist; its squared distance's gradient with respect to the query points and the mesh points
    against central differences (u, v are a corner's constant weights; the squared distance is quadratic in both,
    so a central difference is exact up to float32 rounding)."""
    pts, tris = uv_sphere(6, jitter=0.1, rng=rng)
    pts = pts.astype(np.float32)
    q = rng.uniform(-2.0, 2.0, (60, 3)).astype(np.float32)
    d2 = np.sort(((q[:, None, :].astype(np.float64) - pts[None].astype(np.float64)) ** 2).sum(-1), axis=1)
    q = q[d2[:, -1] - d2[:, -2] > 0.2][:32]        # no near tie: a step of h below keeps the furthest vertex
    assert len(q) >= 16
    want = ((q[:, None, :].astype(np.float64) - pts[None].astype(np.float64)) ** 2).sum(-1).max(1)
    for wp, dev in _peers(device):
        d, d_out = _furthest(wp, dev, pts, tris, q, 0.0)
        np.testing.assert_allclose(d, want, rtol=1e-5, err_msg=wp.__name__)
        np.testing.assert_array_equal(d, d_out)
        d, d_out = _furthest(wp, dev, pts, tris, q, float(np.sqrt(want.max())) + 0.01)
        assert not d.any() and not d_out.any(), wp.__name__            # nothing farther than min_dist
    _, _, gq, gp = _furthest(gwp, device, pts, tris, q, 0.0, grads=True)
    h = 1e-2

    def total(p, qq):
        return _furthest(gwp, device, p, tris, qq, 0.0)[0].astype(np.float64).sum()
    for k in range(0, len(q), 8):
        for comp in range(3):
            e = np.zeros_like(q)
            e[k, comp] = h
            assert abs((total(pts, q + e) - total(pts, q - e)) / (2 * h) - gq[k, comp]) < 2e-3 * max(1.0, abs(gq[k, comp]))
    assert np.abs(gp).max() > 1.0
    for row in np.argsort(-np.abs(gp).sum(1))[:3]:                     # the vertices that are furthest points
        for comp in range(3):
            e = np.zeros_like(pts)
            e[row, comp] = h
            fd = (total(pts + e, q) - total(pts - e, q)) / (2 * h)
            assert abs(fd - gp[row, comp]) < 2e-3 * max(1.0, abs(fd)), (row, comp, fd, gp[row, comp])


def test_ray_anyhit(device, rng):
    """mesh_query_ray_anyhit: whether a face is hit at 0 <= t < max_t (float64 brute force over every face;
    rays within 1e-4 of max_t or grazing left out), the same answer as mesh_query_ray's result."""
    pts, tris = uv_sphere(6, jitter=0.1, rng=rng)
    pts = pts.astype(np.float32)
    n = 64
    p = rng.uniform(-2.0, 2.0, (n, 3)).astype(np.float32)
    p[:8] *= 0.3                                                       # some from inside
    dirs = rng.normal(size=(n, 3)).astype(np.float32)
    max_t = rng.uniform(0.1, 3.0, n).astype(np.float32)
    corners = pts[tris].astype(np.float64)
    for i in range(0, n, 2):            # half the rays stop just short of their first hit or just past it
        ts = _ray_hits(p[i].astype(np.float64), dirs[i].astype(np.float64), corners)
        if len(ts):
            max_t[i] = ts.min() + (0.03 if i % 4 else -0.03)
    want = np.zeros(n, bool)
    sure = np.ones(n, bool)
    for i in range(n):
        ts = _ray_hits(p[i].astype(np.float64), dirs[i].astype(np.float64), corners)
        want[i] = (ts < max_t[i]).any()
        sure[i] = not (np.abs(ts - max_t[i]) < EPS * 10).any()
    assert want.sum() > 4 and (~want).sum() > 4
    for wp, dev in _peers(device):
        mesh = wp.Mesh(points=wp.array(pts, dtype=wp.vec3, device=dev),
                       indices=wp.array(tris.reshape(-1), dtype=int, device=dev))
        hit, first = (wp.zeros(n, dtype=int, device=dev) for _ in range(2))
        wp.launch(_kernels(wp)["anyhit"], n, inputs=[mesh.id, wp.array(p, dtype=wp.vec3, device=dev),
                                                     wp.array(dirs, dtype=wp.vec3, device=dev),
                                                     wp.array(max_t, dtype=float, device=dev), hit, first], device=dev)
        np.testing.assert_array_equal(hit.numpy().astype(bool)[sure], want[sure], err_msg=wp.__name__)
        np.testing.assert_array_equal(hit.numpy(), first.numpy(), err_msg=wp.__name__)


def test_root_argument_is_refused():
    """Warp's `root=` (a group's subtree) has no meaning for gradkit's ungrouped BVHs: a named error."""
    @gwp.kernel
    def k(bvh: gwp.uint64, out: gwp.array(dtype=int)):
        for j in gwp.bvh_query_sphere(bvh, gwp.vec3(0.0, 0.0, 0.0), 1.0, 3):
            out[0] = j

    pts = gwp.array(np.eye(3, dtype=np.float32), dtype=gwp.vec3)
    with pytest.raises(Exception, match="not grouped"):
        gwp.launch(k, 1, inputs=[gwp.Bvh(pts, pts).id, gwp.zeros(1, dtype=int)])


@gwp.kernel
def _sphere_sum(m: gwp.uint64, c: gwp.array(dtype=gwp.vec3), loss: gwp.array(dtype=float)):
    i = gwp.tid()
    x = c[i]
    s = float(0.0)
    for f in gwp.mesh_query_sphere(m, x, 0.6):
        s += gwp.length_sq(gwp.mesh_eval_position(m, f, 0.3, 0.3) - x)
    q = gwp.mesh_query_aabb(m, x - gwp.vec3(0.5, 0.5, 0.5), x + gwp.vec3(0.5, 0.5, 0.5))
    f = int(0)
    while gwp.mesh_query_next(q, f):
        s += 0.5 * gwp.length(gwp.mesh_eval_position(m, f, 0.2, 0.5) - x)
    gwp.atomic_add(loss, 0, s)


def test_gradients_through_query_loops(device, rng):
    """A loss summed over the faces a sphere query and an AABB query report: its gradient with respect to the
    query centers (the queries only select: the faces' terms carry it) against the float64 derivative over
    the brute-force face sets (a central difference would step across the sets' edges)."""
    verts = _soup(rng, n=80, spread=2.0)
    tris = verts.astype(np.float64)
    nq = 16
    c = (rng.random((nq, 3)) * 2.0).astype(np.float32)
    want = np.zeros((nq, 3))
    for i in range(nq):
        x = c[i].astype(np.float64)
        for a, b, cc in tris:
            if np.linalg.norm(_closest_on_triangle(x, a, b, cc) - x) <= 0.6:
                want[i] += -2.0 * (0.3 * a + 0.3 * b + 0.4 * cc - x)
            if (np.minimum(np.minimum(a, b), cc) <= x + 0.5).all() and (np.maximum(np.maximum(a, b), cc) >= x - 0.5).all():
                e = 0.2 * a + 0.5 * b + 0.3 * cc - x
                want[i] += -0.5 * e / np.linalg.norm(e)
    assert np.abs(want).max() > 1.0
    mesh = gwp.Mesh(points=gwp.array(verts.reshape(-1, 3), dtype=gwp.vec3, device=device),
                    indices=gwp.array(np.arange(3 * len(verts), dtype=np.int32), dtype=int, device=device))
    ca = gwp.array(c, dtype=gwp.vec3, device=device, requires_grad=True)
    loss = gwp.zeros(1, dtype=float, device=device, requires_grad=True)
    tape = gwp.Tape()
    with tape:
        gwp.launch(_sphere_sum, nq, inputs=[mesh.id, ca, loss], device=device)
    tape.backward(loss)
    np.testing.assert_allclose(ca.grad.numpy(), want, rtol=1e-4, atol=1e-4)


def test_float64_meshes(device, rng):
    """gradkit's float64 meshes (Warp's are float32 only): the sphere query's narrow phase at float64 (faces
    within the radius by the float64 brute force), the furthest point's squared distance (the farthest corner
    of a face that is not a sliver), any hit."""
    import gradkit as gk

    @gk.kernel
    def k(m: gk.Mesh[gk.float64], c: gk.array(dtype=gk.vec3d), r: float, n: int, flags: gk.array(dtype=int),
          far: gk.array(dtype=gk.float64), hit: gk.array(dtype=int)):
        i = gk.tid()
        for f in gk.mesh_query_sphere(m, c[i], r):
            flags[i * n + f] = flags[i * n + f] + 1
        q = gk.mesh_query_furthest_point_no_sign(m, c[i], 0.0)
        far[i] = gk.length_sq(gk.mesh_eval_position(m, q.face, q.u, q.v) - c[i])
        hit[i] = gk.where(gk.mesh_query_ray_anyhit(m, c[i], gk.vec3d(0.0, 0.0, 1.0), 0.5), 1, 0)

    verts = _soup(rng, n=60, spread=2.0).astype(np.float64)
    nt, nq = len(verts), 12
    c = rng.random((nq, 3)) * 2.0
    mesh = gk.Mesh(gk.array(verts.reshape(-1, 3), dtype=gk.vec3d, device=device),
                   gk.array(np.arange(3 * nt, dtype=np.int32), dtype=gk.int32, device=device))
    flags, hit = gk.zeros(nq * nt, dtype=int, device=device), gk.zeros(nq, dtype=int, device=device)
    far = gk.zeros(nq, dtype=gk.float64, device=device)
    gk.launch(k, nq, [mesh, gk.array(c, dtype=gk.vec3d, device=device), 0.5, nt, flags, far, hit], device=device)
    gaps = np.array([[np.linalg.norm(_closest_on_triangle(x, *t) - x) - 0.5 for t in verts] for x in c])
    sure = np.abs(gaps) > 1e-9
    np.testing.assert_array_equal(flags.numpy().reshape(nq, nt)[sure], (gaps <= 0)[sure].astype(int))
    corners = verts[:-1].reshape(1, -1, 3)          # the zero-area last face is skipped, as Warp skips slivers
    np.testing.assert_allclose(far.numpy(), ((c[:, None, :] - corners) ** 2).sum(-1).max(1), rtol=1e-12)
    want = [(_ray_hits(x, np.array([0.0, 0.0, 1.0]), verts) < 0.5).any() for x in c]
    np.testing.assert_array_equal(hit.numpy(), np.array(want, int))
