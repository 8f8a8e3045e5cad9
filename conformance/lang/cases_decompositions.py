"""Matrix decompositions in the language: gk.svd3 / gk.svd2 (tuple and Warp's out-argument form), gk.qr3,
gk.eig3 and gk.polar_decompose (3x3 and 2x2), against np.linalg with the conventions applied in
tests/ad/test_decompositions.py. Inputs are a fixed well-conditioned matrix plus a small random part, so
singular values and eigenvalues stay apart; outputs are ones a pair's shared sign does not change."""

import numpy as np

import gradkit as gk
from ..references import np_polar, np_qr, np_svd

from .harness import Case, In, Out, collect

M3, V3 = gk.array(dtype=gk.mat33d), gk.array(dtype=gk.vec3d)
M2, V2 = gk.array(dtype=gk.mat22d), gk.array(dtype=gk.vec2d)
N = 3
BASE_SVD, BASE_EIG, BASE_POLAR2 = np.diag([4.0, 2.0, -1.0]), np.diag([-1.5, 0.5, 2.0]), np.diag([2.0, 1.0])


def _each(fn, *arrays):
    outs = [fn(*xs) for xs in zip(*arrays)]
    return [np.stack([o[k] for o in outs]) for k in range(len(outs[0]))]


@gk.kernel
def svd3_tuple(A: M3, s: V3, X: M3, Y: M3):
    i = gk.tid()
    U, sg, V = gk.svd3(gk.mat33d(4.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, -1.0) + A[i] * 0.15)
    D = gk.mat33d(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)
    s[i] = sg
    X[i] = U @ D @ gk.transpose(V)
    Y[i] = U @ D @ gk.transpose(U) + V @ D @ gk.transpose(V)


def _svd3_ref(a, s, x, y):
    d = np.diag([1.0, 2.0, 3.0])

    def one(m):
        u, sg, v = np_svd(BASE_SVD + 0.15 * m)
        return sg, u @ d @ v.T, u @ d @ u.T + v @ d @ v.T
    return _each(one, a)


@gk.kernel
def svd_out_args(A: M3, B: M2, s: V3, t: V2, X: M3, Y: M2):
    i = gk.tid()
    U = gk.mat33d()
    sg = gk.vec3d()
    V = gk.mat33d()
    gk.svd3(gk.mat33d(4.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, -1.0) + A[i] * 0.15, U, sg, V)
    U2 = gk.mat22d()
    sg2 = gk.vec2d()
    V2_ = gk.mat22d()
    gk.svd2(gk.mat22d(2.0, 0.0, 0.0, 1.0) + B[i] * 0.2, U2, sg2, V2_)
    s[i] = sg
    t[i] = sg2
    X[i] = U @ gk.transpose(V)
    Y[i] = U2 @ gk.mat22d(1.0, 0.0, 0.0, 3.0) @ gk.transpose(V2_)


def _svd_out_ref(a, b, s, t, x, y):
    def one(m, n):
        u, sg, v = np_svd(BASE_SVD + 0.15 * m)
        u2, sg2, v2 = np_svd(BASE_POLAR2 + 0.2 * n)
        return sg, sg2, u @ v.T, u2 @ np.diag([1.0, 3.0]) @ v2.T
    return _each(one, a, b)


@gk.kernel
def qr3_case(A: M3, Q: M3, R: M3):
    i = gk.tid()
    q, r = gk.qr3(gk.identity(n=3, dtype=gk.float64) * 2.0 + A[i] * 0.4)
    Q[i] = q
    R[i] = r


def _qr3_ref(a, q, r):
    return _each(lambda m: np_qr(2.0 * np.eye(3) + 0.4 * m), a)


@gk.kernel
def eig3_case(A: M3, d: V3, Y: M3):
    i = gk.tid()
    Q, e = gk.eig3(gk.mat33d(-1.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 2.0) + A[i] * 0.2)
    d[i] = e
    Y[i] = Q @ gk.mat33d(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0) @ gk.transpose(Q)


def _eig3_ref(a, d, y):
    def one(m):
        b = BASE_EIG + 0.2 * m
        e, q = np.linalg.eigh((b + b.T) / 2)
        return e, q @ np.diag([1.0, 2.0, 3.0]) @ q.T
    return _each(one, a)


@gk.kernel
def polar_case(A: M3, B: M2, U: M3, P: M3, U2: M2, P2: M2):
    i = gk.tid()
    u, p = gk.polar_decompose(gk.mat33d(3.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, -1.0) + A[i] * 0.2)
    U[i] = u
    P[i] = p
    u2, p2 = gk.polar_decompose(gk.mat22d(2.0, 0.0, 0.0, 1.0) + B[i] * 0.3)
    U2[i] = u2
    P2[i] = p2


def _polar_ref(a, b, u, p, u2, p2):
    def one(m, n):
        return (*np_polar(np.diag([3.0, 2.0, -1.0]) + 0.2 * m), *np_polar(BASE_POLAR2 + 0.3 * n))
    return _each(one, a, b)


CASES = collect("decompositions", [
    Case("svd3", "`U, s, V = gk.svd3(A)`: Warp's signed SVD (rotations, the last singular value signed "
         "like det A)",
         svd3_tuple, N, [In((N, 3, 3), gk.mat33d), Out((N, 3), gk.vec3d), Out((N, 3, 3), gk.mat33d),
                         Out((N, 3, 3), gk.mat33d)], _svd3_ref),
    Case("svd_out_args", "Warp's out-argument form `gk.svd3(A, U, s, V)` and `gk.svd2(A, U, s, V)` "
         "(assigns locals)", svd_out_args, N,
         [In((N, 3, 3), gk.mat33d), In((N, 2, 2), gk.mat22d), Out((N, 3), gk.vec3d), Out((N, 2), gk.vec2d),
          Out((N, 3, 3), gk.mat33d), Out((N, 2, 2), gk.mat22d)], _svd_out_ref),
    Case("qr3", "`Q, R = gk.qr3(A)`: Q a rotation, R upper triangular (Gram-Schmidt)", qr3_case, N,
         [In((N, 3, 3), gk.mat33d), Out((N, 3, 3), gk.mat33d), Out((N, 3, 3), gk.mat33d)], _qr3_ref),
    Case("eig3", "`Q, d = gk.eig3(A)`: symmetric eigendecomposition, eigenvalues ascending", eig3_case, N,
         [In((N, 3, 3), gk.mat33d), Out((N, 3), gk.vec3d), Out((N, 3, 3), gk.mat33d)], _eig3_ref),
    Case("polar_decompose", "`U, P = gk.polar_decompose(A)` for 3x3 and 2x2: rotation U, symmetric P "
         "(Taichi)",
         polar_case, N, [In((N, 3, 3), gk.mat33d), In((N, 2, 2), gk.mat22d), Out((N, 3, 3), gk.mat33d),
                         Out((N, 3, 3), gk.mat33d), Out((N, 2, 2), gk.mat22d), Out((N, 2, 2), gk.mat22d)],
         _polar_ref),
])
