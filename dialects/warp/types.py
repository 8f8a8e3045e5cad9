"""`warp.types` in gradkit's terms: the generic constructors `vector(length, dtype)` and
`matrix(shape, dtype)`, and every scalar, vector and matrix type gradkit has under Warp's names."""

from __future__ import annotations

from ..core import types as _T
from ..core.library.handle import GeometryHandle as _GeometryHandle
from ..core.types import bool_ as bool  # noqa: A001
from ..core.types import float32, float64, int32, int64, uint32

float_ = float32
int_ = int32
Float = float32          # Warp's generic markers, kept as their float32 / int32 instances
Int = int32


class uint64:
    """Warp's `wp.uint64`, as the type of a geometry id: a kernel parameter (or struct field) annotated
    `wp.uint64` takes a `wp.HashGrid`, `wp.Bvh` or `wp.Mesh`, or its `.id`; it is gradkit's geometry handle
    (core/library/handle.py), whose part of the object's kind the queries use. gradkit has no 64-bit
    unsigned integers otherwise (docs/porting/warp.md)."""

    _gk_struct = _GeometryHandle._gk_struct

    def __new__(cls, value=0):
        """`wp.uint64(grid.id)` on the host, as Warp's tests write a launch argument: the id itself."""
        return value


def vector(length: int, dtype=float32):
    """`wp.types.vector(length=3, dtype=wp.float32)`: gradkit's interned vector type (`wp.vec3`)."""
    return _T.vector(length, _T.as_type(dtype))


def matrix(shape, dtype=float32):
    """`wp.types.matrix(shape=(3, 3), dtype=wp.float32)`: gradkit's interned matrix type (`wp.mat33`)."""
    return _T.matrix(tuple(shape), _T.as_type(dtype))


def quaternion(dtype=float32):
    return _T.quaternion(_T.as_type(dtype))


_SCALARS = {"f": float32, "d": float64, "i": int32, "l": int64, "ui": uint32, "": float32}
VECTORS = {f"vec{n}{s}": vector(n, t) for n in (2, 3, 4) for s, t in _SCALARS.items()}
MATRICES = {f"mat{n}{n}{s}": matrix((n, n), t) for n in (2, 3, 4) for s, t in
            {"": float32, "f": float32, "d": float64}.items()}
QUATS = {"quat": quaternion(float32), "quatf": quaternion(float32), "quatd": quaternion(float64)}
globals().update(VECTORS)
globals().update(MATRICES)
globals().update(QUATS)

__all__ = ["bool", "float32", "float64", "int32", "int64", "uint32", "uint64", "vector", "matrix", "quaternion",
           *VECTORS, *MATRICES, *QUATS]
