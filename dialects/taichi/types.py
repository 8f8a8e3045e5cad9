"""`ti.types`: vector and matrix types (gradkit's), `template`, and the argument kinds not supported."""

from __future__ import annotations

from gradkit.core import types as _T

from .fields import NdarrayType, scalar_type
from .kernels import template  # noqa: F401
from .structs import struct  # noqa: F401


def vector(n: int, dtype=float):
    return _T.vector(n, scalar_type(dtype))


def matrix(n: int, m: int, dtype=float):
    return _T.matrix((n, m), scalar_type(dtype))


def ndarray(dtype=None, ndim=None, **kwargs) -> NdarrayType:
    """`ti.types.ndarray()`: a kernel parameter taking a NumPy array or a ti.ndarray."""
    return NdarrayType(dtype, ndim, **kwargs)




f32, f64, i32, i64 = _T.float32, _T.float64, _T.int32, _T.int64
