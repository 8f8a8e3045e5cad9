"""Creating arrays: `gk.zeros`, `empty`, `full`, `ones`, the `*_like` forms, and `from_numpy`/`from_dlpack`
(zero-copy where the device allows)."""

from __future__ import annotations

import numpy as np

from ...core.types import Type, float32
from ...core.types import matrix as _matrix
from ...core.types import vector as _vector
from .array import array
from .array_input import _as_dtype, _as_shape, _infer_dtype, _to_numpy
from ..launch.device import get_device


def _new(shape, dtype, device, requires_grad, requires_dual, label=None) -> array:
    a = array._alloc(_as_shape(shape), _as_dtype(dtype), get_device(device))
    a.label = label
    if requires_grad:
        a.requires_grad = True
    if requires_dual:
        a.requires_dual = True
    return a


def zeros(shape, dtype=float32, device=None, requires_grad=False, requires_dual=False, label=None) -> array:
    """A zero-filled array.

    Args:
        shape: an int or a tuple of up to 4 ints.
        dtype: the element type: a scalar (gk.float32, gk.int32, ... or Python float/int/bool), a vector or
            matrix type (gk.vec3, gk.mat33d, ...) or a `@gk.struct` class.
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: the current device
            (`gk.get_device()`).
        requires_grad: allocate `.grad`, a zero array of the same shape that a tape's backward
            pass accumulates into (float dtypes only).
        requires_dual: allocate `.dual`, the tangent array forward mode (`gk.ForwardMode`) writes.
        label: a name shown by the debugger, `tape.visualize` and error messages (default: the
            parameter name it was passed as)."""
    return _new(shape, dtype, device, requires_grad, requires_dual, label)


def empty(shape, dtype=float32, device=None, requires_grad=False, requires_dual=False, label=None) -> array:
    """An array for results (backend buffers are zero-filled, so this equals `zeros`).

    Args:
        shape: an int or a tuple of up to 4 ints.
        dtype: the element type: a scalar (gk.float32, gk.int32, ... or Python float/int/bool), a vector or
            matrix type (gk.vec3, gk.mat33d, ...) or a `@gk.struct` class.
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: the current device
            (`gk.get_device()`).
        requires_grad: allocate `.grad`, a zero array of the same shape that a tape's backward
            pass accumulates into (float dtypes only).
        requires_dual: allocate `.dual`, the tangent array forward mode (`gk.ForwardMode`) writes.
        label: a name shown by the debugger, `tape.visualize` and error messages (default: the
            parameter name it was passed as)."""
    return _new(shape, dtype, device, requires_grad, requires_dual, label)


def _value_dtype(value) -> Type:
    """The dtype `full` infers from `value`: Python float → float32, int → int32, sequences → vec/mat."""
    host, from_python = _to_numpy(value)
    scalar = _infer_dtype(host, from_python or isinstance(value, (list, tuple)))
    if host.ndim == 0:
        return scalar
    if host.ndim == 1:
        return _vector(host.shape[0], scalar)
    if host.ndim == 2:
        return _matrix(host.shape, scalar)
    raise ValueError(f"value: expected a scalar, vector or matrix, got shape {host.shape}")


def full(shape, value, dtype=None, device=None, requires_grad=False, requires_dual=False,
         label=None) -> array:
    """An array with every element `value` (dtype inferred from `value` when not given).

    Args:
        shape: an int or a tuple of up to 4 ints.
        value: the fill value: a scalar, or a vector/matrix value for a vector/matrix dtype.
        dtype: the element type; None: inferred from `value` (a Python float gives float32).
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: the current device
            (`gk.get_device()`).
        requires_grad: allocate `.grad`, a zero array of the same shape that a tape's backward
            pass accumulates into (float dtypes only).
        requires_dual: allocate `.dual`, the tangent array forward mode (`gk.ForwardMode`) writes.
        label: a name shown by the debugger, `tape.visualize` and error messages (default: the
            parameter name it was passed as)."""
    dt = _value_dtype(value) if dtype is None else dtype
    a = _new(shape, dt, device, requires_grad, requires_dual, label)
    a._fill(value)
    a.version = 0
    return a


def ones(shape, dtype=float32, device=None, requires_grad=False, requires_dual=False, label=None) -> array:
    """An array of ones.

    Args:
        shape: an int or a tuple of up to 4 ints.
        dtype: the element type: a scalar (gk.float32, gk.int32, ... or Python float/int/bool), a vector or
            matrix type (gk.vec3, gk.mat33d, ...) or a `@gk.struct` class.
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: the current device
            (`gk.get_device()`).
        requires_grad: allocate `.grad`, a zero array of the same shape that a tape's backward
            pass accumulates into (float dtypes only).
        requires_dual: allocate `.dual`, the tangent array forward mode (`gk.ForwardMode`) writes.
        label: a name shown by the debugger, `tape.visualize` and error messages (default: the
            parameter name it was passed as)."""
    return full(shape, 1, dtype, device, requires_grad, requires_dual, label)


def zeros_like(a: array, requires_grad=None, dtype=None, device=None) -> array:
    """Zeros with `a`'s shape, dtype and device (`requires_grad` defaults to `a.requires_grad`).

    Args:
        a: the array whose shape (and, by default, dtype and device) the result takes.
        requires_grad: give the result a `.grad`; None: as `a`.
        dtype: the element type; None: `a`'s.
        device: where the result lives; None: `a`'s device."""
    if not isinstance(a, array):
        raise TypeError(f"a: zeros_like needs a gk.array, got {type(a).__name__}")
    rg = a.requires_grad if requires_grad is None else requires_grad
    dev = a.device if device is None else device
    return _new(a.shape, a.dtype if dtype is None else dtype, dev, rg, False)


def ones_like(a: array, requires_grad=None, dtype=None, device=None) -> array:
    """Ones with `a`'s shape, dtype and device.

    Args:
        a: the array whose shape (and, by default, dtype and device) the result takes.
        requires_grad: give the result a `.grad`; None: as `a`.
        dtype: the element type; None: `a`'s.
        device: where the result lives; None: `a`'s device."""
    out = zeros_like(a, requires_grad, dtype, device)
    out._fill(1)
    out.version = 0
    return out


def from_numpy(x, dtype=None, device=None, requires_grad=False, requires_dual=False, label=None) -> array:
    """A copy of NumPy data `x` (its dtype is kept unless `dtype` is given; float64 stays float64).

    Args:
        x: a NumPy array (or anything `np.asarray` takes); a vector/matrix dtype reads its trailing
            dimensions as components.
        dtype: the element type; None: NumPy's (float64 stays float64).
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: the current device
            (`gk.get_device()`).
        requires_grad: allocate `.grad`, a zero array of the same shape that a tape's backward
            pass accumulates into (float dtypes only).
        requires_dual: allocate `.dual`, the tangent array forward mode (`gk.ForwardMode`) writes.
        label: a name shown by the debugger, `tape.visualize` and error messages (default: the
            parameter name it was passed as)."""
    host = x if isinstance(x, np.ndarray) else np.asarray(x)
    if host.dtype.kind == "O":
        raise TypeError(f"x: from_numpy needs numeric NumPy data, got {type(x).__name__}")
    return array(host, dtype=dtype, device=device, requires_grad=requires_grad, requires_dual=requires_dual,
                 label=label)


def from_dlpack(obj, dtype=None, device=None, requires_grad=False) -> array:
    """A copy of a DLPack-exporting host tensor (NumPy, PyTorch CPU, JAX CPU, ...).

    Args:
        obj: an object with `__dlpack__` (a host tensor).
        dtype: the element type; None: the tensor's scalar type; a vector/matrix type reads trailing
            dimensions as components.
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: the current device
            (`gk.get_device()`).
        requires_grad: allocate `.grad`, a zero array of the same shape that a tape's backward
            pass accumulates into (float dtypes only)."""
    try:
        host = np.from_dlpack(obj)
    except (TypeError, BufferError, RuntimeError, AttributeError) as exc:
        raise TypeError(f"obj: cannot import it through DLPack as host memory ({exc})") from None
    return array(host, dtype=dtype, device=device, requires_grad=requires_grad)
