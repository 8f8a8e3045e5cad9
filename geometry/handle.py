"""Binding a `GeometryHandle` (core/library/handle.py) at launch: the object, or its id, fills the part of
its kind; the other parts are empty placeholders made once per device."""

from __future__ import annotations

import numpy as np

from ..core import types as T
from ..core.library.bvh import BvhData
from ..core.library.handle import GeometryHandle
from ..core.library.hash_grid import HashGridData
from ..core.library.mesh import MeshData
from ..runtime.arrays.array import array as _array
from . import registry

_EMPTY: dict = {}
_KINDS = ((HashGridData, "grid", 1), (BvhData, "bvh", 2), (MeshData, "mesh", 3))


def _empty(device) -> dict:
    """{part: an empty struct of that part's type} on `device` (1-element arrays: never read)."""
    parts = _EMPTY.get(device)
    if parts is None:
        ints = _array(np.zeros(1, np.int32), dtype=T.int32, device=device)
        vecs = _array(np.zeros((1, 3), np.float32), dtype=T.vec3, device=device)
        info = _array(np.zeros((1, 4), np.int32), dtype=T.vector(4, T.int32), device=device)
        pairs = _array(np.zeros((1, 2), np.int32), dtype=T.vector(2, T.int32), device=device)
        bvh = BvhData(node_lowers=vecs, node_uppers=vecs, node_info=info, ray_order=pairs, prims=ints,
                      item_lowers=vecs, item_uppers=vecs, num_items=0)
        parts = _EMPTY[device] = {
            "grid": HashGridData(cell_starts=ints, cell_ends=ints, point_ids=ints, num_points=0, dim_x=1, dim_y=1,
                                 dim_z=1, cell_width_inv=0.0),
            "bvh": bvh,
            "mesh": MeshData(points=vecs, velocities=vecs, indices=ints, num_tris=0, num_points=0, has_velocities=0,
                             average_edge_length=0.0, bvh=bvh)}
    return parts


def handle_of(obj) -> GeometryHandle:
    """The handle binding geometry object `obj` (rebuilt when the object's own struct changed)."""
    data = obj._gk_struct_value()
    cached = getattr(obj, "_gk_handle", None)
    if cached is not None and cached[0] is data:
        return cached[1]
    for cls, part, kind in _KINDS:
        if isinstance(data, cls):
            h = GeometryHandle(**{**_empty(obj.device), part: data}, kind=kind)
            obj._gk_handle = (data, h)
            return h
    raise TypeError(f"a {type(obj).__name__} cannot be passed as a geometry id (wp.uint64): its struct is "
                    f"{type(data).__name__} (a float64 gk.Mesh has no Warp counterpart; annotate gk.Mesh[gk.float64])")


def _resolve(value):
    obj = registry.lookup(value)
    if obj is None and hasattr(value, "_gk_struct_value"):
        obj = value
    return handle_of(obj) if obj is not None else None


GeometryHandle._gk_resolve = staticmethod(_resolve)
