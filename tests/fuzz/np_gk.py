"""`gk` as plain Python + NumPy float64: the fuzzer's independent reference executes the very source of a
generated kernel with this module bound to the name `gk`, thread by thread (`launch` runs threads in order).

Values: scalars are np.float64 / Python int (int arithmetic, `//` and `%` are Python's); vectors and matrices
are `Val` arrays with value semantics (indexing returns copies, as gradkit's value types do); arrays of
vector/matrix dtype are `VecArray`s whose elements are read as copies. Atomics are plain read-modify-writes
(threads run one after another).
"""

from __future__ import annotations

import builtins
import itertools
import math

import numpy as np

_state = {"tid": 0}


# ----------------------------------------------------------------------------- value types
class Val(np.ndarray):
    """A float64 vector/matrix value: indexing yields copies; `.x/.y/.z/.w` read and write components."""

    def __getitem__(self, key):
        r = super().__getitem__(key)
        return r.copy() if isinstance(r, np.ndarray) else np.float64(r)

    def __setitem__(self, key, value):
        self.view(np.ndarray)[key] = value      # (ndarray's own row assignment goes through __getitem__)

    def _comp(k):
        return property(lambda s: np.float64(s.view(np.ndarray)[k]), lambda s, v: s.__setitem__(k, v))

    x, y, z, w = _comp(0), _comp(1), _comp(2), _comp(3)
    del _comp


def _val(a) -> Val:
    return np.array(a, dtype=np.float64).view(Val)


class _ValueType:
    """gk.vec3d / gk.mat22d ...: a constructor from components (row-major for matrices)."""

    def __init__(self, shape):
        self.shape = shape

    def __call__(self, *comps):
        if not comps:
            return _val(np.zeros(self.shape))
        return _val(np.array([np.float64(c) for c in comps]).reshape(self.shape))


def struct(cls):
    """@gk.struct: a class whose instances start with every field zero (a float64, or a zero Val)."""
    fields = {name: (ann.shape if isinstance(ann, _ValueType) else None) for name, ann in cls.__annotations__.items()}

    def __init__(self):
        for name, shape in fields.items():
            setattr(self, name, np.float64(0.0) if shape is None else _val(np.zeros(shape)))
    return type(cls.__name__, (), {"__init__": __init__})


vec2d, vec3d, vec4d = _ValueType((2,)), _ValueType((3,)), _ValueType((4,))
mat22d, mat33d, mat44d = _ValueType((2, 2)), _ValueType((3, 3)), _ValueType((4, 4))
VALUE_TYPES = {"vec2d": vec2d, "vec3d": vec3d, "vec4d": vec4d, "mat22d": mat22d, "mat33d": mat33d,
               "mat44d": mat44d}


class VecArray:
    """An array whose dtype is a vector/matrix: `a[i]` returns a copy (a value), `a[i] = v` stores."""

    def __init__(self, data: np.ndarray, elem_ndim: int):
        self.data, self.elem_ndim = data, elem_ndim
        self.shape = data.shape[:data.ndim - elem_ndim]

    def __len__(self):
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        return self.data

    def __getitem__(self, key):
        nkey = len(key) if isinstance(key, tuple) else 1
        if nkey < len(self.shape):          # a sub-array view x[i] of an n-D array
            return VecArray(self.data[key], self.elem_ndim)
        return _val(self.data[key])

    def __setitem__(self, key, value):
        self.data[key] = value


# ----------------------------------------------------------------------------- types and annotations
def float64(x):
    return np.float64(x)


def int32(x):
    return int(x)       # float -> int truncates toward zero, as in C, Warp and gradkit


def array(dtype=None, ndim=1, **_):
    return ("array", dtype, ndim)


float32 = float64       # only used in annotations/casts of values that are float64 in the reference


def static(x):
    return x


# ----------------------------------------------------------------------------- kernels and functions
class _Kernel:
    def __init__(self, fn):
        self.fn, self.__name__ = fn, fn.__name__


def kernel(fn=None, **_):
    return _Kernel(fn) if fn is not None else _Kernel


def _copy_values(v):
    if isinstance(v, Val):              # arrays passed to a function stay shared (they are references)
        return _val(v)
    if isinstance(v, tuple):
        return tuple(_copy_values(e) for e in v)
    return v


def func(fn):
    """Arguments and results are values: copy vectors/matrices so that callee and caller never alias."""
    def call(*args):
        return _copy_values(fn(*[_copy_values(a) for a in args]))
    call.__name__ = fn.__name__
    return call


def tid():
    return _state["tid"]


def launch(k: _Kernel, dim, args) -> None:
    """Run `k` for every thread in order (dim: an int, or a tuple for a multi-dimensional launch)."""
    for t in (range(dim) if isinstance(dim, int) else itertools.product(*map(range, dim))):
        _state["tid"] = t
        k.fn(*args)


# ----------------------------------------------------------------------------- scalar builtins
def _ew(f):
    def g(*a):
        r = f(*a)
        return _val(r) if isinstance(r, np.ndarray) and r.ndim else np.float64(r)
    return g


sin, cos, tan, asin, acos, atan, atan2 = map(_ew, (np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan,
                                                   np.arctan2))
sinh, cosh, tanh, exp, log, log2, log10, sqrt = map(_ew, (np.sinh, np.cosh, np.tanh, np.exp, np.log, np.log2,
                                                          np.log10, np.sqrt))
pow, floor, ceil = _ew(np.power), _ew(np.floor), _ew(np.ceil)
erf = _ew(np.vectorize(math.erf, otypes=[float]))
rsqrt = _ew(lambda x: 1.0 / np.sqrt(x))


def _is_int(*a):
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in a)


def abs(x):
    return builtins.abs(x) if _is_int(x) else _ew(np.abs)(x)


def sign(x):
    return (x > 0) - (x < 0) if _is_int(x) else _ew(np.sign)(x)


def min(a, b):
    return builtins.min(a, b) if _is_int(a, b) else _ew(np.minimum)(a, b)


def max(a, b):
    return builtins.max(a, b) if _is_int(a, b) else _ew(np.maximum)(a, b)


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


def round(x):
    """Round half away from zero (C round), not NumPy's half to even."""
    return _ew(lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5))(x)


def where(c, a, b):
    if isinstance(a, np.ndarray):
        return _val(a if c else b)
    return a if c else b


def select(c, if_false, if_true):
    """Warp's argument order: select(cond, value_if_false, value_if_true)."""
    return where(c, if_true, if_false)


# ----------------------------------------------------------------------------- vectors and matrices
def dot(a, b):
    return np.float64(np.dot(a, b))


def cross(a, b):
    return _val(np.cross(a, b))


def length_sq(a):
    return np.float64(np.dot(a, a))


def length(a):
    return np.float64(np.sqrt(np.dot(a, a)))


def normalize(a):
    n = length(a)
    return _val(a / n if n > 0 else np.zeros_like(a))


def outer(a, b):
    return _val(np.outer(a, b))


def transpose(m):
    return _val(np.asarray(m).T)


def determinant(m):
    return np.float64(np.linalg.det(np.asarray(m)))


def inverse(m):
    try:
        return _val(np.linalg.inv(np.asarray(m)))
    except np.linalg.LinAlgError:       # singular: a non-finite reference, which the checker discards
        return _val(np.full(np.shape(m), np.nan))


def trace(m):
    return np.float64(np.trace(np.asarray(m)))


def identity(n, dtype=None):
    return _val(np.eye(n))


# ----------------------------------------------------------------------------- quaternions
class Quat(Val):
    """A float64 quaternion (x, y, z, w); `q * r` of two quaternions is the Hamilton product."""

    def __mul__(self, other):
        if isinstance(other, Quat):
            return _hamilton(self, other)
        return super().__mul__(other)


def _quat(a) -> Quat:
    return np.array(a, dtype=np.float64).view(Quat)


def _hamilton(a, b) -> Quat:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    av, aw, bv, bw = a[:3], a[3], b[:3], b[3]
    return _quat(np.r_[aw * bv + bw * av + np.cross(av, bv), aw * bw - av @ bv])


def quat_from_axis_angle(axis, angle):
    return _quat(np.r_[np.asarray(axis, dtype=np.float64) * math.sin(angle / 2), math.cos(angle / 2)])


def quat_rpy(roll, pitch, yaw):
    """Roll about x, then pitch about y, then yaw about z: q_yaw q_pitch q_roll."""
    e = np.eye(3)
    return _hamilton(_hamilton(quat_from_axis_angle(e[2], yaw), quat_from_axis_angle(e[1], pitch)),
                     quat_from_axis_angle(e[0], roll))


def quat_inverse(q):
    q = np.asarray(q, dtype=np.float64)
    return _quat(np.r_[-q[:3], q[3]] / (q @ q))


def quat_rotate(q, v):
    """The vector part of q (v, 0) q⁻¹."""
    return _val(np.asarray(_hamilton(_hamilton(q, np.r_[np.asarray(v, dtype=np.float64), 0.0]),
                                     quat_inverse(q)))[:3])


def quat_rotate_inv(q, v):
    return quat_rotate(quat_inverse(q), v)


def quat_to_matrix(q):
    """The rotation matrix whose columns are the rotated axes."""
    return _val(np.stack([np.asarray(quat_rotate(q, e)) for e in np.eye(3)], axis=1))


def mul(a, b):
    return _val(np.asarray(a) @ np.asarray(b))


# ----------------------------------------------------------------------------- atomics (threads run in order)
def atomic_add(arr, *args):
    *idx, v = args
    old = arr[tuple(idx)]
    arr[tuple(idx)] = old + v
    return old


def atomic_sub(arr, *args):
    *idx, v = args
    old = arr[tuple(idx)]
    arr[tuple(idx)] = old - v
    return old


def atomic_min(arr, *args):
    *idx, v = args
    old = arr[tuple(idx)]
    arr[tuple(idx)] = builtins.min(old, v)
    return old


def atomic_max(arr, *args):
    *idx, v = args
    old = arr[tuple(idx)]
    arr[tuple(idx)] = builtins.max(old, v)
    return old
