"""Warp's generic kernels: parameters annotated `typing.Any`, `wp.array(dtype=Any)` or `wp.array[Any]` take
their types from each launch's arguments (as Warp 1.19's Kernel.infer_argument_types), and `wp.overload`
declares a specialisation ahead. Each argument-type signature compiles one ordinary WarpKernel, once."""

from __future__ import annotations

import inspect
import threading
import typing

import numpy as np

from ..core import types as T
from ..core.frontend import generic_matches, is_generic
from ..runtime.arrays.array import array as _GkArray


class AnyArray:
    """The annotation `wp.array(dtype=Any)` / `wp.array[Any]` / `wp.array2d[Any]`: an array of `ndim`
    dimensions whose dtype each launch or call gives."""

    def __init__(self, ndim: int = 1):
        self.ndim = ndim

    def _gk_generic(self, t: T.Type) -> bool:
        return t.is_array and t.ndim == self.ndim

    def __eq__(self, other) -> bool:
        return isinstance(other, AnyArray) and other.ndim == self.ndim

    def __hash__(self) -> int:
        return hash(("AnyArray", self.ndim))

    def __repr__(self) -> str:
        return f"array{self.ndim}d(dtype=Any)" if self.ndim > 1 else "array(dtype=Any)"


_NUMPY_SCALARS = {np.float32: T.float32, np.float64: T.float64, np.int32: T.int32, np.int64: T.int64,
                  np.uint32: T.uint32, np.bool_: T.bool_}


def host_type(value) -> T.Type | None:
    """The gradkit type Warp infers for a launch argument: a Python float float32, an int int32, a bool
    bool (Warp's type_to_warp); NumPy scalars their own type; arrays their (dtype, ndim); vectors and
    matrices (NumPy arrays of 1 or 2 dimensions on the host) theirs; struct instances their struct."""
    cls = type(value)
    if cls is bool:
        return T.bool_
    if cls is int:
        return T.int32
    if cls is float:
        return T.float32
    if cls in _NUMPY_SCALARS:
        return _NUMPY_SCALARS[cls]
    if isinstance(value, _GkArray):
        return T.array_type(value.dtype, value.ndim)
    if isinstance(value, np.ndarray) and value.ndim in (1, 2) and value.dtype.type in _NUMPY_SCALARS:
        scalar = _NUMPY_SCALARS[value.dtype.type]
        return T.vector(value.shape[0], scalar) if value.ndim == 1 else T.matrix(value.shape, scalar)
    struct = getattr(cls, "_gk_struct", None)
    return struct if isinstance(struct, T.StructType) else None


def _fast_key(args: list, positions: tuple) -> tuple | None:
    """What decides the generic parameters' types, cheaply: an array's (dtype, ndim) (dtypes are interned,
    so their id), a scalar's class; None where an argument needs the full inference (vectors, matrices,
    structs: resolved at each launch)."""
    key = []
    for k in positions:
        a = args[k]
        cls = type(a)
        if cls in _SCALAR_CLASSES:
            key.append(cls)
        elif isinstance(a, _GkArray):
            key.append((id(a.dtype), a.ndim))
        else:
            return None
    return tuple(key)


_SCALAR_CLASSES = frozenset((bool, int, float, *_NUMPY_SCALARS))


def annotations(pyfunc) -> list[tuple[str, object]]:
    """(name, annotation) of each parameter, string annotations evaluated where they can be."""
    try:
        sig = inspect.signature(pyfunc, eval_str=True, locals=getattr(pyfunc, "__gk_enclosing__", None))
    except Exception:       # an annotation naming something not yet defined: the frontend reports it
        sig = inspect.signature(pyfunc)
    return [(name, p.annotation) for name, p in sig.parameters.items()]


def has_generic(pyfunc) -> bool:
    return any(is_generic(a) for _, a in annotations(pyfunc))


def _as_type(t, what: str) -> T.Type:
    try:
        return T.as_type(t)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None


def _describe(ann) -> str:
    return "typing.Any" if ann is typing.Any else repr(ann)


class GenericKernel:
    """The generic part of a WarpKernel (runtime.py mixes it in): its generic parameters and one specialised
    kernel per signature (the generic parameters' types), made under a lock and kept."""

    is_generic = True

    def _init_generic(self, make):
        """`make(param_types)`: a new specialised kernel for ((name, type), ...)."""
        self._make = make
        self._anns = annotations(self.pyfunc)
        self._generic = tuple((k, name, ann) for k, (name, ann) in enumerate(self._anns) if is_generic(ann))
        self.overloads: dict[tuple, object] = {}
        self._positions = tuple(k for k, _, _ in self._generic)
        self._by_key: dict[tuple, object] = {}     # launch fast path: _fast_key(args) -> specialisation
        self._lock = threading.Lock()

    def specialised(self, types: tuple):
        """The kernel for the generic parameters' types `types` (in parameter order), compiled once."""
        k = self.overloads.get(types)
        if k is None:
            with self._lock:
                k = self.overloads.get(types)
                if k is None:
                    k = self._make(tuple((name, t) for (_, name, _), t in zip(self._generic, types)))
                    k.generic_parent = self
                    self.overloads[types] = k
        return k

    def resolve(self, args: list):
        """The specialised kernel for a launch's arguments (inputs then outputs); a TypeError naming the
        parameter whose argument matches no specialisation."""
        key = _fast_key(args, self._positions) if len(args) == len(self._anns) else None
        k = self._by_key.get(key) if key is not None else None
        if k is None:
            k = self._resolve(args)
            if key is not None:
                self._by_key[key] = k
        return k

    def _resolve(self, args: list):
        if len(args) != len(self._anns):
            raise TypeError(f"kernel '{self.key}' takes {len(self._anns)} arguments, got {len(args)}")
        types = []
        for k, name, ann in self._generic:
            t = host_type(args[k])
            if t is None or not generic_matches(ann, t):
                got = t.name if t is not None else type(args[k]).__name__
                raise TypeError(f"kernel '{self.key}': parameter '{name}' ({_describe(ann)}) cannot take "
                                f"an argument of type {got}")
            types.append(t)
        return self.specialised(tuple(types))

    def overload(self, arg_types):
        """`wp.overload(kernel, [types...])` or `wp.overload(kernel, {"name": type})`: the specialisation for
        those types, compiled when first launched and then reused by launches whose arguments match."""
        names = [name for name, _ in self._anns]
        if isinstance(arg_types, dict):
            unknown = [n for n in arg_types if n not in names]
            if unknown:
                raise RuntimeError(f"Invalid argument name '{unknown[0]}' in overload of kernel {self.key}")
            given = dict(arg_types)
        elif isinstance(arg_types, (list, tuple)):
            if len(arg_types) != len(names):
                raise RuntimeError(f"Invalid number of arguments for kernel {self.key}")
            given = dict(zip(names, arg_types))
        else:
            raise TypeError("Kernel overload types must be given in a list or dict")
        types = []
        for k, (name, ann) in enumerate(self._anns):
            what = f"Kernel {self.key} argument '{name}'"
            if name not in given:
                if is_generic(ann):
                    raise TypeError(f"{what} cannot be generic, got {_describe(ann)}")
                continue
            if is_generic(given[name]):
                raise TypeError(f"{what} cannot be generic, got {_describe(given[name])}")
            t = _as_type(given[name], what)
            if is_generic(ann):
                if not generic_matches(ann, t):
                    raise TypeError(f"{what} type mismatch: expected {_describe(ann)}, got {t.name}")
                types.append(t)
            elif not isinstance(ann, str) and _as_type(ann, what) != t:
                raise TypeError(f"{what} type mismatch: expected {_as_type(ann, what).name}, got {t.name}")
        return self.specialised(tuple(types))
