"""Checking and converting what users pass to `gk.array` and friends (data, dtype, shape, requires_grad),
with TypeError/ValueError naming the offending argument."""

from __future__ import annotations

import numpy as np

from ...core.types import ArrayType, ScalarType, Type, as_type, float32, from_numpy_dtype, int32

_I32 = np.iinfo(np.int32)


# --------------------------------------------------------------------------- argument helpers

def _is_dtype_like(obj) -> bool:
    return (isinstance(obj, (Type, np.dtype)) or obj is float or obj is int or obj is bool
            or (isinstance(obj, type) and issubclass(obj, np.generic)))


def _as_dtype(dtype, arg: str = "dtype") -> Type:
    """A user-given element dtype as a gradkit scalar/vector/matrix type (TypeError naming `arg`)."""
    try:
        dt = as_type(dtype)
    except TypeError as exc:
        raise TypeError(f"{arg}: {exc}") from None
    if isinstance(dt, ArrayType):
        raise TypeError(f"{arg}: an array's element dtype cannot be an array type ({dt.name})")
    return dt


def _as_shape(shape, arg: str = "shape") -> tuple[int, ...]:
    """`shape` as a tuple of 1-4 non-negative ints (TypeError/ValueError naming `arg`)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        dims = (int(shape),)
    else:
        try:
            if isinstance(shape, (str, bytes)):     # iterable, but its characters are not dimensions
                raise TypeError
            dims = tuple(shape)
        except TypeError:
            raise TypeError(f"{arg} must be an int or a tuple of ints, got {shape!r}") from None
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in dims):
            raise TypeError(f"{arg} must contain ints, got {shape!r}")
        dims = tuple(int(d) for d in dims)
    if not 1 <= len(dims) <= 4:
        raise ValueError(f"{arg} must have 1 to 4 dimensions, got {shape!r}")
    if any(d < 0 for d in dims):
        raise ValueError(f"{arg} must not be negative, got {shape!r}")
    return dims


def _to_numpy(data) -> tuple[np.ndarray, bool]:
    """(NumPy view/copy of `data`, whether it came from Python values rather than a typed array)."""
    from_python = isinstance(data, (list, tuple, float, int, bool)) and not isinstance(data, np.generic)
    try:
        host = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"data: cannot convert to an array ({exc}); ragged nested lists are not supported") \
            from None
    if host.dtype.kind == "O":
        raise (ValueError if from_python else TypeError)(
            f"data: cannot convert {type(data).__name__} to a numeric array (ragged lists, non-numbers or "
            "integers past 64 bits)")
    return host, from_python


def _infer_dtype(host: np.ndarray, from_python: bool) -> ScalarType:
    """Element scalar type for data without an explicit dtype (Warp's rules for Python values)."""
    kind = host.dtype.kind
    if from_python and kind == "f":
        return float32
    if from_python and kind in "iu":
        fits = host.size == 0 or (host.min() >= _I32.min and host.max() <= _I32.max)
        return int32 if fits else from_numpy_dtype(np.int64)
    dt = from_numpy_dtype(host.dtype)
    if dt is None:
        raise TypeError(f"data: unsupported NumPy dtype {host.dtype}; supported are float32, float64, int32, "
                        "int64, uint32 and bool (pass dtype=... to convert)")
    return dt


def _check_fits(host: np.ndarray, scalar: ScalarType, arg: str) -> None:
    """ValueError naming `arg` when a value of `host` overflows `scalar`, where NumPy would give inf with a
    warning or wrap integers silently (the rule scalar launch arguments follow; NaN and ±inf are floats)."""
    src = host.dtype
    if scalar.is_bool or host.size == 0 or src.kind not in "iuf" or np.can_cast(src, scalar.np_dtype, "safe"):
        return
    if scalar.is_int:
        info = np.iinfo(scalar.np_dtype)
        if src.kind == "f":          # float bounds: min is exact, max + 1 is the first power of two past it
            bad = ~np.isfinite(host) | (host < float(info.min)) | (host >= float(info.max) + 1.0)
        elif host.min() >= info.min and host.max() <= info.max:
            return
        else:
            bad = (host < info.min) | (host > info.max)
    elif src.kind == "f":
        info = np.finfo(scalar.np_dtype)
        limit = float(int(info.max) + 2 ** (info.maxexp - info.nmant - 2))     # rounds to inf from here
        bad = np.isfinite(host) & (np.abs(host) >= limit)
    else:
        return                       # every 64-bit integer is a finite float32
    if not bad.any():
        return
    where = tuple(int(k) for k in np.argwhere(bad)[0]) if host.ndim else ()
    at = "" if not where else f" at index {where if len(where) > 1 else where[0]}"
    hint = "; pass dtype=gk.float64" if scalar.is_float else "; pass dtype=gk.int64" if src.kind in "iu" else ""
    raise ValueError(f"{arg}: {host[where].item()!r}{at} does not fit {scalar.name} "
                     f"({scalar.range_text()}){hint}")


def _check_kind(host: np.ndarray, arg: str) -> None:
    """TypeError naming `arg` for data a gk.array cannot hold at all (complex, strings, objects)."""
    if host.dtype.kind not in "biuf":
        raise TypeError(f"{arg}: unsupported element type {host.dtype} (complex, strings and objects "
                        "cannot be stored in a gk.array)")


def _element_dims(shape: tuple, dt: Type, arg: str) -> tuple[int, ...]:
    """The array shape of data of `shape` holding `dt` elements (a vector/matrix element's components are
    the trailing dimensions): a single value is a one-element array, and 1 to 4 dimensions are allowed
    (ValueError naming `arg` otherwise)."""
    shape, comp = tuple(shape), dt.shape
    if comp and (len(shape) < len(comp) or shape[len(shape) - len(comp):] != comp):
        raise ValueError(f"{arg}: an array of shape {shape} cannot hold {dt.name} elements: its last "
                         f"dimensions must be {comp}")
    dims = shape[:len(shape) - len(comp)]
    if len(dims) > 4:
        raise ValueError(f"{arg}: gk.array supports 1 to 4 dimensions, {arg} has {len(dims)}"
                         + (f" besides the {dt.name} components" if comp else ""))
    return dims or (1,)


def _check_data(host: np.ndarray, dt: Type, arg: str) -> tuple[int, ...]:
    """The dims of an array of `dt` elements holding `host` (data from another library), by gk.array's
    rules: a value that does not fit, an unsupported element type or rank is an error naming `arg`."""
    _check_kind(host, arg)
    dims = _element_dims(host.shape, dt, arg)
    _check_fits(host, dt.scalar, arg)
    return dims


def _convert(host: np.ndarray, dt: Type, arg: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """`host` checked (`_check_data`) and converted: (the data in dt's scalar type, shaped (*dims,
    *dt.shape); the array's dims). Nothing is copied when it already has the right type and shape."""
    dims = _check_data(host, dt, arg)
    if host.dtype != dt.scalar.np_dtype:
        host = host.astype(dt.scalar.np_dtype)
    return (host if host.shape == dims + dt.shape else host.reshape(dims + dt.shape)), dims


def _prepare(data, dtype, shape) -> tuple[np.ndarray, Type, tuple[int, ...]]:
    """Host data, element dtype and array shape for `array(data, dtype, shape)` (data is not mutated)."""
    if hasattr(data, "buffer") and hasattr(data, "numpy"):      # another gk.array: copy it
        host, from_python = data.numpy(), False
        dt = data.dtype if dtype is None else _as_dtype(dtype)
    else:
        host, from_python = _to_numpy(data)
        _check_kind(host, "data")
        dt = _infer_dtype(host, from_python) if dtype is None else _as_dtype(dtype)
    _check_fits(host, dt.scalar, "data")
    comp = dt.shape
    if shape is not None:
        dims = _as_shape(shape)
        want = dims + comp
        if host.size != int(np.prod(want)):
            raise ValueError(f"shape {dims} with dtype {dt.name} needs {int(np.prod(want))} values; "
                             f"data has {host.size}")
        return host.reshape(want), dt, dims
    dims = _element_dims(host.shape, dt, "data")
    return (host if host.shape == dims + comp else host.reshape(dims + comp)), dt, dims


def _split_dtype(data, dtype):
    """`gk.array(float, ...)`: a dtype passed as the first argument is the element type, not data."""
    if data is not None and _is_dtype_like(data):
        if dtype is not None:
            raise TypeError("dtype: gk.array(T, dtype=...) gives the element type twice")
        return None, data
    return data, dtype


def _check_grad_dtype(dt: Type, arg: str) -> None:
    if not dt.scalar.is_float:
        raise ValueError(f"{arg}=True needs a floating-point dtype; this array's dtype is {dt.name}")


# --------------------------------------------------------------------------- the array class

