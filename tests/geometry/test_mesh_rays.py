"""Ray queries walk the BVH nearest child first (geometry/bvh.py's Tree.ray_orders, one walk per octant of
ray directions): the walks against a recursive NumPy reference (every node once, depth first, each inner
node's child on the ray's near side of its split axis first), and first hits of rays in every octant, along
the axes and in the planes between them (zero direction components), from inside and outside, against
brute force over all triangles in float64, on every device."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.geometry.bvh import build_tree
from tests.geometry.test_mesh import make_mesh, ray_hits


def walk_ref(tree, octant: int) -> list:
    """Node ids in the order a depth-first walk of the octant's directions visits them (near child first)."""
    out = []

    def visit(node):
        out.append(node)
        left, right = tree.info[node, 0], tree.info[node, 1]
        if left < 0:
            return
        neg = (octant >> int(tree.axes[node])) & 1
        for child in ((right, left) if neg else (left, right)):
            visit(int(child))
    visit(0)
    return out


@pytest.mark.parametrize("n", [1, 4, 5, 37, 300])
def test_ray_orders_walk_every_node_near_child_first(rng, n):
    lo = rng.uniform(-1, 1, (n, 3))
    tree = build_tree(lo, lo + rng.uniform(0, 0.2, (n, 3)))
    orders = tree.ray_orders().reshape(8, -1, 2)
    nodes = tree.info.shape[0]
    assert ((tree.axes >= 0) == (tree.info[:, 0] >= 0)).all()        # a split axis exactly for inner nodes
    for octant in range(8):
        first, miss = orders[octant, :, 0], orders[octant, :, 1]
        seen, node = [], 0
        while node >= 0 and len(seen) <= nodes:
            seen.append(node)
            node = first[node] if first[node] >= 0 else miss[node]
        assert seen == walk_ref(tree, octant)
        np.testing.assert_array_equal(first >= 0, tree.info[:, 0] >= 0)


def test_rays_in_every_octant_and_along_axes_match_brute_force(device, rng):
    mesh, pts, tris = make_mesh(device, rng, n=9)
    dirs = np.array([[x, y, z] for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1) if x or y or z], float)
    dirs = np.concatenate([dirs, dirs + rng.uniform(-0.3, 0.3, dirs.shape)])     # exact zeros, and not
    starts = np.concatenate([rng.uniform(-0.5, 0.5, (4, 3)), rng.uniform(-2.0, 2.0, (8, 3))])
    s = np.repeat(starts, len(dirs), axis=0).astype(np.float32)
    d = np.tile(dirs, (len(starts), 1)).astype(np.float32)

    @gk.kernel
    def first_hits(mesh: gk.Mesh, s: gk.array(dtype=gk.vec3), d: gk.array(dtype=gk.vec3),
                   t: gk.array(dtype=float), pos: gk.array(dtype=gk.vec3)):
        i = gk.tid()
        q = gk.mesh_query_ray(mesh, s[i], d[i], 1.0e6)
        t[i] = -1.0
        if q.result:
            t[i] = q.t
            pos[i] = gk.mesh_eval_position(mesh, q.face, q.u, q.v)

    n = len(s)
    t = gk.zeros(n, dtype=float, device=device)
    pos = gk.zeros(n, dtype=gk.vec3, device=device)
    gk.launch(first_hits, n, inputs=[mesh, gk.array(s, dtype=gk.vec3, device=device),
                                     gk.array(d, dtype=gk.vec3, device=device), t, pos])
    p64 = pts.astype(np.float64)
    a, b, c = (p64[tris[:, k]] for k in range(3))
    ref = ray_hits(a, b, c, s.astype(np.float64), d.astype(np.float64)).min(1)
    hit = np.isfinite(ref)
    assert hit.sum() > n // 3 and (~hit).sum() > n // 10
    got = t.numpy()
    np.testing.assert_allclose(got[hit], ref[hit], rtol=1e-4, atol=1e-5)
    assert (got[~hit] == -1.0).all()
    np.testing.assert_allclose(pos.numpy()[hit], (s + got[:, None] * d)[hit], atol=1e-4)
