"""`GeometryHandle`: what a kernel parameter standing for any geometry object receives (the Warp dialect's
`wp.uint64`, where one type names a hash grid, a BVH or a mesh by its id).

The handle is a struct with a part for hash grids and one for meshes; at launch the object passed (or its
id) fills its own part and the other gets an empty placeholder, so a kernel is compiled once whatever it
is given and the queries (hash_grid_query, bvh_query_*, mesh_query_*) take the part they need. A BVH
rides in the mesh part's `bvh` (with an empty mesh about it): a part of its own made every launch of a
mesh or grid query bind seven more arguments, about 5 us of example_mesh's 40 us simulate launch.
geometry/handle.py binds it."""

# (no `from __future__ import annotations`: @struct reads the annotations)

from .. import types as T
from ..struct import struct
from .hash_grid import HashGridData
from .mesh import MeshData


@struct
class GeometryHandle:
    """A geometry object bound at launch: the part of its kind (a grid; a mesh, or a BVH as mesh.bvh) and
    `kind` (1 grid, 2 BVH, 3 mesh)."""
    grid: HashGridData
    mesh: MeshData
    kind: T.int32
