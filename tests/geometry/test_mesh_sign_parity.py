"""`mesh_query_point_sign_parity` (Warp 1.19's sampled ray-parity sign): the side of points about a jittered
sphere with holes (so the sign depends on the exact ray directions) against float64 NumPy brute force that
casts the same rays (Warp's seeded directions, regenerated here from the PCG hash) and counts every triangle
crossed, the closest distance against brute force and its gradient against the analytic one, in the struct
and out-argument forms, float32 and float64 meshes, on every device; and the same queries through Warp 1.19
(the sign and the closest point, both forms)."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np
import pytest

import gradkit as gk
from tests.geometry.test_mesh import closest_on_triangles, needs_warp, sphere, warp

MAX_DIST = 3.0


@gk.kernel
def parity_struct(mesh: gk.Mesh, x: gk.array(dtype=gk.vec3), n_sample: int, scale: float,
                  sign: gk.array(dtype=float), dist: gk.array(dtype=float)):
    i = gk.tid()
    q = gk.mesh_query_point_sign_parity(mesh, x[i], MAX_DIST, n_sample, scale)
    sign[i] = 0.0
    dist[i] = -1.0
    if q.result:
        sign[i] = q.sign
        dist[i] = gk.length(gk.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])


@gk.kernel
def parity_outs(mesh: gk.Mesh, x: gk.array(dtype=gk.vec3), n_sample: int, scale: float,
                sign: gk.array(dtype=float), dist: gk.array(dtype=float)):
    i = gk.tid()
    inside = float(0.0)
    face = int(0)
    u = float(0.0)
    v = float(0.0)
    sign[i] = 0.0
    dist[i] = -1.0
    if gk.mesh_query_point_sign_parity(mesh, x[i], MAX_DIST, inside, face, u, v, n_sample, scale):
        sign[i] = inside
        dist[i] = gk.length(gk.mesh_eval_position(mesh, face, u, v) - x[i])


def _pcg(s):
    """Warp's (and gradkit's) random-state hash on uint32."""
    b = (s * np.uint64(747796405) + np.uint64(2891336453)) & np.uint64(0xFFFFFFFF)
    c = (((b >> ((b >> np.uint64(28)) + np.uint64(4))) ^ b) * np.uint64(277803737)) & np.uint64(0xFFFFFFFF)
    return (c >> np.uint64(22)) ^ c


def warp_directions(n_sample, scale):
    """The ray directions Warp's parity sign casts: (1, 1, 1) + per-axis draws in [-scale, scale) from
    rand_init(42), drawn x, y, z in float32 (a direction shorter than 1e-4 drawn again)."""
    state = _pcg(np.uint64(42))
    scale = np.float32(scale)
    out = []
    while len(out) < n_sample:
        d = []
        for _ in range(3):
            state = _pcg(state)
            f = np.float32(state >> np.uint64(8)) * np.float32(1.0 / 16777216.0)
            d.append(np.float32(1.0) + ((scale - -scale) * f + -scale))
        d = np.array(d, np.float32)
        if float(np.dot(d, d)) >= 1e-8:
            out.append(d)
    return np.array(out, np.float64).reshape(-1, 3)


def parity_sides(pts, tris, x, n_sample, scale):
    """-1 where at least half of the rays from each point cross an odd number of triangles (float64
    Moller-Trumbore over every triangle, hits at t >= 0), else +1."""
    a, b, c = (pts[tris[:, k]] for k in range(3))
    e1, e2 = b - a, c - a
    votes = np.zeros(len(x), int)
    for d in warp_directions(n_sample, scale):
        pv = np.cross(d, e2)
        det = (e1 * pv).sum(-1)
        inv = 1.0 / det
        tv = x[:, None] - a[None]
        bu = (tv * pv).sum(-1) * inv
        qv = np.cross(tv, e1[None])
        bv = (qv * d).sum(-1) * inv
        t = (qv * e2[None]).sum(-1) * inv
        hit = (bu >= 0) & (bv >= 0) & (bu + bv <= 1) & (t >= 0)
        votes += hit.sum(1) % 2
    return np.where(2 * votes >= n_sample, -1.0, 1.0)


def scene(rng, n=400, holes=0.0):
    """A jittered sphere (float32 points) with a fraction `holes` of its triangles removed, and points inside
    and outside it, with their distance to the mesh by float64 brute force. Through the holes, rays in
    different directions cross different counts: the sign then depends on Warp's exact directions."""
    pts, tris = sphere(8, 0.1, rng)
    tris = tris[rng.uniform(size=len(tris)) >= holes]
    pts = pts.astype(np.float32)
    r = rng.uniform(0.2, 1.8, n)
    d = rng.normal(size=(n, 3))
    x = (d / np.linalg.norm(d, axis=1, keepdims=True) * r[:, None]).astype(np.float32)
    p64 = pts.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = np.linalg.norm(closest_on_triangles(a, b, c, x.astype(np.float64)) - x[:, None], axis=-1).min(1)
    return pts, tris, x, ref


@pytest.mark.parametrize("kernel", [parity_struct, parity_outs], ids=["struct", "outs"])
@pytest.mark.parametrize("n_sample, scale", [(1, 0.1), (3, 0.1), (4, 0.3), (0, 0.1)])
def test_sign_parity_matches_brute_force(device, rng, kernel, n_sample, scale):
    pts, tris, x, ref = scene(rng, holes=0.15)
    mesh = gk.Mesh(gk.array(pts, dtype=gk.vec3, device=device),
                   gk.array(tris.reshape(-1), dtype=gk.int32, device=device))
    sign = gk.zeros(len(x), dtype=float, device=device)
    dist = gk.zeros(len(x), dtype=float, device=device)
    gk.launch(kernel, len(x), inputs=[mesh, gk.array(x, dtype=gk.vec3, device=device), n_sample, scale, sign, dist])
    want = parity_sides(pts.astype(np.float64), tris, x.astype(np.float64), n_sample, scale)
    if n_sample > 0:
        assert (want < 0).sum() > len(x) // 5 and (want > 0).sum() > len(x) // 5
        # the directions matter here: unperturbed (1, 1, 1) rays classify some points otherwise
        assert (want != parity_sides(pts.astype(np.float64), tris, x.astype(np.float64), 1, 0.0)).any()
    np.testing.assert_array_equal(sign.numpy(), want)
    np.testing.assert_allclose(dist.numpy(), ref, rtol=1e-5, atol=1e-6)


@gk.kernel
def parity_distance(mesh: gk.Mesh, x: gk.array(dtype=gk.vec3), out: gk.array(dtype=float)):
    i = gk.tid()
    q = gk.mesh_query_point_sign_parity(mesh, x[i], MAX_DIST)
    if q.result:
        out[i] = q.sign * gk.length(gk.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])


def test_signed_distance_gradient_is_the_analytic_one(device, rng):
    """d(sign * |x - closest|)/dx = sign * (x - closest) / |x - closest| (the sign is piecewise constant)."""
    pts, tris, x, _ = scene(rng, 64)
    mesh = gk.Mesh(gk.array(pts, dtype=gk.vec3, device=device),
                   gk.array(tris.reshape(-1), dtype=gk.int32, device=device))
    xs = gk.array(x, dtype=gk.vec3, device=device, requires_grad=True)
    out = gk.zeros(len(x), dtype=float, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(parity_distance, len(x), inputs=[mesh, xs], outputs=[out])
    tape.backward(grads={out: gk.array(np.ones(len(x), np.float32), device=device)})
    p64, x64 = pts.astype(np.float64), x.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    cands = closest_on_triangles(a, b, c, x64)
    near = cands[np.arange(len(x)), np.linalg.norm(cands - x64[:, None], axis=-1).argmin(1)]
    side = parity_sides(p64, tris, x64, 1, 0.1)
    want = side[:, None] * (x64 - near) / np.linalg.norm(x64 - near, axis=1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), side * np.linalg.norm(x64 - near, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), want, rtol=1e-3, atol=1e-4)


@needs_warp
@pytest.mark.parametrize("n_sample", [1, 3, 5])
def test_sign_parity_matches_warp(rng, n_sample):
    import gradkit.warp as gwp
    pts, tris, x, _ = scene(rng, 200, holes=0.15)
    got = {}
    for wp in (warp, gwp):
        @wp.kernel
        def run(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), n: int, out: wp.array(dtype=wp.vec4)):
            i = wp.tid()
            q = wp.mesh_query_point_sign_parity(mesh, x[i], 3.0, n, 0.2)
            inside = float(0.0)
            face = int(0)
            u = float(0.0)
            v = float(0.0)
            ok = wp.mesh_query_point_sign_parity(mesh, x[i], 3.0, inside, face, u, v, n, 0.2)
            if q.result and ok and inside == q.sign and face == q.face:
                c = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
                out[i] = wp.vec4(q.sign, c[0], c[1], c[2])

        mesh = wp.Mesh(points=wp.array(pts, dtype=wp.vec3, device="cpu"),
                       indices=wp.array(tris.reshape(-1), dtype=wp.int32, device="cpu"))
        out = wp.zeros(len(x), dtype=wp.vec4, device="cpu")
        wp.launch(run, len(x), inputs=[mesh.id, wp.array(x, dtype=wp.vec3, device="cpu"), n_sample, out],
                  device="cpu")
        got[wp] = out.numpy()
    # the sign exactly; the closest point (not the face: points nearest a shared edge or vertex tie)
    np.testing.assert_array_equal(got[gwp][:, 0], got[warp][:, 0])
    np.testing.assert_allclose(got[gwp][:, 1:], got[warp][:, 1:], atol=1e-5)
    np.testing.assert_array_equal(got[warp][:, 0], parity_sides(pts.astype(np.float64), tris,
                                                               x.astype(np.float64), n_sample, 0.2))


@gk.kernel
def parity_keywords64(mesh: gk.Mesh[gk.float64], x: gk.array(dtype=gk.vec3d), sign: gk.array(dtype=gk.float64),
                      dist: gk.array(dtype=gk.float64)):
    i = gk.tid()
    q = gk.mesh_query_point_sign_parity(mesh, x[i], MAX_DIST, n_sample=5, perturbation_scale=0.25)
    if q.result:
        sign[i] = q.sign
        dist[i] = gk.length(gk.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])


def test_sign_parity_on_a_float64_mesh_by_keyword(device, rng):
    """A float64 mesh, n_sample and perturbation_scale given by keyword: the same float32 directions, the
    distance to float64 precision."""
    pts, tris, x, _ = scene(rng, 200, holes=0.15)
    p64, x64 = pts.astype(np.float64), x.astype(np.float64)
    mesh = gk.Mesh(gk.array(p64, dtype=gk.vec3d, device=device),
                   gk.array(tris.reshape(-1), dtype=gk.int32, device=device))
    sign = gk.zeros(len(x), dtype=gk.float64, device=device)
    dist = gk.zeros(len(x), dtype=gk.float64, device=device)
    gk.launch(parity_keywords64, len(x), inputs=[mesh, gk.array(x64, dtype=gk.vec3d, device=device), sign, dist])
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = np.linalg.norm(closest_on_triangles(a, b, c, x64) - x64[:, None], axis=-1).min(1)
    np.testing.assert_array_equal(sign.numpy(), parity_sides(p64, tris, x64, 5, 0.25))
    np.testing.assert_allclose(dist.numpy(), ref, rtol=1e-10, atol=1e-12)
