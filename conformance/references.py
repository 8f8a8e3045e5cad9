"""Independent float64 NumPy references the conformance suite (and gradkit's own tests) check kernels
against: Warp's conventions for decompositions and quaternions, and the PCG hash behind gk.randf."""

from __future__ import annotations

import numpy as np

M = 0xFFFFFFFF      # 32-bit mask of the PCG hash


def np_svd(a):
    """Warp's convention: rotations U, V; |sigma| decreasing; the last sigma carries det(A)'s sign."""
    u, s, vt = np.linalg.svd(a)
    v = vt.T.copy()
    for m in (u, v):
        if np.linalg.det(m) < 0:
            m[:, -1] *= -1
            s[-1] *= -1
    return u, s, v


def np_qr(a):
    """Q a rotation, R upper triangular with a non-negative diagonal but for the last entry (Warp's)."""
    q, r = np.linalg.qr(a)
    sg = np.where(np.diag(r) < 0, -1.0, 1.0)
    q, r = q * sg, r * sg[:, None]
    if np.linalg.det(q) < 0:
        q[:, -1] *= -1
        r[-1] *= -1
    return q, r


def np_polar(a):
    """A = R P: R the rotation of the signed SVD, P symmetric."""
    u, s, v = np_svd(a)
    r = u @ v.T
    p = r.T @ a
    return r, (p + p.T) / 2


def ham(a, b):
    """Hamilton product in vector form: (a_w b_v + b_w a_v + a_v × b_v, a_w b_w - a_v · b_v)."""
    av, aw, bv, bw = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv), aw * bw - (av * bv).sum(-1, keepdims=True)], -1)


def rotate(q, v, sign=1.0):
    """Warp's rotation formula for any q: v(2w²-1) + 2(q_v·v) q_v ± 2w (q_v × v)."""
    qv, w = q[..., :3], q[..., 3:]
    return v * (2 * w * w - 1) + 2 * (qv * v).sum(-1, keepdims=True) * qv + sign * 2 * w * np.cross(qv, v)


def pcg(s: int) -> int:
    """The 32-bit PCG hash gk.rand_init / gk.randf advance their state with."""
    b = (s * 747796405 + 2891336453) & M
    c = (((b >> ((b >> 28) + 4)) ^ b) * 277803737) & M
    return ((c >> 22) ^ c) & M
