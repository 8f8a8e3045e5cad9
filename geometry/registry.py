"""One id space for every geometry object (Warp passes `grid.id`, `bvh.id`, `mesh.id` as a uint64): an id
names the live object, which gives the struct a kernel parameter binds to (`_gk_struct_value()`)."""

from __future__ import annotations

import itertools
import weakref

import numpy as np

_ids = itertools.count(1)
OBJECTS: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()


def register(obj) -> int:
    """A new id for `obj` (kept while the object lives)."""
    i = next(_ids)
    OBJECTS[i] = obj
    return i


def lookup(value):
    """The geometry object an id names; None when `value` is no id; a ValueError for a dead id."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        obj = OBJECTS.get(int(value))
        if obj is None:
            raise ValueError(f"no geometry object (gk.HashGrid, gk.Bvh, gk.Mesh) has id {int(value)} "
                             "(was it garbage-collected?)")
        return obj
    return None


def resolver(data_cls, what: str):
    """The `_gk_resolve` of struct class `data_cls`: an id of an object whose struct is a `data_cls`."""
    def resolve(value):
        obj = lookup(value)
        if obj is None:
            return None
        out = obj._gk_struct_value()
        if not isinstance(out, data_cls):
            raise TypeError(f"id {int(value)} names a {type(obj).__name__}, where a {what} is expected")
        return out
    return resolve
