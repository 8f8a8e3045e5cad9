"""`wp.intersect_tri_tri(v0, v1, v2, u0, u1, u2)`: 1 when two triangles intersect, else 0 — Möller's
interval-overlap test (J. Graphics Tools, 1997) in its division-free form with the |distance| < 1e-6 snap,
the variant Warp 1.19 uses, written here in gradkit's kernel language (so every backend runs it)."""

# (no `from __future__ import annotations`: the functions below need evaluated annotations)

from types import SimpleNamespace

from ..core import types as T
from ..core.func import Func
from ..core.lang import NAMES

gk = SimpleNamespace(**NAMES)
lib = SimpleNamespace()          # the functions below as @gk.funcs (filled at the end)
F = T.float32
I = T.int32
V = T.vector(3, F)
V2 = T.vector(2, F)
V5 = T.vector(5, F)
EPS = F(1.0e-6)


def _snap(d: F) -> F:
    r = d
    if gk.abs(d) < EPS:
        r = F(0.0)
    return r


def _pick(v: V, i: I) -> F:
    r = v[2]
    if i == 0:
        r = v[0]
    elif i == 1:
        r = v[1]
    return r


def _flat(v: V, i0: I, i1: I) -> V2:
    return V2(lib.pick(v, i0), lib.pick(v, i1))


def _edge_edge(a: V2, v0: V2, u0: V2, u1: V2) -> I:
    """Edge (v0, v0 + a) against edge (u0, u1) in the projection plane."""
    bx = u0[0] - u1[0]
    by = u0[1] - u1[1]
    cx = v0[0] - u0[0]
    cy = v0[1] - u0[1]
    f = a[1] * bx - a[0] * by
    d = by * cx - bx * cy
    hit = 0
    if (f > F(0.0) and d >= F(0.0) and d <= f) or (f < F(0.0) and d <= F(0.0) and d >= f):
        e = a[0] * cy - a[1] * cx
        if f > F(0.0):
            if e >= F(0.0) and e <= f:
                hit = 1
        elif e <= F(0.0) and e >= f:
            hit = 1
    return hit


def _edge_tri(v0: V2, v1: V2, u0: V2, u1: V2, u2: V2) -> I:
    a = v1 - v0
    return gk.max(gk.max(lib.edge_edge(a, v0, u0, u1), lib.edge_edge(a, v0, u1, u2)), lib.edge_edge(a, v0, u2, u0))


def _side(p: V2, a: V2, b: V2) -> F:
    ea = b[1] - a[1]
    eb = a[0] - b[0]
    return ea * p[0] + eb * p[1] - ea * a[0] - eb * a[1]


def _point_in_tri(p: V2, u0: V2, u1: V2, u2: V2) -> I:
    d0 = lib.side(p, u0, u1)
    d1 = lib.side(p, u1, u2)
    d2 = lib.side(p, u2, u0)
    hit = 0
    if d0 * d1 > F(0.0) and d0 * d2 > F(0.0):
        hit = 1
    return hit


def _coplanar(n: V, v0: V, v1: V, v2: V, u0: V, u1: V, u2: V) -> I:
    """Both triangles in one plane: project on the axis plane where the normal is largest, test edges and
    containment."""
    a = gk.abs(n)
    i0 = 0
    i1 = 1
    if a[0] > a[1]:
        if a[0] > a[2]:
            i0 = 1
            i1 = 2
    elif a[2] <= a[1]:
        i1 = 2
    p0 = lib.flat(v0, i0, i1)
    p1 = lib.flat(v1, i0, i1)
    p2 = lib.flat(v2, i0, i1)
    q0 = lib.flat(u0, i0, i1)
    q1 = lib.flat(u1, i0, i1)
    q2 = lib.flat(u2, i0, i1)
    hit = gk.max(gk.max(lib.edge_tri(p0, p1, q0, q1, q2), lib.edge_tri(p1, p2, q0, q1, q2)), lib.edge_tri(p2, p0, q0, q1, q2))
    return gk.max(hit, gk.max(lib.point_in_tri(p0, q0, q1, q2), lib.point_in_tri(q0, p0, p1, p2)))


def _interval(p: V, d: V) -> V5:
    """(a, b, c, x0, x1) of the division-free interval on the line of the two planes; x0 = x1 = 0 when the
    triangle lies in the other's plane (all distances zero)."""
    r = V5(F(0.0), F(0.0), F(0.0), F(0.0), F(0.0))
    if d[0] * d[1] > F(0.0):
        r = V5(p[2], (p[0] - p[2]) * d[2], (p[1] - p[2]) * d[2], d[2] - d[0], d[2] - d[1])
    elif d[0] * d[2] > F(0.0):
        r = V5(p[1], (p[0] - p[1]) * d[1], (p[2] - p[1]) * d[1], d[1] - d[0], d[1] - d[2])
    elif d[1] * d[2] > F(0.0) or d[0] != F(0.0):
        r = V5(p[0], (p[1] - p[0]) * d[0], (p[2] - p[0]) * d[0], d[0] - d[1], d[0] - d[2])
    elif d[1] != F(0.0):
        r = V5(p[1], (p[0] - p[1]) * d[1], (p[2] - p[1]) * d[1], d[1] - d[0], d[1] - d[2])
    elif d[2] != F(0.0):
        r = V5(p[2], (p[0] - p[2]) * d[2], (p[1] - p[2]) * d[2], d[2] - d[0], d[2] - d[1])
    return r


def _intersect_tri_tri(v0: V, v1: V, v2: V, u0: V, u1: V, u2: V) -> I:
    n1 = gk.cross(v1 - v0, v2 - v0)
    d1 = -gk.dot(n1, v0)
    du = V(lib.snap(gk.dot(n1, u0) + d1), lib.snap(gk.dot(n1, u1) + d1), lib.snap(gk.dot(n1, u2) + d1))
    hit = 1
    if du[0] * du[1] > F(0.0) and du[0] * du[2] > F(0.0):
        hit = 0
    n2 = gk.cross(u1 - u0, u2 - u0)
    d2 = -gk.dot(n2, u0)
    dv = V(lib.snap(gk.dot(n2, v0) + d2), lib.snap(gk.dot(n2, v1) + d2), lib.snap(gk.dot(n2, v2) + d2))
    if dv[0] * dv[1] > F(0.0) and dv[0] * dv[2] > F(0.0):
        hit = 0
    if hit == 1:
        dd = gk.abs(gk.cross(n1, n2))
        axis = 0
        if dd[1] > dd[0]:
            axis = 1
        if dd[2] > gk.max(dd[0], dd[1]):
            axis = 2
        vp = V(lib.pick(v0, axis), lib.pick(v1, axis), lib.pick(v2, axis))
        up = V(lib.pick(u0, axis), lib.pick(u1, axis), lib.pick(u2, axis))
        iv = lib.interval(vp, dv)
        iu = lib.interval(up, du)
        if (dv[0] == F(0.0) and dv[1] == F(0.0) and dv[2] == F(0.0)) or \
                (du[0] == F(0.0) and du[1] == F(0.0) and du[2] == F(0.0)):
            hit = lib.coplanar(n1, v0, v1, v2, u0, u1, u2)
        else:
            xx = iv[3] * iv[4]
            yy = iu[3] * iu[4]
            xxyy = xx * yy
            t = iv[0] * xxyy
            a0 = t + iv[1] * iv[4] * yy
            a1 = t + iv[2] * iv[3] * yy
            t = iu[0] * xxyy
            b0 = t + iu[1] * xx * iu[4]
            b1 = t + iu[2] * xx * iu[3]
            lo1 = gk.min(a0, a1)
            hi1 = gk.max(a0, a1)
            lo2 = gk.min(b0, b1)
            hi2 = gk.max(b0, b1)
            if hi1 < lo2 or hi2 < lo1:
                hit = 0
    return hit


for _fn in (_snap, _pick, _flat, _edge_edge, _edge_tri, _side, _point_in_tri, _coplanar, _interval, _intersect_tri_tri):
    setattr(lib, _fn.__name__.lstrip("_"), Func(_fn))
intersect_tri_tri = lib.intersect_tri_tri
