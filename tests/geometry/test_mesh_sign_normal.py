"""`mesh_query_point_sign_normal` near the surface, where the angle weights of the faces about the closest
feature decide the side: points just off a closed, jittered sphere's vertices, edges and faces (concave and
convex spots) against the side float64 NumPy gives by the mesh's winding number, with the closest
distance against brute force, on every device; and the same points through Warp 1.19."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np

import gradkit as gk
from tests.geometry.test_mesh import closest_on_triangles, needs_warp, sphere, warp


@gk.kernel
def sides(mesh: gk.Mesh, x: gk.array(dtype=gk.vec3), sign: gk.array(dtype=float), dist: gk.array(dtype=float)):
    i = gk.tid()
    q = gk.mesh_query_point_sign_normal(mesh, x[i], 2.0)
    sign[i] = 0.0
    dist[i] = -1.0
    if q.result:
        sign[i] = q.sign
        dist[i] = gk.length(gk.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])


def winding_sides(pts, tris, x):
    """-1 inside, +1 outside the closed mesh, by its winding number about each point (solid angles, float64)."""
    a, b, c = (pts[tris[:, k]][None] - x[:, None] for k in range(3))
    la, lb, lc = (np.linalg.norm(v, axis=-1) for v in (a, b, c))
    num = (a * np.cross(b, c)).sum(-1)
    den = la * lb * lc + (a * b).sum(-1) * lc + (a * c).sum(-1) * lb + (b * c).sum(-1) * la
    w = 2.0 * np.arctan2(num, den).sum(1) / (4.0 * np.pi)
    return np.where(w > 0.5, -1.0, 1.0)


def near_surface(rng, n_offsets=3):
    """A jittered sphere (float32 points, int triangles) and points 0.01-0.05 off its vertices, edge middles
    and face centres in random directions, with their distance to the mesh (float64 brute force), only
    those at least 5e-3 from it (far beyond the query's eps and float32 rounding)."""
    pts, tris = sphere(8, 0.15, rng)
    pts = pts.astype(np.float32)
    p64 = pts.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    features = np.concatenate([p64[np.unique(tris)], 0.5 * (a + b), 0.5 * (b + c), (a + b + c) / 3.0])
    d = rng.normal(size=(n_offsets, *features.shape))
    d *= rng.uniform(0.01, 0.05, (n_offsets, len(features), 1)) / np.linalg.norm(d, axis=-1, keepdims=True)
    x = (features[None] + d).reshape(-1, 3).astype(np.float32)
    ref = np.linalg.norm(closest_on_triangles(a, b, c, x.astype(np.float64)) - x[:, None], axis=-1).min(1)
    keep = ref > 5e-3
    return pts, tris, x[keep], ref[keep]


def test_sign_normal_near_vertices_edges_and_faces(device, rng):
    pts, tris, x, ref = near_surface(rng)
    mesh = gk.Mesh(gk.array(pts, dtype=gk.vec3, device=device), gk.array(tris.reshape(-1), dtype=gk.int32,
                                                                            device=device))
    sign = gk.zeros(len(x), dtype=float, device=device)
    dist = gk.zeros(len(x), dtype=float, device=device)
    gk.launch(sides, len(x), inputs=[mesh, gk.array(x, dtype=gk.vec3, device=device), sign, dist])
    want = winding_sides(pts.astype(np.float64), tris, x.astype(np.float64))
    assert (want < 0).sum() > len(x) // 4 and (want > 0).sum() > len(x) // 4
    np.testing.assert_allclose(dist.numpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(sign.numpy(), want)


@needs_warp
def test_sign_normal_near_the_surface_matches_warp(rng):
    import gradkit.warp as gwp
    pts, tris, x, _ = near_surface(rng)
    got = {}
    for wp in (warp, gwp):
        @wp.kernel
        def run(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
            i = wp.tid()
            out[i] = wp.mesh_query_point_sign_normal(mesh, x[i], 2.0).sign

        mesh = wp.Mesh(points=wp.array(pts, dtype=wp.vec3, device="cpu"),
                       indices=wp.array(tris.reshape(-1), dtype=wp.int32, device="cpu"))
        out = wp.zeros(len(x), dtype=float, device="cpu")
        wp.launch(run, len(x), inputs=[mesh.id, wp.array(x, dtype=wp.vec3, device="cpu"), out], device="cpu")
        got[wp] = out.numpy()
    np.testing.assert_array_equal(got[gwp], got[warp])
    np.testing.assert_array_equal(got[warp], winding_sides(pts.astype(np.float64), tris, x.astype(np.float64)))
