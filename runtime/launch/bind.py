"""Argument binding for launches: check the user's values against a kernel's parameters and convert them.

`make_binder(kernel_name, params)` builds, once per kernel, a closure with one pre-specialised
converter per parameter; `gk.launch` calls it on every launch, so the accepted cases (an array of
the right dtype/ndim/device, a Python float for a float parameter, ...) take a few attribute
checks. Everything else goes to a slow path that either converts or raises an error naming the
kernel and the parameter with what it expected and what it got. Nothing passed in is mutated.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ...core.types import ArrayType, ScalarType, Type
from ..arrays.array import array as _array
from .device import Device, get_device

Binder = Callable[[Sequence, Device], list]
Converter = Callable[[Any, Device], Any]


def _what(value) -> str:
    """A short description of a user value for error messages."""
    if isinstance(value, _array):
        return f"a gk.array of dtype {value.dtype.name} with {value.ndim} dimension(s) on {value.device.name}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of dtype {value.dtype} and shape {value.shape}"
    return f"{type(value).__name__} {value!r}" if np.ndim(value) == 0 else type(value).__name__


def _number(x) -> str:
    """A number for an error message, shortened when it has hundreds of digits."""
    text = repr(float(x) if isinstance(x, np.floating) else x)
    return text if len(text) <= 40 else f"{text[:12]}... ({len(text)} digits)"


# --------------------------------------------------------------------------- arrays

def _array_converter(kname: str, pname: str, t: ArrayType) -> Converter:
    dtype, ndim = t.dtype, t.ndim
    where = f"kernel '{kname}': parameter '{pname}'"

    def slow(a, device):
        if not isinstance(a, _array):
            hint = " — pass gk.array(...) (NumPy arrays and lists are not accepted)" \
                if isinstance(a, (np.ndarray, list, tuple)) else ""
            raise TypeError(f"{where} expects a gk.array ({t.name}), got {_what(a)}{hint}")
        if a.dtype is not dtype:
            raise TypeError(f"{where} expects an array of dtype {dtype.name}, got dtype {a.dtype.name}")
        if a.ndim != ndim:
            raise TypeError(f"{where} expects a {ndim}-d array ({t.name}), "
                            f"got {a.ndim}-d with shape {a.shape}")
        if a.device is not device:
            raise ValueError(f"{where}: the array is on device '{a.device.name}' but the launch is on "
                             f"'{device.name}' (move it with a.to('{device.name}'))")
        return a

    def convert(a, device):
        if a.__class__ is _array and a.dtype is dtype and a.ndim == ndim and a.device is device:
            return a
        return slow(a, device)

    return convert


# --------------------------------------------------------------------------- scalars

# Python numbers a scalar parameter converted, per parameter: making a NumPy scalar costs ~0.15 µs, a
# look-up ~0.03 (time-stepped launches pass the same step numbers and constants every iteration). NumPy
# scalars are immutable, so one may stand for every equal value; equal nonzero floats have the same bits.
_MADE_MAX = 4096


def _scalar_converter(kname: str, pname: str, t: ScalarType) -> Converter:
    ctor = t.np_dtype.type
    where = f"kernel '{kname}': parameter '{pname}' ({t.name})"

    def reject(v):
        raise TypeError(f"{where} expects a {t.kind} scalar, got {_what(v)}")

    def unwrap(v):
        """NumPy 0-d arrays and NumPy scalars become plain values; anything non-scalar is rejected."""
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v[()]
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            return v
        reject(v)

    if t.is_float:
        top = float(np.finfo(t.np_dtype).max)

        def slow(v):
            x = unwrap(v)
            if t.out_of_range(x):     # would silently become ±inf (NaN and ±inf themselves are values)
                hint = "; declare the parameter gk.float64 for larger values" if t.bits < 64 else ""
                raise ValueError(f"{where}: {_number(x)} is out of range ({t.range_text()}){hint}")
            return ctor(x)

        made: dict = {}

        def convert(v, device):
            c = v.__class__
            if c is ctor:        # a NumPy scalar of the parameter's own type (a struct's field): in range
                return v
            if c is float or c is int:
                got = made.get(v)
                if got is not None:
                    return got
                if -top <= v <= top:
                    got = ctor(v)
                    if v != 0 and len(made) < _MADE_MAX:     # 0.0 == -0.0: zeros are made each time
                        made[v] = got
                    return got
            return slow(v)
        return convert

    if t.is_int:
        info = np.iinfo(t.np_dtype)
        lo, hi = int(info.min), int(info.max)

        def slow(v):
            x = unwrap(v)
            if isinstance(x, (float, np.floating)):
                raise TypeError(f"{where} expects an integer, got {_what(v)} (convert with int(...) first)")
            if not lo <= x <= hi:
                raise ValueError(f"{where}: {_number(x)} is out of range [{lo}, {hi}]")
            return ctor(x)

        made: dict = {}

        def convert(v, device):
            c = v.__class__
            if c is ctor:        # a NumPy scalar of the parameter's own type (a struct's field): in range
                return v
            if c is int:
                got = made.get(v)
                if got is not None:
                    return got
                if lo <= v <= hi:
                    got = ctor(v)
                    if len(made) < _MADE_MAX:
                        made[v] = got
                    return got
            return slow(v)
        return convert

    def convert_bool(v, device):
        if v.__class__ is np.bool_:
            return v
        x = unwrap(v)
        if isinstance(x, (float, np.floating)):
            raise TypeError(f"{where} expects a bool, got {_what(v)}")
        return np.bool_(x)
    return convert_bool


# --------------------------------------------------------------------------- vectors and matrices

def _value_converter(kname: str, pname: str, t: Type) -> Converter:
    npdt, shape, ncomp = t.scalar.np_dtype, t.shape, t.ncomp
    want_int = not t.scalar.is_float
    where = f"kernel '{kname}': parameter '{pname}' ({t.name})"

    ctor = npdt.type
    fast_kinds = (int,) if want_int else (float, int)
    info = np.iinfo(npdt) if want_int else np.finfo(npdt)
    lo, hi = (int(info.min), int(info.max)) if want_int else (-float(info.max), float(info.max))

    def convert(v, device):
        c = v.__class__
        if (c is tuple or c is list) and len(v) == ncomp:        # (1.0, 2.0, 3.0): the common case
            for x in v:
                if x.__class__ not in fast_kinds:
                    break
            else:
                if all(lo <= x <= hi for x in v):
                    return tuple(map(ctor, v))
        elif c is np.ndarray and v.dtype == npdt and (v.shape == shape or v.shape == (ncomp,)):
            return tuple(v.reshape(-1))
        return slow(v)

    def slow(v):
        if isinstance(v, _array):
            raise TypeError(f"{where} expects a {t.name} value, got {_what(v)}")
        try:
            arr = np.asarray(v)
        except (ValueError, TypeError):
            raise TypeError(f"{where} expects a sequence of {ncomp} numbers, got {_what(v)}") from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{where} expects a sequence of {ncomp} numbers, got {_what(v)}")
        if arr.shape != shape and arr.shape != (ncomp,):
            raise ValueError(f"{where} expects {ncomp} components (shape {shape}), got shape {arr.shape}")
        if want_int and arr.dtype.kind == "f":
            raise TypeError(f"{where} expects integer components, got {arr.dtype}")
        if want_int and arr.dtype.kind in "iu" and (arr.min() < lo or arr.max() > hi):
            raise ValueError(f"{where}: components {arr.reshape(-1).tolist()} are out of range [{lo}, {hi}]")
        if not want_int and any(t.scalar.out_of_range(x) for x in arr.reshape(-1).tolist()):
            raise ValueError(f"{where}: components {arr.reshape(-1).tolist()} are out of range "
                             f"({t.scalar.range_text()})")
        return tuple(arr.astype(npdt, copy=False).reshape(-1))

    return convert


# --------------------------------------------------------------------------- binders

def _converter(kname: str, pname: str, t: Type) -> Converter:
    if isinstance(t, ArrayType):
        return _array_converter(kname, pname, t)
    if isinstance(t, ScalarType):
        return _scalar_converter(kname, pname, t)
    if t.is_vector or t.is_matrix:
        return _value_converter(kname, pname, t)
    raise TypeError(f"kernel '{kname}': parameter '{pname}' has an unsupported type {t!r}")


def make_binder(kernel_name: str, params: Sequence[tuple[str, Type]]) -> Binder:
    """A function `bind(args, device) -> list` checking and converting `args` for these parameters:
    arrays pass through, scalars become NumPy scalars of the parameter type, vec/mat values become
    tuples of NumPy scalars (row-major components)."""
    names = [name for name, _ in params]
    convs = [_converter(kernel_name, name, t) for name, t in params]
    binder = _binder(kernel_name, names, convs)
    binder.converters = tuple(convs)        # per parameter, for pre-bound launches (runtime/launch/plan.py)
    return binder


def _binder(kernel_name: str, names: list[str], convs: list[Converter]) -> Binder:
    n = len(convs)
    if n == 0:
        def bind0(args, device):
            if len(args):
                _count_error(kernel_name, names, args)
            return []
        return bind0
    if n == 1:
        c0 = convs[0]

        def bind1(args, device):
            if len(args) != 1:
                _count_error(kernel_name, names, args)
            return [c0(args[0], device)]
        return bind1
    if n == 2:
        c0, c1 = convs

        def bind2(args, device):
            if len(args) != 2:
                _count_error(kernel_name, names, args)
            return [c0(args[0], device), c1(args[1], device)]
        return bind2
    if n == 3:
        c0, c1, c2 = convs

        def bind3(args, device):
            if len(args) != 3:
                _count_error(kernel_name, names, args)
            return [c0(args[0], device), c1(args[1], device), c2(args[2], device)]
        return bind3

    def bind(args, device):
        if len(args) != n:
            _count_error(kernel_name, names, args)
        return [c(a, device) for c, a in zip(convs, args, strict=True)]
    return bind


def _count_error(kernel_name: str, names: list[str], args) -> None:
    listed = ", ".join(names) or "none"
    raise TypeError(f"kernel '{kernel_name}' takes {len(names)} argument(s) ({listed}) in inputs + outputs, "
                    f"got {len(args)}")


_binders: dict[tuple, Binder] = {}


def bind_args(kernel_name: str, params: Sequence[tuple[str, Type]], args: Sequence, device) -> list:
    """Check and convert `args` for a kernel's `params` on `device` (see `make_binder`)."""
    key = (kernel_name, tuple(params))
    binder = _binders.get(key)
    if binder is None:
        binder = _binders[key] = make_binder(kernel_name, params)
    return binder(args, device if isinstance(device, Device) else get_device(device))
