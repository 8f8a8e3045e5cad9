"""Warp 1.19's `mesh_query_point_sign_parity` as library `@gk.func` code (the language side is
core/library/mesh.py): the closest point as `mesh_query_point_no_sign` finds it, and the inside / outside
sign by sampled ray parity.

The sign casts `n_sample` rays from the point along (1, 1, 1) plus a per-axis offset drawn uniformly from
[-perturbation_scale, perturbation_scale) by the random state rand_init(42) (x, then y, then z; a direction
shorter than 1e-4 is drawn again), counts the faces each ray meets at t >= 0, and calls the point inside
(-1) when at least half of the rays cross an odd number of faces, else outside (+1): Warp's rule, so a
non-positive n_sample says inside. The draws are float32 as Warp's are, whatever the mesh's precision,
so the same seed gives the same directions. The sign selects only: no derivative (Warp's has none); u, v
of the closest point are differentiated as mesh_query_point's are."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from types import SimpleNamespace

from .. import types as T
from ..lang import NAMES
from .bvh import BIG
from .lib_registry import install, per_precision
from .mesh_device import MeshData, MeshData64, MeshQueryPoint, MeshQueryPoint64, lib_for

I32 = T.int32
F32 = T.float32
V32 = T.vector(3, F32)
gk = SimpleNamespace(**NAMES)


def _precision(s: T.ScalarType) -> SimpleNamespace:
    """The parity functions over meshes with points of scalar type `s`."""
    V = T.vector(3, s)
    M = MeshData if s is T.float32 else MeshData64
    QP = MeshQueryPoint if s is T.float32 else MeshQueryPoint64
    base = lib_for(s)
    big = s(BIG)
    lib = SimpleNamespace()

    def _count(mesh: M, start: V, dir: V) -> I32:
        """The faces the ray start + t dir meets at t >= 0 (every hit, both sides): a walk of the whole
        BVH by mesh_device's ray_enters and ray_tri."""
        bvh = mesh.bvh
        hits = 0
        node = -1
        if bvh.num_items > 0:
            node = 0
        while node >= 0:
            info = bvh.node_info[node]
            nxt = info[1]
            if base.ray_enters(start, dir, V(bvh.node_lowers[node]), V(bvh.node_uppers[node]), big):
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        h = base.ray_tri(start, dir, base.vertex(mesh, f, 0), base.vertex(mesh, f, 1),
                                         base.vertex(mesh, f, 2))
                        if h[0] >= s(0.0):
                            hits += 1
                else:
                    nxt = info[0]
            node = nxt
        return hits

    def _sign(mesh: M, p: V, n_sample: I32, scale: F32) -> s:
        """-1 (inside) when at least half of the n_sample perturbed rays cross an odd number of faces."""
        state = gk.rand_init(42)
        span = scale + scale
        votes = 0
        for i in range(n_sample):
            d = V32(F32(0.0), F32(0.0), F32(0.0))
            again = True
            while again:
                # Warp's randf(state, lo, hi) = (hi - lo) * randf(state) + lo
                dx = span * gk.randf(state) - scale
                dy = span * gk.randf(state) - scale
                dz = span * gk.randf(state) - scale
                d = V32(F32(1.0) + dx, F32(1.0) + dy, F32(1.0) + dz)
                again = gk.dot(d, d) < F32(1.0e-8)
            if lib.count(mesh, p, V(d)) % 2 == 1:
                votes += 1
        return gk.where(votes * 2 >= n_sample, s(-1.0), s(1.0))

    def _point(mesh: M, p: V, max_dist: s, n_sample: I32, scale: F32) -> QP:
        """mesh_query_point_no_sign's result with the parity sign where a face was found."""
        r = base.point(mesh, p, max_dist, 0, s(0.5))
        if r.result:
            r.sign = lib.sign(mesh, p, n_sample, scale)
        return r

    def _count_adj(mesh: M, start: V, dir: V, adj_ret: I32):
        pass

    def _sign_adj(mesh: M, p: V, n_sample: I32, scale: F32, adj_ret: s):
        pass

    # counting and voting only select: AD does not enter them
    return install(lib, "_mesh_parity", s, (_count, _sign, _point), (_count_adj, _sign_adj))


parity_for = per_precision(_precision)
