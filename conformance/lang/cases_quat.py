"""Quaternions in the language (Warp's `quat`/`quatd`): the Hamilton product `q * r`, rotations, the
rotation matrix, inverse, and construction from axis-angle and roll/pitch/yaw — with NumPy references
written independently in tests/core/test_quat.py."""

import numpy as np

import gradkit as gk
from ..references import ham, rotate

from .harness import Case, In, Out, collect

Q, V3, F = gk.array(dtype=gk.quatd), gk.array(dtype=gk.vec3d), gk.array(dtype=gk.float64)


@gk.kernel
def quat_products(a: Q, b: Q, v: V3, q: Q, r: V3):
    i = gk.tid()
    q[i] = a[i] * b[i] + gk.quat_inverse(a[i]) * 0.5
    r[i] = gk.quat_rotate(a[i], v[i]) - gk.quat_rotate_inv(b[i], v[i]) + gk.quat_to_matrix(a[i]) @ v[i]


def _products_ref(a, b, v, q, r):
    m = np.stack([rotate(a, np.tile(e, (len(a), 1))) for e in np.eye(3)], 2)
    return ham(a, b) + a * [-0.5, -0.5, -0.5, 0.5], rotate(a, v) - rotate(b, v, -1.0) + np.einsum("kij,kj->ki", m, v)


@gk.kernel
def quat_builders(v: V3, t: F, q: Q):
    i = gk.tid()
    q[i] = gk.quat_from_axis_angle(v[i], t[i]) * gk.quat_rpy(t[i], v[i].x, v[i].z) + gk.quat_identity(
        dtype=gk.float64)


def _builders_ref(v, t, q):
    h = lambda x: x / 2  # noqa: E731
    aa = np.concatenate([v * np.sin(h(t))[:, None], np.cos(h(t))[:, None]], 1)
    r, p, y = h(t), h(v[:, 0]), h(v[:, 2])
    rpy = np.stack([np.cos(y) * np.sin(r) * np.cos(p) - np.sin(y) * np.cos(r) * np.sin(p),
                    np.cos(y) * np.cos(r) * np.sin(p) + np.sin(y) * np.sin(r) * np.cos(p),
                    np.sin(y) * np.cos(r) * np.cos(p) - np.cos(y) * np.sin(r) * np.sin(p),
                    np.cos(y) * np.cos(r) * np.cos(p) + np.sin(y) * np.sin(r) * np.sin(p)], 1)
    return ham(aa, rpy) + [0, 0, 0, 1.0]


CASES = collect("quaternions", [
    Case("quat_products", "`q * r` (Hamilton), quat_inverse, quat_rotate, quat_rotate_inv, quat_to_matrix",
         quat_products, 4, [In((4, 4), gk.quatd), In((4, 4), gk.quatd), In((4, 3), gk.vec3d), Out((4, 4), gk.quatd),
                            Out((4, 3), gk.vec3d)], _products_ref),
    Case("quat_builders", "quat_from_axis_angle, quat_rpy, quat_identity", quat_builders, 4,
         [In((4, 3), gk.vec3d), In((4,), lo=-3.0, hi=3.0), Out((4, 4), gk.quatd)], _builders_ref),
])
