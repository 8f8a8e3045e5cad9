"""The library functions over the mesh (core/library/mesh.py's queries call them), per point precision:
the `@gk.func` code of a query's two parts — the BVH search that picks a face (no derivative) and the
continuous outputs recomputed from that face's vertices (differentiated as plain code). The structs they
take and return are in core/library/mesh_structs.py (re-exported here for the modules importing them)."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

import math
from types import SimpleNamespace

from .. import types as T
from ..lang import NAMES, LangFunction
from .bvh import BIG, BvhData
from .lib_registry import install, per_precision
from .mesh_structs import (MESH_STRUCTS, MeshData, MeshData64, MeshQueryPoint,  # noqa: F401
                           MeshQueryPoint64, MeshQueryRay, MeshQueryRay64)

I32 = T.int32
gk = SimpleNamespace(**NAMES, stop_gradient=LangFunction("stop_gradient", "prim"))


def _precision(s: T.ScalarType) -> SimpleNamespace:
    """The library functions over meshes with points of scalar type `s`."""
    V = T.vector(3, s)
    V2 = T.vector(2, s)
    M = MeshData if s is T.float32 else MeshData64
    QP = MeshQueryPoint if s is T.float32 else MeshQueryPoint64
    QR = MeshQueryRay if s is T.float32 else MeshQueryRay64
    big = s(BIG)
    neg_big = s(-BIG)
    lib = SimpleNamespace()

    def _vertex(mesh: M, face: I32, k: I32) -> V:
        return mesh.points[mesh.indices[face * 3 + k]]

    def _closest_bary(a: V, b: V, c: V, p: V) -> V2:
        """(u, v): the weights of a and b of the point of triangle abc closest to p (Ericson's regions)."""
        ab = b - a
        ac = c - a
        ap = p - a
        d1 = gk.dot(ab, ap)
        d2 = gk.dot(ac, ap)
        bp = p - b
        d3 = gk.dot(ab, bp)
        d4 = gk.dot(ac, bp)
        cp = p - c
        d5 = gk.dot(ab, cp)
        d6 = gk.dot(ac, cp)
        vc = d1 * d4 - d3 * d2
        vb = d5 * d2 - d1 * d6
        va = d3 * d6 - d5 * d4
        r = V2(s(1.0), s(0.0))
        if d1 <= s(0.0) and d2 <= s(0.0):
            r = V2(s(1.0), s(0.0))
        elif d3 >= s(0.0) and d4 <= d3:
            r = V2(s(0.0), s(1.0))
        elif vc <= s(0.0) and d1 >= s(0.0) and d3 <= s(0.0):
            w = d1 / (d1 - d3)
            r = V2(s(1.0) - w, w)
        elif d6 >= s(0.0) and d5 <= d6:
            r = V2(s(0.0), s(0.0))
        elif vb <= s(0.0) and d2 >= s(0.0) and d6 <= s(0.0):
            w = d2 / (d2 - d6)
            r = V2(s(1.0) - w, s(0.0))
        elif va <= s(0.0) and d4 - d3 >= s(0.0) and d5 - d6 >= s(0.0):
            w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
            r = V2(s(0.0), s(1.0) - w)
        else:
            denom = s(1.0) / (va + vb + vc)
            v = vb * denom
            w = vc * denom
            r = V2(s(1.0) - v - w, v)
        return r

    def _bary_point(a: V, b: V, c: V, uv: V2) -> V:
        """The point with barycentrics (u, v) on triangle a, b, c: u * a + v * b + (1 - u - v) * c."""
        return uv[0] * a + uv[1] * b + (s(1.0) - uv[0] - uv[1]) * c

    def _sliver(a: V, b: V, c: V) -> bool:
        """Warp skips near-degenerate triangles in point queries."""
        e0 = b - a
        e1 = c - a
        e2 = c - b
        return gk.length(gk.cross(e0, e1)) / (gk.dot(e0, e0) + gk.dot(e1, e1) + gk.dot(e2, e2)) < s(1.0e-6)

    def _box_dist_sq(p: V, lo: V, hi: V) -> s:
        """The squared distance from p to the box [lo, hi] (0 inside). Per axis the larger of lo - p, p - hi
        and 0 by comparisons and selects: gk.max is IEEE maximum, several instructions a component on CPUs,
        and this runs at every node a point query visits (equal for numbers: a -0 is squared)."""
        a = lo - p
        b = p - hi
        x = gk.where(a[0] > b[0], a[0], b[0])
        y = gk.where(a[1] > b[1], a[1], b[1])
        z = gk.where(a[2] > b[2], a[2], b[2])
        x = gk.where(x > s(0.0), x, s(0.0))
        y = gk.where(y > s(0.0), y, s(0.0))
        z = gk.where(z > s(0.0), z, s(0.0))
        d = V(x, y, z)
        return gk.dot(d, d)

    def _may_be_within(bvh: BvhData, f: I32, p: V, reach_sq: s) -> bool:
        """Whether face f's own box (the BVH's item bounds, float32, outward for float64 points) lies within
        sqrt(reach_sq) of p, with a margin of 1e-4 relative for the rounding of the distances compared: a
        point query tests a leaf's faces' boxes before the faces (most boxes of a leaf near the query are
        farther than the best distance so far, and the face test costs a square root and divisions)."""
        return lib.box_dist_sq(p, V(bvh.item_lowers[f]), V(bvh.item_uppers[f])) * s(0.9999) <= reach_sq

    def _slab(o: s, d: s, lo: s, hi: s, r: V2) -> V2:
        n = r[0]
        f = r[1]
        if d == s(0.0):
            if o < lo or o > hi:
                n = s(1.0)
                f = s(-1.0)
        else:
            inv = s(1.0) / d
            t0 = (lo - o) * inv
            t1 = (hi - o) * inv
            # min / max as comparisons and selects (C's a < b ? a : b, as Warp's): gk.min is IEEE minimum,
            # which the CPU backend expands to several instructions, and this test runs at every node
            near = gk.where(t0 < t1, t0, t1)
            far = gk.where(t0 < t1, t1, t0)
            n = gk.where(near > n, near, n)
            f = gk.where(far < f, far, f)
        return V2(n, f)

    def _ray_enters(start: V, dir: V, lo: V, hi: V, max_t: s) -> bool:
        r = V2(neg_big, big)
        r = lib.slab(start[0], dir[0], lo[0], hi[0], r)
        r = lib.slab(start[1], dir[1], lo[1], hi[1], r)
        r = lib.slab(start[2], dir[2], lo[2], hi[2], r)
        return r[1] >= r[0] and r[1] >= s(0.0) and r[0] < max_t

    def _ray_tri(start: V, dir: V, a: V, b: V, c: V) -> V:
        """(t, u, v) of the ray's hit of triangle abc (Moller-Trumbore; u, v weigh a and b), t = -1 on a miss."""
        e1 = b - a
        e2 = c - a
        pv = gk.cross(dir, e2)
        det = gk.dot(e1, pv)
        out = V(s(-1.0), s(0.0), s(0.0))
        if det != s(0.0):
            inv = s(1.0) / det
            tv = start - a
            bu = gk.dot(tv, pv) * inv
            qv = gk.cross(tv, e1)
            bv = gk.dot(dir, qv) * inv
            if bu >= s(0.0) and bv >= s(0.0) and bu + bv <= s(1.0):
                out = V(gk.dot(e2, qv) * inv, s(1.0) - bu - bv, bu)
        return out

    def _near_leaf(bvh: BvhData, p: V, reach_sq: s) -> I32:
        """The leaf reached from the root by entering, at each inner node, the child whose box is nearer p
        (the left one on a tie); -1 where a box on the way lies farther than sqrt(reach_sq), -2 where the
        root's does (nothing is within reach): a point
        query takes that leaf's faces first, so the best distance is about final from the start and the
        walk that follows prunes almost everything else (a stackless walk cannot take the nearer child
        first at every node). A query point far from the mesh stops at the root (example_mesh's falling
        particles: a full descent for each cost its simulate launch 40 us)."""
        node = 0
        info = bvh.node_info[0]
        if lib.box_dist_sq(p, V(bvh.node_lowers[0]), V(bvh.node_uppers[0])) > reach_sq:
            node = -2                   # the whole mesh is beyond: no walk either
        while node >= 0 and info[3] <= 0 and info[0] >= 0:
            left = info[0]
            dl = lib.box_dist_sq(p, V(bvh.node_lowers[left]), V(bvh.node_uppers[left]))
            dr = lib.box_dist_sq(p, V(bvh.node_lowers[left + 1]), V(bvh.node_uppers[left + 1]))
            node = gk.where(dr < dl, left + 1, left)
            if gk.where(dr < dl, dr, dl) > reach_sq:
                node = -1
            else:
                info = bvh.node_info[node]
        return node

    def _closest_face(mesh: M, p: V, max_dist: s) -> I32:
        """The face closest to p within max_dist (strictly), -1 if none: the discrete search. The faces of
        the leaf _near_leaf reaches first, then the walk from the root, which skips that leaf."""
        bvh = mesh.bvh
        best = max_dist * max_dist
        face = -1
        node = -1
        first = -1
        start = False
        if bvh.num_items > 0:
            first = lib.near_leaf(bvh, p, best)
            start = first >= 0
            node = gk.where(start, first, gk.where(first == -1, 0, -1))
        while node >= 0:
            info = bvh.node_info[node]
            nxt = info[1]
            if start:
                nxt = 0                  # the near leaf done: the walk from the root
            if (start or node != first) and \
                    lib.box_dist_sq(p, V(bvh.node_lowers[node]), V(bvh.node_uppers[node])) <= best:
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        if lib.may_be_within(bvh, f, p, best):
                            a = lib.vertex(mesh, f, 0)
                            b = lib.vertex(mesh, f, 1)
                            c = lib.vertex(mesh, f, 2)
                            if not lib.sliver(a, b, c):
                                uv = lib.closest_bary(a, b, c, p)
                                d = lib.bary_point(a, b, c, uv) - p
                                dd = gk.dot(d, d)
                                if dd < best:
                                    best = dd
                                    face = f
                else:
                    nxt = info[0]
            start = False
            node = nxt
        return face

    def _ray_face(mesh: M, start: V, dir: V, max_t: s) -> I32:
        """The face the ray hits first at 0 <= t < max_t, -1 if none: the discrete search. It enters each
        node's child on the ray's near side first (the walk of the direction's octant in bvh.ray_order,
        geometry/bvh.py), so near hits come early and prune the far subtrees (example_diffray's 116k primary
        rays about a 9k-triangle sphere, 9.4k of them entering its box: 7.35 -> 4.4-4.7 ms CPU on this
        machine, Warp's unordered stack walk 6.8 ms)."""
        bvh = mesh.bvh
        best = max_t
        face = -1
        node = -1
        if bvh.num_items > 0:
            node = 0
        octant = gk.where(dir[0] < s(0.0), 1, 0) + gk.where(dir[1] < s(0.0), 2, 0) + gk.where(dir[2] < s(0.0), 4, 0)
        base = octant * bvh.node_info.shape[0]
        while node >= 0:
            info = bvh.node_info[node]
            order = bvh.ray_order[base + node]
            nxt = order[1]
            if lib.ray_enters(start, dir, V(bvh.node_lowers[node]), V(bvh.node_uppers[node]), best):
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        h = lib.ray_tri(start, dir, lib.vertex(mesh, f, 0), lib.vertex(mesh, f, 1),
                                        lib.vertex(mesh, f, 2))
                        if h[0] >= s(0.0) and h[0] < best:
                            best = h[0]
                            face = f
                else:
                    nxt = order[0]
            node = nxt
        return face

    def _corner_weight(a: V, b: V, c: V, q: V, eps_sq: s) -> s:
        """Warp's weight of face abc's normal at its point q: the face's angle at a corner within eps of q, pi
        on an edge within eps, else 2 pi."""
        e0 = b - a
        e1 = c - a
        e2 = c - b
        weight = s(2.0 * math.pi)
        if gk.length_sq(q - a) < eps_sq:
            weight = gk.acos(gk.dot(gk.normalize(e0), gk.normalize(e1)))
        elif gk.length_sq(q - b) < eps_sq:
            weight = gk.acos(gk.dot(gk.normalize(e2), gk.normalize(-e0)))
        elif gk.length_sq(q - c) < eps_sq:
            weight = gk.acos(gk.dot(gk.normalize(-e1), gk.normalize(-e2)))
        else:
            qa = q - a
            qb = q - b
            if (gk.length_sq(gk.cross(e0, qa)) < eps_sq * gk.dot(e0, e0)
                    or gk.length_sq(gk.cross(e2, qb)) < eps_sq * gk.dot(e2, e2)
                    or gk.length_sq(gk.cross(e1, qa)) < eps_sq * gk.dot(e1, e1)):
                weight = s(math.pi)
        return weight

    def _closest_signed(mesh: M, p: V, max_dist: s) -> I32:
        """The closest face within max_dist and the side of p, in one walk as Warp's
        mesh_query_point_sign_normal: the faces within eps = average_edge_length * 1e-3 of the closest
        distance so far add their angle-weighted normals (a face closer by more than eps starts the sum
        afresh), nodes within that distance + eps are entered; p is inside where the sum points away from
        it. 2 * face + (1 inside, 0 outside), -1 if no face is within max_dist. (A second walk for the
        normals of the faces near the final distance took a third of the query.) The faces of the leaf
        _near_leaf reaches come first, as in _closest_face."""
        bvh = mesh.bvh
        eps = s(mesh.average_edge_length) * s(1.0e-3)
        eps_sq = eps * eps
        min_dist = max_dist
        face = -1
        acc = V(s(0.0), s(0.0), s(0.0))
        best_q = V(s(0.0), s(0.0), s(0.0))
        node = -1
        first = -1
        start = False
        if bvh.num_items > 0:                   # the near leaf's faces first, then the walk from the root
            first = lib.near_leaf(bvh, p, (min_dist + eps) * (min_dist + eps))
            start = first >= 0
            node = gk.where(start, first, gk.where(first == -1, 0, -1))
        while node >= 0:
            info = bvh.node_info[node]
            nxt = info[1]
            if start:
                nxt = 0
            reach = (min_dist + eps) * (min_dist + eps)
            if (start or node != first) and \
                    lib.box_dist_sq(p, V(bvh.node_lowers[node]), V(bvh.node_uppers[node])) <= reach:
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        if lib.may_be_within(bvh, f, p, (min_dist + eps) * (min_dist + eps)):
                            a = lib.vertex(mesh, f, 0)
                            b = lib.vertex(mesh, f, 1)
                            c = lib.vertex(mesh, f, 2)
                            if not lib.sliver(a, b, c):
                                q = lib.bary_point(a, b, c, lib.closest_bary(a, b, c, p))
                                dist = gk.length(q - p)
                                if dist < min_dist + eps:
                                    n = lib.corner_weight(a, b, c, q, eps_sq) * gk.normalize(gk.cross(b - a, c - a))
                                    if dist > min_dist - eps:        # as close as the closest: add
                                        acc += n
                                        if dist < min_dist:
                                            min_dist = dist
                                            face = f
                                            best_q = q
                                    else:                            # closer: afresh
                                        acc = n
                                        min_dist = dist
                                        face = f
                                        best_q = q
                else:
                    nxt = info[0]
            start = False
            node = nxt
        code = -1
        if face >= 0:
            code = face + face + gk.where(gk.dot(acc, p - best_q) > s(0.0), 0, 1)
        return code

    def _winding(mesh: M, p: V) -> s:
        """The winding number of the mesh around p: its triangles' solid angles / 4 pi (every triangle)."""
        total = s(0.0)
        for f in range(mesh.num_tris):
            a = lib.vertex(mesh, f, 0) - p
            b = lib.vertex(mesh, f, 1) - p
            c = lib.vertex(mesh, f, 2) - p
            la = gk.length(a)
            lb = gk.length(b)
            lc = gk.length(c)
            num = gk.dot(a, gk.cross(b, c))
            den = la * lb * lc + gk.dot(a, b) * lc + gk.dot(a, c) * lb + gk.dot(b, c) * la
            total += s(2.0) * gk.atan2(num, den)
        return total / s(4.0 * math.pi)

    def _ray_sign(mesh: M, start: V, dir: V, face: I32) -> s:
        """Warp's ray `sign`: negative where the ray leaves through the face (it meets its back)."""
        n = gk.cross(lib.vertex(mesh, face, 1) - lib.vertex(mesh, face, 0),
                     lib.vertex(mesh, face, 2) - lib.vertex(mesh, face, 0))
        return gk.where(gk.dot(n, dir) > s(0.0), s(-1.0), s(1.0))

    def _parity(mesh: M, p: V) -> s:
        """Inside (-1) when at least two of the three axis rays from p first meet a face from behind."""
        votes = 0
        for axis in range(3):
            d = V(s(0.0), s(0.0), s(0.0))
            d[axis] = s(1.0)
            f = lib.ray_face(mesh, p, d, big)
            if f >= 0:
                if lib.ray_sign(mesh, p, d, f) < s(0.0):
                    votes += 1
        return gk.where(votes >= 2, s(-1.0), s(1.0))

    def _point(mesh: M, p: V, max_dist: s, how: I32, threshold: s) -> QP:
        """The closest point's query result; `how` picks the sign: 0 none, 1 parity, 2 normal, 3 winding."""
        r = QP()
        face = -1
        inside = 0
        if how == 2:
            code = lib.closest_signed(mesh, p, max_dist)
            if code >= 0:
                face = code // 2
                inside = code - face - face
        else:
            face = lib.closest_face(mesh, p, max_dist)
        if face >= 0:
            a = lib.vertex(mesh, face, 0)
            b = lib.vertex(mesh, face, 1)
            c = lib.vertex(mesh, face, 2)
            uv = lib.closest_bary(a, b, c, p)
            r.result = True
            r.face = face
            r.u = uv[0]
            r.v = uv[1]
            if how == 1:
                r.sign = lib.parity(mesh, p)
            elif how == 2:
                r.sign = gk.where(inside == 1, s(-1.0), s(1.0))
            elif how == 3:
                r.sign = gk.where(lib.winding(mesh, p) > threshold, s(-1.0), s(1.0))
        return r

    def _ray(mesh: M, start: V, dir: V, max_t: s) -> QR:
        r = QR()
        face = lib.ray_face(mesh, start, dir, max_t)
        if face >= 0:
            a = lib.vertex(mesh, face, 0)
            b = lib.vertex(mesh, face, 1)
            c = lib.vertex(mesh, face, 2)
            h = lib.ray_tri(start, dir, a, b, c)
            r.result = True
            r.face = face
            r.t = h[0]
            r.u = h[1]
            r.v = h[2]
            n = gk.cross(b - a, c - a)
            r.normal = gk.normalize(n)
            # Warp's sign: its watertight test's determinant, -dot(n, dir) / |dir| along dir's largest axis
            # (positive from the face's front); a value without derivative, as Warp's adjoint gives it none
            big = gk.max(gk.max(gk.abs(dir[0]), gk.abs(dir[1])), gk.abs(dir[2]))
            r.sign = gk.stop_gradient(-gk.dot(n, dir) / big)
        return r

    def _eval_position(mesh: M, face: I32, u: s, v: s) -> V:
        return u * lib.vertex(mesh, face, 0) + v * lib.vertex(mesh, face, 1) + (s(1.0) - u - v) * lib.vertex(mesh, face, 2)

    def _eval_velocity(mesh: M, face: I32, u: s, v: s) -> V:
        out = V(s(0.0), s(0.0), s(0.0))
        if mesh.has_velocities != 0:
            i = mesh.indices[face * 3]
            j = mesh.indices[face * 3 + 1]
            k = mesh.indices[face * 3 + 2]
            out = u * mesh.velocities[i] + v * mesh.velocities[j] + (s(1.0) - u - v) * mesh.velocities[k]
        return out

    # the searches and the signs only select: AD does not enter them (no derivative, no replayed loops)
    def _closest_face_adj(mesh: M, p: V, max_dist: s, adj_ret: I32):
        pass

    def _ray_face_adj(mesh: M, start: V, dir: V, max_t: s, adj_ret: I32):
        pass

    def _closest_signed_adj(mesh: M, p: V, max_dist: s, adj_ret: I32):
        pass

    def _winding_adj(mesh: M, p: V, adj_ret: s):
        pass

    def _parity_adj(mesh: M, p: V, adj_ret: s):
        pass

    return install(lib, "_mesh", s,
                   (_vertex, _closest_bary, _bary_point, _sliver, _box_dist_sq, _may_be_within, _near_leaf, _slab,
                    _ray_enters, _ray_tri, _closest_face, _ray_face, _corner_weight, _closest_signed, _winding,
                    _ray_sign, _parity, _point, _ray, _eval_position, _eval_velocity),
                   (_closest_face_adj, _ray_face_adj, _closest_signed_adj, _winding_adj, _parity_adj))


lib_for = per_precision(_precision)
