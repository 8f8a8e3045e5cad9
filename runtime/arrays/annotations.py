"""`gk.array1d` ... `gk.array4d`: array types of a fixed number of dimensions, for kernel annotations."""

from __future__ import annotations

from ...core.types import ArrayType, array_type, float32
from .array_input import _as_dtype


def array1d(dtype=float32) -> ArrayType:
    """The 1-d array type of `dtype`, for kernel annotations (same as `gk.array(dtype=dtype, ndim=1)`).

    Args:
        dtype: the element type (a scalar, vector, matrix or struct type; Python float means float32)."""
    return array_type(_as_dtype(dtype), 1)


def array2d(dtype=float32) -> ArrayType:
    """The 2-d array type of `dtype`, for kernel annotations (same as `gk.array(dtype=dtype, ndim=2)`).

    Args:
        dtype: the element type (a scalar, vector, matrix or struct type; Python float means float32)."""
    return array_type(_as_dtype(dtype), 2)


def array3d(dtype=float32) -> ArrayType:
    """The 3-d array type of `dtype`, for kernel annotations (same as `gk.array(dtype=dtype, ndim=3)`).

    Args:
        dtype: the element type (a scalar, vector, matrix or struct type; Python float means float32)."""
    return array_type(_as_dtype(dtype), 3)


def array4d(dtype=float32) -> ArrayType:
    """The 4-d array type of `dtype`, for kernel annotations (same as `gk.array(dtype=dtype, ndim=4)`).

    Args:
        dtype: the element type (a scalar, vector, matrix or struct type; Python float means float32)."""
    return array_type(_as_dtype(dtype), 4)
