"""Quaternions with Warp's semantics and component order (x, y, z, w): products, rotations, conversions.
Each is a macro (see core/library/macros.py): written once from scalar components, it runs in kernels
on every backend, differentiates in both modes, and evaluates on the host with NumPy."""

from __future__ import annotations

from .. import types as T
from .macros import macro


def _q(E, q, fn: str, what: str = "q"):
    """q's components, checking it is a quaternion; returns (scalar type, [x, y, z, w])."""
    t = E.type_of(q)
    if not getattr(t, "is_quat", False):
        E.fail(f"{what} must be a quaternion (gk.quat / gk.quatd), got {t.name}")
    return t.scalar, E.comps(q)


def _v3(E, v, s, what: str = "v"):
    t = E.type_of(v)
    if not (t.is_vector and not t.is_quat and t.length == 3):
        E.fail(f"{what} must be a 3-vector, got {t.name}")
    if t.scalar is not s:
        E.fail(f"{what} is {t.name} but the quaternion holds {s.name}: use vectors of one precision")
    return E.comps(v)


def _cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def hamilton(a, b) -> list:
    """Components of the Hamilton product a·b of component lists (x, y, z, w)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return [aw * bx + bw * ax + ay * bz - by * az,
            aw * by + bw * ay + az * bx - bz * ax,
            aw * bz + bw * az + ax * by - bx * ay,
            aw * bw - ax * bx - ay * by - az * bz]


def _rotate(E, q, v, sign):
    s, (x, y, z, w) = _q(E, q, "quat_rotate")
    p = _v3(E, v, s)
    qv = [x, y, z]
    c = w * w * 2.0 - 1.0
    d = (x * p[0] + y * p[1] + z * p[2]) * 2.0
    cr = _cross(qv, p)
    return E.make(T.vector(3, s), [p[k] * c + qv[k] * d + cr[k] * w * (2.0 * sign) for k in range(3)])


@macro("quat_mul", "the Hamilton product of two quaternions (also `q * r` and gk.mul(q, r))")
def quat_mul(E, a, b):
    s, qa = _q(E, a, "quat_mul", "a")
    t, qb = _q(E, b, "quat_mul", "b")
    if s is not t:
        E.fail(f"quaternions of different precision: {E.type_of(a).name} and {E.type_of(b).name}")
    return E.make(T.quaternion(s), hamilton(qa, qb))


@macro("quat_identity", "the identity rotation (0, 0, 0, 1); quat_identity(dtype=gk.float64) for a quatd")
def quat_identity(E, dtype=T.float32):
    t = T.quaternion(dtype)
    zero, one = E.const(0.0, t), E.const(1.0, t)
    return E.make(t, [zero, zero, zero, one])


@macro("quat_from_axis_angle", "the rotation by `angle` radians about `axis` (a unit 3-vector): "
                               "(axis·sin(angle/2), cos(angle/2))")
def quat_from_axis_angle(E, axis, angle):
    t = E.type_of(axis)
    if not (t.is_vector and t.length == 3 and t.scalar.is_float):
        E.fail(f"axis must be a float 3-vector, got {t.name}")
    s = t.scalar
    half = E.scalar(angle, s) * 0.5
    sh = E.sin(half)
    a = E.comps(axis)
    return E.make(T.quaternion(s), [a[0] * sh, a[1] * sh, a[2] * sh, E.cos(half)])


@macro("quat_rpy", "the rotation of roll (about x), pitch (about y) and yaw (about z) radians, "
                   "applied in the order roll, pitch, yaw (Warp's quat_rpy)")
def quat_rpy(E, roll, pitch, yaw):
    s = next((E.type_of(v) for v in (roll, pitch, yaw) if not isinstance(v, (int, float))), T.float32)
    if not (s.is_scalar and s.is_float):
        E.fail(f"roll, pitch and yaw must be float scalars, got {s.name}")
    r, p, y = (E.scalar(v, s) * 0.5 for v in (roll, pitch, yaw))
    cy, sy, cr, sr, cp, sp = E.cos(y), E.sin(y), E.cos(r), E.sin(r), E.cos(p), E.sin(p)
    return E.make(T.quaternion(s), [cy * sr * cp - sy * cr * sp,
                                    cy * cr * sp + sy * sr * cp,
                                    sy * cr * cp - cy * sr * sp,
                                    cy * cr * cp + sy * sr * sp])


@macro("quat_inverse", "the inverse of a unit quaternion: its conjugate (-x, -y, -z, w)")
def quat_inverse(E, q):
    s, (x, y, z, w) = _q(E, q, "quat_inverse")
    return E.make(T.quaternion(s), [-x, -y, -z, w])


@macro("quat_rotate", "v rotated by the unit quaternion q (q v q⁻¹)")
def quat_rotate(E, q, v):
    return _rotate(E, q, v, 1.0)


@macro("quat_rotate_inv", "v rotated by the inverse of the unit quaternion q (q⁻¹ v q)")
def quat_rotate_inv(E, q, v):
    return _rotate(E, q, v, -1.0)


@macro("quat_to_matrix", "the 3x3 rotation matrix of the unit quaternion q: column k is quat_rotate(q, e_k), "
                         "as in Warp (so M @ v is quat_rotate(q, v) for any q)")
def quat_to_matrix(E, q):
    s, (x, y, z, w) = _q(E, q, "quat_to_matrix")
    qv, c = [x, y, z], w * w * 2.0 - 1.0
    zero = E.const(0.0, s)
    crosses = [[zero, z, -y], [-z, zero, x], [y, -x, zero]]      # qv × e_k, per column k
    cols = [[(c if i == k else zero) + qv[i] * qv[k] * 2.0 + crosses[k][i] * w * 2.0 for i in range(3)]
            for k in range(3)]
    return E.make(T.matrix((3, 3), s), [cols[k][i] for i in range(3) for k in range(3)])


@macro("quat_to_axis_angle", "(axis, angle) of the unit quaternion q: angle = 2·atan2(|v|, w), axis = v/|v| "
                             "((1, 0, 0) for the identity, with zero gradient there)")
def quat_to_axis_angle(E, q):
    s, (x, y, z, w) = _q(E, q, "quat_to_axis_angle")
    n = E.sqrt(x * x + y * y + z * z)
    zero, one = E.const(0.0, s), E.const(1.0, s)
    moving = E.gt(n, zero)
    safe = E.where(moving, n, one)            # never divides by zero, so the unused side has no NaN gradient
    axis = [E.where(moving, c / safe, d) for c, d in zip((x, y, z), (one, zero, zero))]
    return E.make(T.vector(3, s), axis), E.atan2(n, w) * 2.0
