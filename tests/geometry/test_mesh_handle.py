"""A geometry id (Warp's wp.uint64) of one kind given to another kind's query finds nothing: each kind has
its own part in the handle (core/library/handle.py), the others empty. (A BVH carried in the mesh part's
`bvh` would let a mesh query walk the BVH's items as triangles of an empty mesh, reading past its arrays.)"""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np

import gradkit.warp as wp
from tests.geometry.test_mesh import sphere


@wp.kernel
def mesh_queries(g: wp.uint64, x: wp.array(dtype=wp.vec3), found: wp.array(dtype=int)):
    i = wp.tid()
    n = int(0)
    if wp.mesh_query_point_no_sign(g, x[i], 100.0).result:
        n += 1
    if wp.mesh_query_point_sign_normal(g, x[i], 100.0).result:
        n += 10
    if wp.mesh_query_ray(g, x[i], wp.vec3(0.0, 0.0, 1.0), 100.0).result:
        n += 100
    found[i] = n


@wp.kernel
def bvh_queries(g: wp.uint64, x: wp.array(dtype=wp.vec3), found: wp.array(dtype=int)):
    i = wp.tid()
    n = int(0)
    q = wp.bvh_query_aabb(g, x[i] - wp.vec3(10.0), x[i] + wp.vec3(10.0))
    j = int(0)
    while wp.bvh_query_next(q, j):
        n += 1
    found[i] = n


def test_a_bvh_id_in_mesh_queries_and_a_mesh_id_in_bvh_queries_find_nothing(device, rng):
    pts, tris = sphere(6, 0.1, rng)
    pts = pts.astype(np.float32)
    corners = pts[tris]
    bvh = wp.Bvh(wp.array(corners.min(1), dtype=wp.vec3, device=device),
                 wp.array(corners.max(1), dtype=wp.vec3, device=device))
    mesh = wp.Mesh(points=wp.array(pts, dtype=wp.vec3, device=device),
                   indices=wp.array(tris.reshape(-1), dtype=wp.int32, device=device))
    x = wp.array(rng.uniform(-0.5, 0.5, (16, 3)).astype(np.float32), dtype=wp.vec3, device=device)
    found = wp.zeros(16, dtype=int, device=device)
    wp.launch(mesh_queries, 16, inputs=[mesh.id, x, found], device=device)
    assert (found.numpy() == 111).all()                     # (the queries themselves work)
    wp.launch(mesh_queries, 16, inputs=[bvh.id, x, found], device=device)
    assert (found.numpy() == 0).all()
    wp.launch(bvh_queries, 16, inputs=[bvh.id, x, found], device=device)
    assert (found.numpy() == len(tris)).all()
    wp.launch(bvh_queries, 16, inputs=[mesh.id, x, found], device=device)
    assert (found.numpy() == 0).all()
