"""`copy.copy`, `copy.deepcopy` and `pickle` of a gk.array (its `__copy__`, `__deepcopy__` and `__reduce__`).

Each gives a new array holding a copy of the data, on the same device, with the same shape and dtype (never
memory shared with `a`, unlike PyTorch's `copy.copy`):
- `copy.copy(a)` is `a.copy()`: a fresh zero `.grad` when `a.requires_grad` (recorded on a recording tape,
  as `a.copy()` is);
- `copy.deepcopy(a)` is a snapshot: the label, `.grad` and `.dual` are copied too (as PyTorch's deepcopy
  copies a leaf's `.grad`); nothing is recorded;
- `pickle` stores the data as a NumPy array, the dtype, the device's name, `requires_grad` and the label;
  unpickling calls `rebuild` (gradkit's own function, nothing else) and puts the array on the device of that
  name (a DeviceError where there is none). `.grad` and `.dual` are not stored (as PyTorch's pickling
  leaves `.grad` out): an unpickled array that requires gradients starts with a zero `.grad`.
"""

from __future__ import annotations

import numpy as np

from ...core.types import matrix, quaternion, scalar_from_name, vector


def dtype_key(dt) -> tuple:
    """An array element type as plain values (what pickle stores instead of the type object)."""
    if dt.is_quat:
        return ("quat", dt.scalar.name)
    if dt.is_vector:
        return ("vector", dt.length, dt.scalar.name)
    if dt.is_matrix:
        return ("matrix", dt.rows, dt.cols, dt.scalar.name)
    return ("scalar", dt.name)


def dtype_from_key(key):
    """The (cached) element type `dtype_key` stood for; ValueError for anything else."""
    try:
        kind, *sizes, name = key
        scalar = scalar_from_name(name)
        if kind == "scalar" and not sizes:
            return scalar
        if kind == "quat" and not sizes:
            return quaternion(scalar)
        if kind == "vector" and len(sizes) == 1:
            return vector(sizes[0], scalar)
        if kind == "matrix" and len(sizes) == 2:
            return matrix(tuple(sizes), scalar)
    except (TypeError, ValueError, KeyError):
        pass
    raise ValueError(f"a pickled gk.array: {key!r} is not a gk.array element type")


def rebuild(data, dtype, device, requires_grad, label):
    """A pickled array, rebuilt (pickle calls this): `data` by `gk.array`'s rules on the device named
    `device`."""
    from .array import array
    plain = isinstance(device, str) and isinstance(requires_grad, bool) \
        and (label is None or isinstance(label, str))
    if not isinstance(data, np.ndarray) or not plain:
        raise TypeError("a pickled gk.array holds NumPy data, a device name, requires_grad and a label; "
                        "this one does not")
    return array(data, dtype=dtype_from_key(dtype), device=device, requires_grad=requires_grad, label=label)


def reduce(a) -> tuple:
    return rebuild, (a._read(), dtype_key(a.dtype), a.device.name, a.requires_grad, a.label)


def deepcopy(a, memo: dict):
    out = a._saved_copy()
    memo[id(a)] = out
    if a.grad is not None:
        out.grad = a.grad._saved_copy()
    if a.dual is not None:
        out.dual = a.dual._saved_copy()
    return out
