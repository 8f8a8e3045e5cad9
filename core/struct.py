"""`@gk.struct`: a class of annotated fields (scalars, vectors, matrices, arrays, other structs) usable as
a kernel or @gk.func parameter, a kernel local and a @gk.func return value (Warp's `@wp.struct`).

On the host an instance holds one value per field (NumPy scalars and arrays, gk.arrays, nested
instances); `s.grad` is the same struct of the gradients that land in it: the `.grad` of its array
fields (kernels' parameters are flattened per field, so a struct's gradients are its arrays')."""

from __future__ import annotations

import sys

import numpy as np

from .types import StructType, as_type

RESERVED = {"grad"}


def struct(cls):
    """Make `cls` a gradkit struct from its annotations (in declaration order)."""
    annotations = cls.__dict__.get("__annotations__", {})
    if not annotations:
        raise TypeError(f"@gk.struct '{cls.__qualname__}' declares no annotated fields")
    caller = sys._getframe(1)           # the module or function body defining the class
    scope = (dict(caller.f_globals), {**caller.f_locals, **vars(cls)})
    fields = {}
    for name, ann in annotations.items():
        if name in RESERVED or name.startswith("_"):
            raise TypeError(f"@gk.struct '{cls.__qualname__}': field name '{name}' is reserved")
        try:
            fields[name] = as_type(_evaluated(scope, ann))
        except (TypeError, NameError, AttributeError, SyntaxError) as exc:
            raise TypeError(f"@gk.struct '{cls.__qualname__}': field '{name}': {exc}") from None
    stype = StructType(cls, fields)
    namespace = {"_gk_struct": stype, "__slots__": tuple(fields), "__init__": _init, "__setattr__": _setattr,
                 "__repr__": _repr, "grad": property(_grad), "__module__": cls.__module__,
                 "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    stype.cls = type(cls.__name__, (), namespace)
    return stype.cls


def _evaluated(scope, ann):
    """A string annotation (`from __future__ import annotations`) evaluated in the scope that defined the
    class, as typing.get_type_hints does: the user's own source, like a kernel's annotations."""
    if not isinstance(ann, str):
        return ann
    return eval(ann, *scope)  # noqa: S307


def _default(t):
    if t.is_struct:
        return t.cls()
    if t.is_array:
        return None
    if t.is_scalar:
        return t(0)
    return np.zeros(t.shape, dtype=t.scalar.np_dtype)


def _init(self, *args, **kwargs):
    fields = type(self)._gk_struct.fields
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes at most {len(fields)} positional field values, got {len(args)}")
    given = dict(zip(fields, args))
    for k, v in kwargs.items():
        if k in given:
            raise TypeError(f"{type(self).__name__}() got field '{k}' twice")
        given[k] = v
    for name, t in fields.items():
        setattr(self, name, given.pop(name) if name in given else _default(t))
    if given:
        raise TypeError(f"{type(self).__name__} has no field '{next(iter(given))}'")


def _setattr(self, name, value):
    stype = type(self)._gk_struct
    t = stype.fields.get(name)
    if t is None:
        raise AttributeError(f"{stype.name} has no field '{name}' (fields: {', '.join(stype.fields)})")
    object.__setattr__(self, name, _checked(stype, name, t, value))


def _checked(stype, name, t, value):
    """`value` as field `name` of type `t` holds it (a copy for NumPy data), or a TypeError/ValueError."""
    where = f"{stype.name}.{name}"
    if t.is_struct:
        value = instance(value, t)          # an object standing for the struct (a geometry id, say)
        if not isinstance(value, t.cls):
            raise TypeError(f"{where} must be a {t.name} instance, got {type(value).__name__}")
        return value
    if t.is_array:
        if value is not None and not hasattr(value, "buffer"):
            raise TypeError(f"{where} must be a gk.array ({t.name}) or None, got {type(value).__name__}")
        return value
    try:
        data = np.array(value, dtype=t.scalar.np_dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{where} must be a {t.name}, got {type(value).__name__}") from None
    if t.is_scalar:
        if data.shape != ():
            raise ValueError(f"{where} must be a {t.name} scalar, got shape {data.shape}")
        return data[()]
    if data.shape != t.shape:
        if data.shape == ():
            return np.full(t.shape, data, dtype=data.dtype)
        raise ValueError(f"{where} must have shape {t.shape} ({t.name}), got {data.shape}")
    return data


def _repr(self) -> str:
    stype = type(self)._gk_struct
    def shown(v):
        return repr(v.tolist() if isinstance(v, np.ndarray | np.generic) else v)
    return f"{stype.name}({', '.join(f'{k}={shown(getattr(self, k))}' for k in stype.fields)})"


def _grad(self):
    """The struct of this instance's gradients: each array field's `.grad` (None where it has none),
    nested structs' `.grad`, and zeros for value fields (kernels do not differentiate into them)."""
    cls = type(self)
    out = object.__new__(cls)
    for name, t in cls._gk_struct.fields.items():
        v = getattr(self, name)
        if t.is_struct:
            g = v.grad
        elif t.is_array:
            g = getattr(v, "grad", None)
        else:
            g = _default(t)
        object.__setattr__(out, name, g)
    return out


def instance(value, stype: StructType):
    """`value` as an instance of the struct: itself, or what an object standing for one gives (a
    `gk.HashGrid`'s `_gk_struct_value()`, or an id the struct class resolves with `_gk_resolve`, as
    Warp's `grid.id`, or an object the struct class resolves); `value` unchanged when it is neither."""
    if isinstance(value, stype.cls):
        return value
    get = getattr(value, "_gk_struct_value", None)
    out = get() if get is not None else None
    if not isinstance(out, stype.cls):
        # an id, or an object whose own struct is another one (a mesh where a geometry handle goes)
        resolve = getattr(stype.cls, "_gk_resolve", None)
        out = resolve(value) if resolve is not None else None
    return out if isinstance(out, stype.cls) else value


def flatten(value, stype: StructType, where: str) -> list:
    """The field values of struct instance `value` in StructType.flat order (what a kernel's flattened
    parameters receive); a TypeError naming `where` when it is not an instance of the struct."""
    value = instance(value, stype)
    if not isinstance(value, stype.cls):
        raise TypeError(f"{where} must be a {stype.name} instance, got {type(value).__name__}")
    out = []
    for name, t in stype.fields.items():
        v = getattr(value, name)
        out += flatten(v, t, f"{where}.{name}") if t.is_struct else [v]
    return out
