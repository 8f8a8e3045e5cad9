"""Quaternions (Warp's `quat`/`quatd`, components x, y, z, w): every builtin against independent float64
NumPy references (the vector form of the Hamilton product, Rodrigues rotation matrices, Rz·Ry·Rx for
roll/pitch/yaw), in float32 and float64 on every device; reverse and forward-mode derivatives against
central differences; host-side evaluation; misuse is a CompileError at the call."""


import numpy as np
import pytest

import gradkit as gk
from gradkit.conformance.references import ham, rotate
from tests.compile_errors import assert_compile_error
from tests.kernel_check import check

Q, V3, F = gk.array(dtype=gk.quatd), gk.array(dtype=gk.vec3d), gk.array(dtype=gk.float64)


# --------------------------------------------------------------------------- references

def rodrigues(axis, angle):
    k = axis / np.linalg.norm(axis)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def unit(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


# --------------------------------------------------------------------------- values

@gk.kernel
def quat_values(a: Q, b: Q, v: V3, ang: F, prod: Q, rot: V3, rinv: V3, mat: gk.array(dtype=gk.mat33d),
                inv: Q, aa: Q, rpy: Q, ident: Q):
    i = gk.tid()
    prod[i] = a[i] * b[i]
    rot[i] = gk.quat_rotate(a[i], v[i])
    rinv[i] = gk.quat_rotate_inv(a[i], v[i])
    mat[i] = gk.quat_to_matrix(a[i])
    inv[i] = gk.quat_inverse(a[i])
    aa[i] = gk.quat_from_axis_angle(v[i], ang[i])
    rpy[i] = gk.quat_rpy(ang[i], ang[i] * 0.5, v[i].z)
    ident[i] = gk.mul(gk.quat_identity(dtype=gk.float64), a[i])


@gk.kernel
def quat_values32(a: gk.array(dtype=gk.quat), b: gk.array(dtype=gk.quat), v: gk.array(dtype=gk.vec3),
                  prod: gk.array(dtype=gk.quat), rot: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    prod[i] = gk.mul(a[i], b[i])
    rot[i] = gk.quat_rotate(gk.quat_inverse(a[i]), v[i]) + gk.quat_to_matrix(b[i]) @ v[i]


def test_values_against_independent_references(device, rng):
    n = 6
    a, b = unit(rng, n), rng.normal(size=(n, 4))
    v, ang = rng.normal(size=(n, 3)), rng.uniform(-3, 3, n)
    arrs = [gk.array(a, dtype=gk.quatd, device=device), gk.array(b, dtype=gk.quatd, device=device),
            gk.array(v, dtype=gk.vec3d, device=device), gk.array(ang, dtype=gk.float64, device=device)]
    outs = [gk.zeros(n, dtype=t, device=device) for t in (gk.quatd, gk.vec3d, gk.vec3d, gk.mat33d, gk.quatd,
                                                          gk.quatd, gk.quatd, gk.quatd)]
    gk.launch(quat_values, n, inputs=arrs + outs, device=device)
    prod, rot, rinv, mat, inv, aa, rpy, ident = (o.numpy() for o in outs)
    tol = dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(prod, ham(a, b), **tol)
    np.testing.assert_allclose(ident, a, **tol)
    np.testing.assert_allclose(inv, a * [-1, -1, -1, 1], **tol)
    np.testing.assert_allclose(ham(a, inv), np.tile([0, 0, 0, 1.0], (n, 1)), **tol)
    for k in range(n):
        # a unit quaternion's rotation is the Rodrigues matrix of its axis and angle
        angle = 2 * np.arctan2(np.linalg.norm(a[k, :3]), a[k, 3])
        R = rodrigues(a[k, :3], angle)
        np.testing.assert_allclose(rot[k], R @ v[k], **tol)
        np.testing.assert_allclose(rinv[k], R.T @ v[k], **tol)
        np.testing.assert_allclose(mat[k], R, **tol)
        # from axis and angle: q = (axis sin(θ/2), cos(θ/2)) — for any axis; its rotation is Rodrigues' for a unit one
        np.testing.assert_allclose(aa[k], np.r_[v[k] * np.sin(ang[k] / 2), np.cos(ang[k] / 2)], **tol)
        # roll about x, then pitch about y, then yaw about z
        r, p, y = ang[k], ang[k] * 0.5, v[k, 2]
        want = rodrigues(np.array([0, 0, 1.0]), y) @ rodrigues(np.array([0, 1.0, 0]), p) @ \
            rodrigues(np.array([1.0, 0, 0]), r)
        np.testing.assert_allclose(np.linalg.norm(rpy[k]), 1.0, **tol)
        angle = 2 * np.arctan2(np.linalg.norm(rpy[k, :3]), rpy[k, 3])
        np.testing.assert_allclose(rodrigues(rpy[k, :3], angle), want, **tol)


def test_float32_values(device, rng):
    n = 5
    a, b, v = unit(rng, n).astype(np.float32), rng.normal(size=(n, 4)).astype(np.float32), \
        rng.normal(size=(n, 3)).astype(np.float32)
    prod, rot = gk.zeros(n, dtype=gk.quat, device=device), gk.zeros(n, dtype=gk.vec3, device=device)
    gk.launch(quat_values32, n, inputs=[gk.array(a, dtype=gk.quat, device=device), gk.array(b, dtype=gk.quat,
              device=device), gk.array(v, dtype=gk.vec3, device=device), prod, rot], device=device)
    a64, b64, v64 = (x.astype(np.float64) for x in (a, b, v))
    np.testing.assert_allclose(prod.numpy(), ham(a64, b64), rtol=1e-5, atol=1e-6)
    mats = np.stack([np.stack([rotate(b64[k], e) for e in np.eye(3)], 1) for k in range(n)])
    want = rotate(a64 * [-1, -1, -1, 1], v64) + np.einsum("kij,kj->ki", mats, v64)
    np.testing.assert_allclose(rot.numpy(), want, rtol=1e-5, atol=1e-5)
    assert prod.dtype is gk.quat and gk.quat.is_quat and not gk.vec4.is_quat


@gk.kernel
def axis_angle(q: Q, axis: V3, angle: F):
    i = gk.tid()
    ax, ang = gk.quat_to_axis_angle(q[i])
    axis[i] = ax
    angle[i] = ang


def test_axis_angle_round_trip(device, rng):
    n = 5
    q = unit(rng, n)
    q[0] = [0, 0, 0, 1]                             # the identity: axis (1, 0, 0), angle 0
    axis, angle = gk.zeros(n, dtype=gk.vec3d, device=device), gk.zeros(n, dtype=gk.float64, device=device)
    gk.launch(axis_angle, n, inputs=[gk.array(q, dtype=gk.quatd, device=device), axis, angle], device=device)
    np.testing.assert_allclose(axis.numpy()[0], [1, 0, 0])
    assert angle.numpy()[0] == 0
    for k in range(1, n):
        back = np.r_[axis.numpy()[k] * np.sin(angle.numpy()[k] / 2), np.cos(angle.numpy()[k] / 2)]
        np.testing.assert_allclose(back, q[k], rtol=1e-12, atol=1e-13)


# --------------------------------------------------------------------------- derivatives

@gk.kernel
def quat_chain(a: Q, b: Q, v: V3, ang: F, out: V3, q: Q):
    i = gk.tid()
    r = gk.quat_from_axis_angle(v[i], ang[i]) * a[i]
    c = gk.quat_rpy(ang[i], v[i].x, v[i].y) * gk.quat_inverse(b[i])
    out[i] = gk.quat_rotate(r, v[i]) + gk.quat_rotate_inv(c, v[i]) + gk.quat_to_matrix(a[i] * b[i]) @ v[i]
    ax, th = gk.quat_to_axis_angle(gk.normalize(b[i]))
    q[i] = r * c + gk.quatd(ax.x, ax.y, ax.z, th) * 0.5


def _chain_ref(a, b, v, ang, out, q):
    def from_axis_angle(axis, t):
        return np.concatenate([axis * np.sin(t / 2)[:, None], np.cos(t / 2)[:, None]], 1)

    def rpy(r, p, y):
        cy, sy, cr, sr, cp, sp = np.cos(y / 2), np.sin(y / 2), np.cos(r / 2), np.sin(r / 2), np.cos(p / 2), \
            np.sin(p / 2)
        return np.stack([cy * sr * cp - sy * cr * sp, cy * cr * sp + sy * sr * cp, sy * cr * cp - cy * sr * sp,
                         cy * cr * cp + sy * sr * sp], 1)
    conj = np.array([-1, -1, -1, 1.0])
    r = ham(from_axis_angle(v, ang), a)
    c = ham(rpy(ang, v[:, 0], v[:, 1]), b * conj)
    ab = ham(a, b)
    m_v = np.stack([rotate(ab, np.tile(e, (len(a), 1))) for e in np.eye(3)], 2)     # columns rotate the axes
    out = rotate(r, v) + rotate(c, v, -1.0) + np.einsum("kij,kj->ki", m_v, v)
    bn = b / np.linalg.norm(b, axis=1, keepdims=True)
    s = np.linalg.norm(bn[:, :3], axis=1)
    aa = np.concatenate([bn[:, :3] / s[:, None], 2 * np.arctan2(s, bn[:, 3])[:, None]], 1)
    return out, ham(r, c) + aa * 0.5


def test_gradients_reverse_and_forward_mode(device, rng):
    n = 4
    check(quat_chain, n, [rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.normal(size=(n, 3)),
                          rng.uniform(-2, 2, n), np.zeros((n, 3)), np.zeros((n, 4))],
          [gk.quatd, gk.quatd, gk.vec3d, gk.float64, gk.vec3d, gk.quatd], "iiiiww", _chain_ref, device, rng)


# --------------------------------------------------------------------------- host side and errors

def test_host_side():
    q = gk.quat(0.0, 0.0, np.sin(0.25), np.cos(0.25))
    assert q.dtype == np.float32 and q.shape == (4,)
    np.testing.assert_allclose(gk.quat_rotate(q, gk.vec3(1, 0, 0)), [np.cos(0.5), np.sin(0.5), 0], rtol=1e-6)
    np.testing.assert_allclose(gk.quat_mul(gk.quatd(1, 2, 3, 4), gk.quatd(5, 6, 7, 8)),
                               ham(np.array([1, 2, 3, 4.0]), np.array([5, 6, 7, 8.0])))
    np.testing.assert_array_equal(gk.quat_identity(dtype=gk.float64), [0, 0, 0, 1])
    assert gk.quaternion(gk.float64) is gk.quatd and "Hamilton" in gk.quat_mul.__doc__
    with pytest.raises(TypeError, match=r"quat_rotate\(\): v must be a 3-vector"):
        gk.quat_rotate(q, np.zeros(2, np.float32))


def times_vector(q: Q, v: V3):
    v[0] = q[0] * v[0]


def rotate_vec4(q: Q, v: gk.array(dtype=gk.vec4d)):
    v[0] = gk.quat_rotate(q[0], v[0])


def mixed_precision(q: Q, v: gk.array(dtype=gk.vec3)):
    v[0] = gk.quat_rotate(q[0], v[0])


def not_a_quat(v: gk.array(dtype=gk.vec4d)):
    v[0] = gk.quat_inverse(v[0])


def too_many(q: Q):
    q[0] = gk.quat_inverse(q[0], q[0])


def add_vec4(q: Q, v: gk.array(dtype=gk.vec4d)):
    q[0] = q[0] + v[0]


ERRORS = [
    (times_vector, "q[0] * v[0]", r"'mul' of quatd and vec3d: rotate vectors with gk.quat_rotate\(q, v\)"),
    (rotate_vec4, "gk.quat_rotate(q[0], v[0])", r"quat_rotate\(\): v must be a 3-vector, got vec4d"),
    (mixed_precision, "gk.quat_rotate(q[0], v[0])", r"v is vec3 but the quaternion holds float64"),
    (not_a_quat, "gk.quat_inverse(v[0])", r"quat_inverse\(\): q must be a quaternion \(gk.quat / gk.quatd\), "
                                          r"got vec4d"),
    (too_many, "gk.quat_inverse(q[0], q[0])", r"quat_inverse\(q\) takes 1 argument, got 2"),
    (add_vec4, "q[0] + v[0]", r"'add' of quatd and vec4d"),
]


@pytest.mark.parametrize("fn,snippet,message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_compile_errors(fn, snippet, message):
    assert_compile_error(fn, snippet, message)
