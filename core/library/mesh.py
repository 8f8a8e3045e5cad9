"""Triangle-mesh queries in kernels (Warp's): `gk.mesh_query_point` (and `_no_sign`, `_sign_normal`,
`_sign_winding_number`), `gk.mesh_query_ray`, `gk.mesh_query_aabb` / `mesh_query_aabb_next`,
`gk.mesh_eval_position`, `gk.mesh_eval_velocity` and `gk.mesh_get`.

A kernel receives a mesh as the struct `MeshData` (float32 points, Warp's) or `MeshData64` (float64):
its points, velocities, triangle indices and a BVH over the triangles' bounds (core/library/bvh.py,
built by geometry/mesh.py). Each query runs in two parts, both library `@gk.func` code:

1. a discrete search: a stack traversal of the BVH that finds the face (closest to a point, first hit by
   a ray). It only selects; its result is an integer, with no derivative (as in Warp).
2. the continuous outputs, computed again from that face's vertices read from `points` after the search:
   the closest point's barycentric (u, v) by region (Ericson's), the ray's t, u, v (Moller-Trumbore),
   the normal. AD differentiates this part as plain code, so u, v, t and the distances built from them
   have gradients with respect to the query point or ray and to the mesh's points, in both modes.
   (Warp 1.19 differentiates u, v and t with respect to the query only: its adjoints drop the mesh
   points' share, and mesh_eval_position has none; gradkit's include them.)

u weights the face's first vertex and v its second: the point is u * p0 + v * p1 + (1 - u - v) * p2."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

import math
from types import SimpleNamespace

from .. import types as T
from ..func import Func, func_grad
from ..lang import NAMES, LangFunction
from ..struct import struct
from .bvh import BIG, STACK, BvhData, BvhQuery, as_vec3, kernel_only
from .bvh import _start as _bvh_start

I32 = T.int32
gk = SimpleNamespace(**NAMES)


def _mesh_struct(s: T.ScalarType):
    V = T.array_type(T.vector(3, s))

    class MeshData:
        points: V
        velocities: V
        indices: T.array_type(I32)
        num_tris: I32
        num_points: I32
        has_velocities: I32
        average_edge_length: T.float32
        bvh: BvhData

    class MeshQueryPoint:
        result: T.bool_
        sign: s
        face: I32
        u: s
        v: s

    class MeshQueryRay:
        result: T.bool_
        sign: s
        face: I32
        t: s
        u: s
        v: s
        normal: T.vector(3, s)

    suffix = "" if s is T.float32 else "64"
    out = []
    for cls in (MeshData, MeshQueryPoint, MeshQueryRay):
        cls.__name__ = cls.__qualname__ = cls.__name__ + suffix
        cls.__doc__ = {"MeshData": "What a kernel sees of a gk.Mesh: its arrays and the BVH over its triangles.",
                       "MeshQueryPoint": "mesh_query_point's result (Warp's): result, sign, face, u, v.",
                       "MeshQueryRay": "mesh_query_ray's result (Warp's): result, sign, face, t, u, v, normal."
                       }[cls.__name__.rstrip("64")]
        out.append(struct(cls))
    return out


MeshData, MeshQueryPoint, MeshQueryRay = _mesh_struct(T.float32)
MeshData64, MeshQueryPoint64, MeshQueryRay64 = _mesh_struct(T.float64)
MESH_STRUCTS = {MeshData._gk_struct: T.float32, MeshData64._gk_struct: T.float64}


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

    def _sliver(a: V, b: V, c: V) -> bool:
        """Warp skips near-degenerate triangles in point queries."""
        e0 = b - a
        e1 = c - a
        e2 = c - b
        return gk.length(gk.cross(e0, e1)) / (gk.dot(e0, e0) + gk.dot(e1, e1) + gk.dot(e2, e2)) < s(1.0e-6)

    def _box_dist_sq(p: V, lo: V, hi: V) -> s:
        d = gk.max(gk.max(lo - p, p - hi), V(s(0.0), s(0.0), s(0.0)))
        return gk.dot(d, d)

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
            n = gk.max(n, gk.min(t0, t1))
            f = gk.min(f, gk.max(t0, t1))
        return V2(n, f)

    def _ray_enters(start: V, dir: V, lo: V, hi: V, max_t: s) -> bool:
        r = V2(neg_big, big)
        r = lib.slab(start[0], dir[0], lo[0], hi[0], r)
        r = lib.slab(start[1], dir[1], lo[1], hi[1], r)
        r = lib.slab(start[2], dir[2], lo[2], hi[2], r)
        return r[1] >= gk.max(r[0], s(0.0)) and r[0] < max_t

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

    def _closest_face(mesh: M, p: V, max_dist: s) -> I32:
        """The face closest to p within max_dist (strictly), -1 if none: the discrete search."""
        bvh = mesh.bvh
        best = max_dist * max_dist
        face = -1
        st = STACK()
        count = 0
        if bvh.num_items > 0:
            count = 1
        while count > 0:
            count -= 1
            node = st[count]
            if lib.box_dist_sq(p, V(bvh.node_lowers[node]), V(bvh.node_uppers[node])) <= best:
                info = bvh.node_info[node]
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        a = lib.vertex(mesh, f, 0)
                        b = lib.vertex(mesh, f, 1)
                        c = lib.vertex(mesh, f, 2)
                        if not lib.sliver(a, b, c):
                            uv = lib.closest_bary(a, b, c, p)
                            d = uv[0] * a + uv[1] * b + (s(1.0) - uv[0] - uv[1]) * c - p
                            dd = gk.dot(d, d)
                            if dd < best:
                                best = dd
                                face = f
                else:
                    st[count] = info[1]
                    st[count + 1] = info[0]
                    count += 2
        return face

    def _ray_face(mesh: M, start: V, dir: V, max_t: s) -> I32:
        """The face the ray hits first at 0 <= t < max_t, -1 if none: the discrete search."""
        bvh = mesh.bvh
        best = max_t
        face = -1
        st = STACK()
        count = 0
        if bvh.num_items > 0:
            count = 1
        while count > 0:
            count -= 1
            node = st[count]
            if lib.ray_enters(start, dir, V(bvh.node_lowers[node]), V(bvh.node_uppers[node]), best):
                info = bvh.node_info[node]
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        h = lib.ray_tri(start, dir, lib.vertex(mesh, f, 0), lib.vertex(mesh, f, 1),
                                        lib.vertex(mesh, f, 2))
                        if h[0] >= s(0.0) and h[0] < best:
                            best = h[0]
                            face = f
                else:
                    st[count] = info[1]
                    st[count + 1] = info[0]
                    count += 2
        return face

    def _near_normal(mesh: M, p: V, dist: s) -> V:
        """Warp's angle-weighted normal of the faces within average_edge_length * 1e-3 of the closest
        distance `dist` (a vertex's faces weigh their angle there, an edge's pi, a face's 2 pi)."""
        bvh = mesh.bvh
        eps = s(mesh.average_edge_length) * s(1.0e-3)
        eps_sq = eps * eps
        reach = (dist + eps) * (dist + eps)
        acc = V(s(0.0), s(0.0), s(0.0))
        st = STACK()
        count = 1
        while count > 0:
            count -= 1
            node = st[count]
            if lib.box_dist_sq(p, V(bvh.node_lowers[node]), V(bvh.node_uppers[node])) <= reach:
                info = bvh.node_info[node]
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        a = lib.vertex(mesh, f, 0)
                        b = lib.vertex(mesh, f, 1)
                        c = lib.vertex(mesh, f, 2)
                        if not lib.sliver(a, b, c):
                            uv = lib.closest_bary(a, b, c, p)
                            q = uv[0] * a + uv[1] * b + (s(1.0) - uv[0] - uv[1]) * c
                            if gk.length(q - p) < dist + eps:
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
                                acc += weight * gk.normalize(gk.cross(e0, e1))
                else:
                    st[count] = info[1]
                    st[count + 1] = info[0]
                    count += 2
        return acc

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
                q = uv[0] * a + uv[1] * b + (s(1.0) - uv[0] - uv[1]) * c
                n = lib.near_normal(mesh, p, gk.length(q - p))
                r.sign = gk.where(gk.dot(n, p - q) > s(0.0), s(1.0), s(-1.0))
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
            r.sign = gk.where(gk.dot(n, dir) > s(0.0), s(-1.0), s(1.0))
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

    def _near_normal_adj(mesh: M, p: V, dist: s, adj_ret: V):
        pass

    def _winding_adj(mesh: M, p: V, adj_ret: s):
        pass

    def _parity_adj(mesh: M, p: V, adj_ret: s):
        pass

    for py in (_vertex, _closest_bary, _sliver, _box_dist_sq, _slab, _ray_enters, _ray_tri, _closest_face,
               _ray_face, _near_normal, _winding, _ray_sign, _parity, _point, _ray, _eval_position,
               _eval_velocity):
        name = py.__name__[1:]
        py.__name__ = py.__qualname__ = f"_mesh_{name}_{s.name}"
        setattr(lib, name, Func(py))
    for adj in (_closest_face_adj, _ray_face_adj, _near_normal_adj, _winding_adj, _parity_adj):
        name = adj.__name__[1:-4]
        adj.__name__ = adj.__qualname__ = f"_mesh_{name}_{s.name}_adj"
        func_grad(getattr(lib, name))(adj)
    return lib


_BY_PRECISION: dict = {}


def lib_for(s: T.ScalarType) -> SimpleNamespace:
    if s not in _BY_PRECISION:
        _BY_PRECISION[s] = _precision(s)
    return _BY_PRECISION[s]


# --------------------------------------------------------------------------- the language functions

def mesh_arg(E, mesh, what: str = "id"):
    """(the MeshData a kernel argument stands for, its scalar type): a `gk.Mesh` parameter, or a geometry
    handle (Warp's `wp.uint64`) holding one."""
    t = getattr(mesh, "type", None)
    if t in MESH_STRUCTS:
        return mesh, MESH_STRUCTS[t]
    if t is not None and t.is_struct and t.fields.get("mesh") in MESH_STRUCTS:
        return mesh.fields["mesh"], MESH_STRUCTS[t.fields["mesh"]]
    E.fail(f"{what} must be a mesh (a kernel parameter annotated gk.Mesh, or wp.uint64, given a gk.Mesh or "
           f"its .id at launch), got {getattr(t, 'name', type(mesh).__name__)}")


def _vec(E, x, s, what):
    t = E.type_of(x)
    if not (t.is_vector and t.length == 3 and t.scalar.is_float):
        E.fail(f"{what} must be a 3-vector, got {t.name}")
    if t.scalar is s:
        return x
    return E.make(T.vector(3, s), [E.cast(c, s) for c in E.comps(x)])


def _point_query(how: int):
    def query(E, id, point, max_dist):
        mesh, s = mesh_arg(E, id)
        return E.call(lib_for(s).point, mesh, _vec(E, point, s, "point"), E.scalar(max_dist, s), E.const(how, I32),
                      E.const(0.5, s))
    return query


def mesh_query_point(E, id, point, max_dist):
    return _point_query(1)(E, id, point, max_dist)


def mesh_query_point_no_sign(E, id, point, max_dist):
    return _point_query(0)(E, id, point, max_dist)


def mesh_query_point_sign_normal(E, id, point, max_dist, epsilon=None):
    return _point_query(2)(E, id, point, max_dist)


def mesh_query_point_sign_winding_number(E, id, point, max_dist, accuracy=2.0, threshold=0.5):
    mesh, s = mesh_arg(E, id)
    return E.call(lib_for(s).point, mesh, _vec(E, point, s, "point"), E.scalar(max_dist, s), E.const(3, I32),
                  E.scalar(threshold, s))


def mesh_query_ray(E, id, start, dir, max_t):
    mesh, s = mesh_arg(E, id)
    return E.call(lib_for(s).ray, mesh, _vec(E, start, s, "start"), _vec(E, dir, s, "dir"), E.scalar(max_t, s))


def mesh_query_aabb(E, id, low, high):
    mesh, _ = mesh_arg(E, id)
    return E.call(_bvh_start, mesh.fields["bvh"], as_vec3(E, low, "low"), as_vec3(E, high, "high"),
                  E.const(0, I32))


def mesh_query_aabb_next(E, query, index):
    if getattr(query, "type", None) is not BvhQuery._gk_struct:
        E.fail("query must be the result of gk.mesh_query_aabb(id, low, high)")
    return NAMES["bvh_query_next"].macro(E, query, index)


def mesh_eval_position(E, id, face, u, v):
    mesh, s = mesh_arg(E, id)
    return E.call(lib_for(s).eval_position, mesh, E.scalar(face, I32), E.scalar(u, s), E.scalar(v, s))


def mesh_eval_velocity(E, id, face, u, v):
    mesh, s = mesh_arg(E, id)
    return E.call(lib_for(s).eval_velocity, mesh, E.scalar(face, I32), E.scalar(u, s), E.scalar(v, s))


def mesh_get(E, id):
    return mesh_arg(E, id)[0]


DOCS = {
    "mesh_query_point": "mesh_query_point(mesh, point, max_dist) -> the closest point on the mesh within max_dist "
                        "(.result, .face, .u, .v) and whether point is inside (.sign -1) or outside (+1) by ray "
                        "parity (Warp's)",
    "mesh_query_point_no_sign": "mesh_query_point_no_sign(mesh, point, max_dist) -> the closest point within "
                                "max_dist (.result, .face, .u, .v); .sign is 0",
    "mesh_query_point_sign_normal": "mesh_query_point_sign_normal(mesh, point, max_dist) -> as mesh_query_point, "
                                    "the sign from the angle-weighted normal at the closest point (watertight "
                                    "meshes)",
    "mesh_query_point_sign_winding_number": "mesh_query_point_sign_winding_number(mesh, point, max_dist, accuracy=2, "
                                            "threshold=0.5) -> as mesh_query_point, inside where the winding "
                                            "number exceeds threshold (summed over every triangle: accuracy is "
                                            "not used)",
    "mesh_query_ray": "mesh_query_ray(mesh, start, dir, max_t) -> the first hit at 0 <= t < max_t (.result, .face, "
                      ".t, .u, .v, .normal, .sign: -1 from behind the face)",
    "mesh_query_aabb": "mesh_query_aabb(mesh, low, high) -> a query over the triangles whose bounds overlap "
                       "[low, high]; iterate with mesh_query_aabb_next(query, index) or `for index in query:`",
    "mesh_query_aabb_next": "mesh_query_aabb_next(query, index) -> bool: assigns the next triangle to `index`",
    "mesh_eval_position": "mesh_eval_position(mesh, face, u, v) -> u * p0 + v * p1 + (1 - u - v) * p2 of the face",
    "mesh_eval_velocity": "mesh_eval_velocity(mesh, face, u, v) -> the velocities interpolated as positions (0 if "
                          "the mesh has none)",
    "mesh_get": "mesh_get(id) -> the mesh's struct: .points, .velocities, .indices, .num_tris, .num_points",
}

for _fn, _assigns in ((mesh_query_point, ()), (mesh_query_point_no_sign, ()), (mesh_query_point_sign_normal, ()),
                      (mesh_query_point_sign_winding_number, ()), (mesh_query_ray, ()), (mesh_query_aabb, ()),
                      (mesh_query_aabb_next, (0, 1)), (mesh_eval_position, ()), (mesh_eval_velocity, ()),
                      (mesh_get, ())):
    _fn.__doc__ = DOCS[_fn.__name__]
    _fn.assigns = _assigns
    LangFunction(_fn.__name__, "macro", macro=_fn, host=kernel_only(_fn.__name__)).define()
