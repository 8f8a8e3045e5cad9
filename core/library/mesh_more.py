"""Warp's mesh queries beyond the closest point and the first hit, as library `@gk.func` code over the
mesh structs of core/library/mesh_device.py (the language side is core/library/mesh.py):

- the furthest point (`mesh_query_furthest_point_no_sign`): the faces of the leaf reached by entering the
  child with the farther corner at each node, then a BVH walk entering the nodes whose farthest corner lies
  beyond the best distance so far; the furthest point of a triangle is one of its corners,
  picked as Warp's furthest_point_to_triangle does (a first, then b, then c on ties);
- any hit (`mesh_query_ray_anyhit`): the ray walk of the first-hit query, stopping at the first face hit
  at 0 <= t < max_t;
- the mesh query (`mesh_query_aabb` / `mesh_query_sphere`, advanced by `mesh_query_next`): the struct
  `MeshQuery` (or `MeshQuery64`), a BVH query over the triangles' bounds plus, for a sphere, Warp's narrow
  phase (the closest point of the triangle within the radius; a zero-area face by its longest edge). The
  kind is stored, so a local assigned both kinds in two branches iterates by the one it holds.

The searches only select faces and answer yes / no: no derivative (Warp's have none either, except the
furthest point's, whose adjoint applies the closest point's formula; here u, v are a corner's constant
weights, so their derivative is 0 and the furthest position's gradient comes through
mesh_eval_position)."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from types import SimpleNamespace

from .. import types as T
from .lib_registry import install, per_precision
from ..lang import NAMES
from ..struct import struct
from .bvh import BIG, BvhData, BvhQuery
from .bvh import _test as _bvh_test
from .mesh_device import MeshData, MeshData64, MeshQueryPoint, MeshQueryPoint64, lib_for

I32 = T.int32
gk = SimpleNamespace(**NAMES)
AABB, SPHERE = 0, 1             # MeshQuery.kind


def _query_struct(s: T.ScalarType):
    class MeshQuery:
        mesh: MeshData if s is T.float32 else MeshData64
        query: BvhQuery          # over the triangles' bounds (an AABB or a sphere query)
        center: T.vector(3, s)
        radius_sq: s
        kind: I32                # AABB or SPHERE
        found: I32
        current: I32

    MeshQuery.__name__ = MeshQuery.__qualname__ = "MeshQuery" + ("" if s is T.float32 else "64")
    MeshQuery.__doc__ = ("mesh_query_aabb's and mesh_query_sphere's query (Warp's MeshQuery): a BVH query over "
                         "the triangles' bounds, and the sphere a sphere query tests each face against.")
    return struct(MeshQuery)


MeshQuery = _query_struct(T.float32)
MeshQuery64 = _query_struct(T.float64)
QUERY_STRUCTS = {MeshQuery._gk_struct: T.float32, MeshQuery64._gk_struct: T.float64}


def _precision(s: T.ScalarType) -> SimpleNamespace:
    """The functions over meshes with points of scalar type `s`."""
    V = T.vector(3, s)
    V2 = T.vector(2, s)
    big32 = T.float32(BIG)
    M = MeshData if s is T.float32 else MeshData64
    QP = MeshQueryPoint if s is T.float32 else MeshQueryPoint64
    MQ = MeshQuery if s is T.float32 else MeshQuery64
    base = lib_for(s)
    lib = SimpleNamespace()

    def _far_box_sq(p: V, lo: V, hi: V) -> s:
        """The squared distance from p to the box's farthest corner (Warp's furthest_distance_to_aabb_sq)."""
        a = gk.abs(p - lo)
        b = gk.abs(p - hi)
        d = V(gk.where(a[0] > b[0], a[0], b[0]), gk.where(a[1] > b[1], a[1], b[1]),
              gk.where(a[2] > b[2], a[2], b[2]))
        return gk.dot(d, d)

    def _far_corner(a: V, b: V, c: V, p: V) -> V2:
        """(u, v) of the corner of abc farthest from p: a if strictly farthest, else b if farther than c,
        else c (Warp's furthest_point_to_triangle)."""
        da = gk.length_sq(p - a)
        db = gk.length_sq(p - b)
        dc = gk.length_sq(p - c)
        r = V2(s(0.0), s(0.0))
        if da > db and da > dc:
            r = V2(s(1.0), s(0.0))
        elif db > dc:
            r = V2(s(0.0), s(1.0))
        return r

    def _far_leaf(bvh: BvhData, p: V) -> I32:
        """The leaf reached from the root by entering, at each inner node, the child whose farthest corner is
        farther from p (the left one on a tie): its faces give the furthest search a best distance near the
        final one at once, so the walk that follows prunes most nodes (Warp's stack walk pops the farther
        child first for the same reason)."""
        node = 0
        info = bvh.node_info[0]
        while info[3] <= 0 and info[0] >= 0:
            left = info[0]
            dl = lib.far_box_sq(p, V(bvh.node_lowers[left]), V(bvh.node_uppers[left]))
            dr = lib.far_box_sq(p, V(bvh.node_lowers[left + 1]), V(bvh.node_uppers[left + 1]))
            node = gk.where(dr > dl, left + 1, left)
            info = bvh.node_info[node]
        return node

    def _furthest_face(mesh: M, p: V, min_dist: s) -> I32:
        """The face with the point farthest from p, farther than min_dist (strictly), -1 if none; slivers
        skipped as in the closest-point search. The faces of the leaf _far_leaf reaches first, then a
        stackless walk from the root (skipping that leaf) entering the nodes whose farthest corner is
        farther than the best so far."""
        bvh = mesh.bvh
        best = min_dist * min_dist
        face = -1
        node = -1
        first = -1
        start = False
        if bvh.num_items > 0:
            first = lib.far_leaf(bvh, p)
            start = True
            node = first
        while node >= 0:
            info = bvh.node_info[node]
            nxt = info[1]
            if start:
                nxt = 0                  # the far leaf done: the walk from the root
            if (start or node != first) and \
                    lib.far_box_sq(p, V(bvh.node_lowers[node]), V(bvh.node_uppers[node])) > best:
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        a = base.vertex(mesh, f, 0)
                        b = base.vertex(mesh, f, 1)
                        c = base.vertex(mesh, f, 2)
                        if not base.sliver(a, b, c):
                            d = base.bary_point(a, b, c, lib.far_corner(a, b, c, p)) - p
                            dd = gk.dot(d, d)
                            if dd > best:
                                best = dd
                                face = f
                else:
                    nxt = info[0]
            start = False
            node = nxt
        return face

    def _furthest(mesh: M, p: V, min_dist: s) -> QP:
        r = QP()
        face = lib.furthest_face(mesh, p, min_dist)
        if face >= 0:
            uv = lib.far_corner(base.vertex(mesh, face, 0), base.vertex(mesh, face, 1), base.vertex(mesh, face, 2), p)
            r.result = True
            r.face = face
            r.u = uv[0]
            r.v = uv[1]
        return r

    def _anyhit(mesh: M, start: V, dir: V, max_t: s) -> bool:
        """Whether the ray hits a face at 0 <= t < max_t: the first-hit walk, stopping at the first hit."""
        bvh = mesh.bvh
        hit = False
        node = -1
        if bvh.num_items > 0:
            node = 0
        while node >= 0:
            info = bvh.node_info[node]
            nxt = info[1]
            if base.ray_enters(start, dir, V(bvh.node_lowers[node]), V(bvh.node_uppers[node]), max_t):
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        h = base.ray_tri(start, dir, base.vertex(mesh, f, 0), base.vertex(mesh, f, 1),
                                         base.vertex(mesh, f, 2))
                        if h[0] >= s(0.0) and h[0] < max_t:
                            hit = True
                    if hit:
                        nxt = -1
                else:
                    nxt = info[0]
            node = nxt
        return hit

    def _sphere_face(mesh: M, f: I32, center: V, radius_sq: s) -> bool:
        """Face f's closest point to center lies within the radius (Warp's narrow phase; a zero-area face
        is taken as its longest edge, whose closest point is clamped to the segment)."""
        a = base.vertex(mesh, f, 0)
        b = base.vertex(mesh, f, 1)
        c = base.vertex(mesh, f, 2)
        ab = b - a
        ac = c - a
        n = gk.cross(ab, ac)
        cp = a
        if gk.dot(n, n) == s(0.0):
            bc = c - b
            lab = gk.dot(ab, ab)
            lac = gk.dot(ac, ac)
            lbc = gk.dot(bc, bc)
            p0 = b
            p1 = c
            if lab >= lac and lab >= lbc:
                p0 = a
                p1 = b
            elif lac >= lbc:
                p0 = a
                p1 = c
            e = p1 - p0
            len2 = gk.dot(e, e)
            t = s(0.0)
            if len2 > s(0.0):
                t = gk.clamp(gk.dot(center - p0, e) / len2, s(0.0), s(1.0))
            cp = p0 + t * e
        else:
            cp = base.bary_point(a, b, c, base.closest_bary(a, b, c, center))
        d = cp - center
        return gk.dot(d, d) <= radius_sq

    def _start(mesh: M, query: BvhQuery, center: V, radius_sq: s, kind: I32) -> MQ:
        q = MQ(mesh=mesh, query=query)
        q.center = center
        q.radius_sq = radius_sq
        q.kind = kind
        return q

    def _next(q: MQ) -> MQ:
        """Advance to the next face the query reports: q.found = 1 and q.current its index, or 0. The BVH
        query's walk (core/library/bvh.py _next) with the sphere's narrow phase in its item step, one loop."""
        b = q.query
        q.found = 0
        more = True
        while more:
            if b.prim_cur < b.prim_end:
                item = b.bvh.prims[b.prim_cur]
                b.prim_cur += 1
                if _bvh_test(b, b.bvh.item_lowers[item], b.bvh.item_uppers[item], big32):
                    if q.kind == AABB or lib.sphere_face(q.mesh, item, q.center, q.radius_sq):
                        q.current = item
                        q.found = 1
                        more = False
            elif b.node < 0:
                more = False
            else:
                node = b.node
                info = b.bvh.node_info[node]
                b.node = info[1]
                if _bvh_test(b, b.bvh.node_lowers[node], b.bvh.node_uppers[node], big32):
                    if info[3] > 0:
                        b.prim_cur = info[2]
                        b.prim_end = info[2] + info[3]
                    else:
                        b.node = info[0]
        q.query = b
        return q

    # searches and tests only select: AD does not enter them
    def _furthest_face_adj(mesh: M, p: V, min_dist: s, adj_ret: I32):
        pass

    def _anyhit_adj(mesh: M, start: V, dir: V, max_t: s, adj_ret: bool):
        pass

    return install(lib, "_mesh", s, (_far_box_sq, _far_corner, _far_leaf, _furthest_face, _furthest, _anyhit,
                                     _sphere_face, _start, _next), (_furthest_face_adj, _anyhit_adj))


more_for = per_precision(_precision)
