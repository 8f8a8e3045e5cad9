"""Macros the translator (translate.py) writes into generated kernel bodies, named `__ti_*`: field
accesses with Taichi's rules (a vector index `grid[base + offset]`, the implicit cast of a stored value
to the field's type), atomics on field elements, Taichi's "a local keeps its first type", and the
integer vector of a `ti.grouped` loop."""

from __future__ import annotations

from gradkit.core import types as T
from gradkit.core.ir import Value
from gradkit.core.lang import LangFunction

from .lang import _cast, _comps, _matrix_macro, _vector_macro


def _m(name, fn):
    return LangFunction(name, "macro", macro=fn, host=None)


def _indices(E, arr, e) -> list:
    if e is None:
        items = [0]
    elif isinstance(e, tuple):
        items = list(e)
    elif isinstance(e, Value) and e.type.is_vector:
        items = _comps(E, e)
    else:
        items = [e]
    ndim = arr.type.ndim
    if len(items) != ndim:
        E.fail(f"field '{arr.hint}' has {ndim} dimension{'s' * (ndim != 1)} but is indexed with {len(items)}")
    out = []
    for x in items:
        if isinstance(x, Value):
            if not (x.type.is_scalar and x.type.is_int):
                E.fail(f"a field index must be an integer, got {x.type.name}")
            out.append(x if x.type is T.int32 else E.lw.prim("cast", x, to=T.int32, node=E.node))
        elif isinstance(x, int) and not isinstance(x, bool):
            out.append(E.lw.b.const(x, T.int32))
        else:
            E.fail(f"a field index must be an integer, got {x!r}")
    return out


def _as(E, arr, v):
    """v converted to the element type of field `arr` (Taichi casts a stored value implicitly)."""
    t = arr.type.dtype
    if isinstance(v, tuple) and not t.is_scalar:     # x[i] = [0, 0], C[i] = [[1, 0], [0, 1]]: a literal
        v = _matrix_macro(E, v, t.scalar) if t.is_matrix else _vector_macro(E, v, t.scalar)
    if isinstance(v, Value):
        if v.type is t:
            return v
        if v.type.shape != t.shape:
            E.fail(f"cannot store {v.type.name} into field '{arr.hint}' of {t.name}")
        return _cast(E, v, t)
    if isinstance(v, float) and t.scalar.is_int:
        v = int(v)
    return E.lw.materialize(v, t, E.node)


def load(E, arr, e):
    return E.lw.b.load(arr, _indices(E, arr, e))


def store(E, arr, e, v):
    E.lw.b.store(arr, _indices(E, arr, e), _as(E, arr, v))


def as_field_type(E, arr, v):
    if not (isinstance(arr, Value) and arr.type.is_array):
        return v
    return _as(E, arr, v)


def _atomic(kind):
    def fn(E, arr, e, v):
        if not (isinstance(arr, Value) and arr.type.is_array):
            E.fail("ti.atomic_*(x[i], v) needs a field element as its first argument")
        return E.lw.atomic(kind, arr, _indices(E, arr, e), _as(E, arr, v), E.node)
    return fn


def _bitwise(op):
    """ti.atomic_and/or/xor(x[i], v): the old value, then x[i] = old op v. gradkit has no bitwise atomics, so
    this is a plain read-modify-write; the translator allows it only in serial code (one thread), where it
    is exact (translate.py refuses it inside a parallel loop)."""
    def fn(E, arr, e, v):
        if not (isinstance(arr, Value) and arr.type.is_array and arr.type.dtype.is_scalar
                and arr.type.dtype.is_int):
            E.fail(f"ti.atomic_{op[4:]}(x[i], v) needs an element of an integer field")
        idx = _indices(E, arr, e)
        old = E.lw.b.load(arr, idx)
        E.lw.b.store(arr, idx, _as(E, arr, E.lw.binop(op, old, _as(E, arr, v), E.node)))
        return old
    return fn


def _rmw(op):
    def fn(E, arr, e, v):                   # x[I] *= v with a vector index: load, operate, store
        idx = _indices(E, arr, e)
        old = E.lw.b.load(arr, idx)
        E.lw.b.store(arr, idx, _as(E, arr, E.lw.binop(op, old, v, E.node)))
    return fn


def keep(E, old, new):
    """Taichi: a local keeps the type of its first assignment; a later value of another type is cast."""
    if isinstance(old, Value):
        t = old.type
    elif isinstance(old, bool):
        return new
    elif isinstance(old, float):
        t = E.lw.default_fp
    elif isinstance(old, int):
        t = T.int32
    else:
        return new
    if isinstance(new, Value):
        if new.type is t or new.type.shape != t.shape:
            return new
        return _cast(E, new, t)
    if isinstance(new, (int, float)) and not isinstance(new, bool):
        if isinstance(old, Value) or isinstance(new, float) != isinstance(old, float):
            return _cast(E, new, t)
    return new


def ivec(E, *comps):
    vals = [E.lw.materialize(c, T.int32, E.node) for c in comps]
    return E.lw.prim("construct", *vals, type=T.vector(len(vals), T.int32), node=E.node)


MACROS = {
    "__ti_load": _m("__ti_load", load), "__ti_store": _m("__ti_store", store),
    "__ti_as": _m("__ti_as", as_field_type), "__ti_keep": _m("__ti_keep", keep),
    "__ti_ivec": _m("__ti_ivec", ivec),
    **{f"__ti_atomic_{k}": _m(f"__ti_atomic_{k}", _atomic(k)) for k in ("add", "sub", "min", "max")},
    **{f"__ti_atomic_{k}": _m(f"__ti_atomic_{k}", _bitwise(f"bit_{k}")) for k in ("and", "or", "xor")},
    **{f"__ti_rmw_{op}": _m(f"__ti_rmw_{op}", _rmw(op)) for op in ("mul", "div", "floordiv", "mod", "pow")},
}
