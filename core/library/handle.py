"""`GeometryHandle`: what a kernel parameter standing for any geometry object receives (the Warp dialect's
`wp.uint64`, where one type names a hash grid, a BVH or a mesh by its id).

The handle is a struct with one part per kind; at launch the object passed (or its id) fills its own
part and the other parts get empty placeholders, so a kernel is compiled once whatever it is given and
the queries (hash_grid_query, bvh_query_*, mesh_query_*) take the part they need. geometry/handle.py
binds it."""

# (no `from __future__ import annotations`: @struct reads the annotations)

from .. import types as T
from ..struct import struct
from .bvh import BvhData
from .hash_grid import HashGridData
from .mesh import MeshData


@struct
class GeometryHandle:
    """A geometry object bound at launch: the part of its kind (grid, bvh or mesh) and `kind` (1, 2, 3)."""
    grid: HashGridData
    bvh: BvhData
    mesh: MeshData
    kind: T.int32
