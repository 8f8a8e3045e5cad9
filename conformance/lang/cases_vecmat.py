"""Vectors and matrices in the language: construction of every size, indexing, `.x/.y/.z/.w`, component
writes on locals, arithmetic, `m @ v`, the linear-algebra builtins, and vector/matrix array dtypes."""

import numpy as np

import gradkit as gk

from .harness import Case, In, Out, collect

A1 = gk.array(dtype=gk.float64)
A2 = gk.array(dtype=gk.float64, ndim=2)
N = 4


@gk.kernel
def construct(a: A2, y: A2):
    i = gk.tid()
    u = a[i, 0]
    v = a[i, 1]
    p = gk.vec2d(u, v)
    q = gk.vec3d(u, v, u * v)
    r = gk.vec4d(u, 1.0, v, 2.0 * u)
    y[i, 0] = p[0] + p.y * 2.0
    y[i, 1] = q.x * q[1] + q.z
    y[i, 2] = r.x + r.y + r[2] * r.w
    m2 = gk.mat22d(u, v, 2.0, u * u)
    m3 = gk.mat33d(u, 0.0, v, 1.0, u, 2.0, v, v, u)
    m4 = gk.mat44d(u, 1.0, 0.0, 0.0, 0.0, v, 1.0, 0.0, 0.0, 0.0, u * v, 1.0, 2.0, 0.0, 0.0, v)
    y[i, 3] = m2[0, 1] * m2[1, 1] + m2[1][0]
    y[i, 4] = m3[0, 2] * m3[2, 1] + m3[1].y
    y[i, 5] = m4[2, 2] + m4[3, 0] * m4[3, 3] + m4[1].y


def _construct_ref(a, y):
    u, v = a[:, 0], a[:, 1]
    return np.stack([u + 2 * v, u * v + u * v, u + 1 + v * 2 * u,
                     v * u * u + 2, v * v + u, u * v + 2 * v + v], 1)


@gk.kernel
def component_writes(a: A2, y: A2):
    i = gk.tid()
    u = a[i, 0]
    v = a[i, 1]
    p = gk.vec3d(1.0, 2.0, 3.0)
    p[0] = u
    p.y = v * u
    p.z += u
    q = gk.vec4d(0.0, 0.0, 0.0, 0.0)
    q.w = v
    q[1] = p.y
    m = gk.mat33d(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    m[0, 1] = u
    m[2, 2] = m[2, 2] * v
    for k in range(3):
        m[k, 0] = m[k, 0] + p[k]
        p[k] = p[k] * v
    y[i, 0] = p.x + p.y + p.z
    y[i, 1] = q.w * q.y
    y[i, 2] = m[0, 0] + m[0, 1] * m[1, 0] + m[2, 2] + m[2, 0]


def _writes_ref(a, y):
    u, v = a[:, 0], a[:, 1]
    p = [u, v * u, 3 + u]
    m00, m10, m20 = 1 + p[0], p[1], p[2]
    return np.stack([(p[0] + p[1] + p[2]) * v, v * v * u, m00 + u * m10 + v + m20], 1)


@gk.kernel
def vec_arith(a: gk.array(dtype=gk.vec3d), b: gk.array(dtype=gk.vec3d), s: A1, m: gk.array(dtype=gk.mat33d),
              yv: gk.array(dtype=gk.vec3d, ndim=2), ym: gk.array(dtype=gk.mat33d, ndim=2)):
    i = gk.tid()
    u = a[i]
    w = b[i]
    yv[i, 0] = u + w * s[i] - u / 2.0
    yv[i, 1] = -u * 3.0 + 2.0 * w
    yv[i, 2] = m[i] @ u
    ym[i, 0] = m[i] @ m[i] + m[i] * s[i]
    ym[i, 1] = -m[i] - m[i] / 4.0


def _vec_arith_ref(a, b, s, m, yv, ym):
    yv = np.stack([a + b * s[:, None] - a / 2, -3 * a + 2 * b, np.einsum("nij,nj->ni", m, a)], 1)
    ym = np.stack([m @ m + m * s[:, None, None], -m - m / 4], 1)
    return yv, ym


VEC_ARGS = [In((N, 3), gk.vec3d), In((N, 3), gk.vec3d), In((N,)), In((N, 3, 3), gk.mat33d),
            Out((N, 3, 3), gk.vec3d), Out((N, 2, 3, 3), gk.mat33d)]


@gk.kernel
def linalg(a: gk.array(dtype=gk.vec3d), b: gk.array(dtype=gk.vec3d), m: gk.array(dtype=gk.mat33d), y: A2):
    i = gk.tid()
    u = a[i]
    w = b[i]
    y[i, 0] = gk.dot(u, w)
    c = gk.cross(u, w)
    y[i, 1] = c.x
    y[i, 2] = c.y
    y[i, 3] = c.z
    y[i, 4] = gk.length(u)
    y[i, 5] = gk.length_sq(w)
    nu = gk.normalize(u)
    y[i, 6] = nu.x + 2.0 * nu.y + 3.0 * nu.z
    o = gk.outer(u, w)
    y[i, 7] = o[0, 1] + 2.0 * o[2, 0] + o[1, 1]
    t = gk.transpose(m[i])
    y[i, 8] = t[0, 1] + 2.0 * t[1, 2]
    y[i, 9] = gk.determinant(m[i])
    inv = gk.inverse(m[i])
    y[i, 10] = inv[0, 0] + 2.0 * inv[1, 2] + 3.0 * inv[2, 1]
    y[i, 11] = gk.trace(m[i])
    e = gk.identity(n=3, dtype=gk.float64)
    y[i, 12] = gk.trace(e * u.x + m[i]) + e[0, 1]
    y[i, 13] = gk.abs(u).x + gk.min(u, w).y + gk.max(u, w).z


def _linalg_ref(a, b, m, y):
    c = np.cross(a, b)
    nu = a / np.linalg.norm(a, axis=1, keepdims=True)
    inv = np.linalg.inv(m)
    tr = np.trace(m, axis1=1, axis2=2)
    return np.stack([np.sum(a * b, 1), c[:, 0], c[:, 1], c[:, 2], np.linalg.norm(a, axis=1), np.sum(b * b, 1),
                     nu @ [1, 2, 3], a[:, 0] * b[:, 1] + 2 * a[:, 2] * b[:, 0] + a[:, 1] * b[:, 1],
                     m[:, 1, 0] + 2 * m[:, 2, 1], np.linalg.det(m),
                     inv[:, 0, 0] + 2 * inv[:, 1, 2] + 3 * inv[:, 2, 1], tr, 3 * a[:, 0] + tr,
                     np.abs(a[:, 0]) + np.minimum(a, b)[:, 1] + np.maximum(a, b)[:, 2]], 1)


LINALG_ARGS = [In((N, 3), gk.vec3d), In((N, 3), gk.vec3d),
               In((N, 3, 3), gk.mat33d, lo=np.eye(3) * 2 - 0.5, hi=np.eye(3) * 2 + 0.5), Out((N, 14))]
LINALG_COLUMNS = {"dot": [0], "cross": [1, 2, 3], "length": [4], "length_sq": [5], "normalize": [6],
                  "outer": [7], "transpose": [8], "determinant": [9], "inverse": [10], "trace": [11],
                  "identity": [12], "vec_abs_min_max": [13]}


@gk.kernel
def vec32(a: gk.array(dtype=gk.vec3), m: gk.array(dtype=gk.mat33), y: gk.array(dtype=gk.vec3),
          s: gk.array(dtype=float)):
    i = gk.tid()
    u = a[i]
    r = m[i] @ u + gk.cross(u, gk.vec3(1.0, 2.0, 0.5))
    r.y = r.y * u.x
    y[i] = r
    p = gk.vec2(u.x, u.z)
    q = gk.vec4(u.y, 1.0, p.y, 2.0)
    m2 = gk.mat22(u.x, 1.0, 2.0, u.y)
    m4 = gk.mat44(q.x, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, q.z)
    s[i] = gk.dot(r, u) + gk.length(u) + gk.determinant(m[i]) + p.x * q.w + m2[1, 1] * gk.determinant(m4)


def _vec32_ref(a, m, y, s):
    r = np.einsum("nij,nj->ni", m, a) + np.cross(a, [1.0, 2.0, 0.5])
    r[:, 1] *= a[:, 0]
    return r, (np.sum(r * a, 1) + np.linalg.norm(a, axis=1) + np.linalg.det(m) + 2 * a[:, 0]
               + a[:, 1] * a[:, 1] * a[:, 2])


@gk.kernel
def small_mats(m2: gk.array(dtype=gk.mat22d), m4: gk.array(dtype=gk.mat44d), v4: gk.array(dtype=gk.vec4d),
               y: A2, yv: gk.array(dtype=gk.vec4d)):
    i = gk.tid()
    a = m2[i]
    b = m4[i]
    y[i, 0] = gk.determinant(a) + gk.trace(gk.inverse(a))
    y[i, 1] = gk.determinant(b) + gk.inverse(b)[1, 2]
    yv[i] = b @ v4[i] + gk.transpose(b) @ v4[i] * 0.5
    y[i, 2] = gk.dot(v4[i], v4[i]) + gk.vec2d(a[0, 0], a[1, 0]).y


def _small_mats_ref(m2, m4, v4, y, yv):
    y = np.stack([np.linalg.det(m2) + np.trace(np.linalg.inv(m2), axis1=1, axis2=2),
                  np.linalg.det(m4) + np.linalg.inv(m4)[:, 1, 2], np.sum(v4 * v4, 1) + m2[:, 1, 0]], 1)
    return y, np.einsum("nij,nj->ni", m4, v4) + 0.5 * np.einsum("nji,nj->ni", m4, v4)


CASES = collect("vecmat", [
    Case("vec_construct_index", "`gk.vec2d/3d/4d(...)`, indexing `v[k]`, `.x/.y/.z/.w`", construct, N,
         [In((N, 2)), Out((N, 6))], _construct_ref, pick={0: np.s_[:, 0:3]}),
    Case("mat_construct_index", "`gk.mat22d/33d/44d(...)`, `m[i, j]`, row `m[i]` and its `.y`", construct, N,
         [In((N, 2)), Out((N, 6))], _construct_ref, pick={0: np.s_[:, 3:6]}),
    Case("local_component_writes", "`v[0] = `, `v.y = `, `v.z += `, `m[i, j] = ` on locals, also in a loop",
         component_writes, N, [In((N, 2)), Out((N, 3))], _writes_ref),
    Case("vec_mat_arith", "vector/matrix `+ - * /`, scalar products, unary `-`", vec_arith, N, VEC_ARGS,
         _vec_arith_ref, pick={0: np.s_[:, 0:2], 1: np.s_[:, 1]}),
    Case("matmul", "`m @ v` and `m @ m`", vec_arith, N, VEC_ARGS, _vec_arith_ref,
         pick={0: np.s_[:, 2], 1: np.s_[:, 0]}),
    *[Case(name, f"`gk.{name}`" if name != "vec_abs_min_max" else "`gk.abs/min/max` on vectors", linalg, N,
           LINALG_ARGS, _linalg_ref, pick={0: np.s_[:, cols]}) for name, cols in LINALG_COLUMNS.items()],
    Case("mat22_mat44_vec4", "2x2 and 4x4 matrices (`determinant`, `inverse`, `transpose`, `@`), vec4d "
         "arrays",
         small_mats, N, [In((N, 2, 2), gk.mat22d, lo=np.eye(2) * 2 - 0.5, hi=np.eye(2) * 2 + 0.5),
                         In((N, 4, 4), gk.mat44d, lo=np.eye(4) * 2 - 0.5, hi=np.eye(4) * 2 + 0.5),
                         In((N, 4), gk.vec4d), Out((N, 3)), Out((N, 4), gk.vec4d)], _small_mats_ref),
    Case("float32_vec_mat", "float32: `vec2/3/4`, `mat22/33/44` construction, `vec3`/`mat33` arrays, `@`, "
         "`cross`, component write, `determinant`", vec32,
         N, [In((N, 3), gk.vec3), In((N, 3, 3), gk.mat33, lo=np.eye(3) - 0.5, hi=np.eye(3) + 0.5),
             Out((N, 3), gk.vec3), Out((N,), gk.float32)], _vec32_ref, eps=1e-5),
])
