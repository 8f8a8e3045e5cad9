"""The mesh as kernels see it: the structs `MeshData` / `MeshData64` (a gk.Mesh's arrays and its BVH) and
the query results `MeshQueryPoint(64)` / `MeshQueryRay(64)`, per point precision. Data only; the library
functions over them are in core/library/mesh_device.py."""

from .. import types as T
from ..struct import struct
from .bvh import BvhData

I32 = T.int32


def _mesh_struct(s: T.ScalarType):
    V = T.array_type(T.vector(3, s))

    class MeshData:
        points: V
        velocities: V
        indices: T.array_type(I32)
        num_tris: I32
        num_points: I32
        has_velocities: I32
        average_edge_length: T.float32
        bvh: BvhData

    class MeshQueryPoint:
        result: T.bool_
        sign: s
        face: I32
        u: s
        v: s

    class MeshQueryRay:
        result: T.bool_
        sign: s
        face: I32
        t: s
        u: s
        v: s
        normal: T.vector(3, s)

    suffix = "" if s is T.float32 else "64"
    out = []
    for cls in (MeshData, MeshQueryPoint, MeshQueryRay):
        cls.__name__ = cls.__qualname__ = cls.__name__ + suffix
        cls.__doc__ = {"MeshData": "What a kernel sees of a gk.Mesh: its arrays and the BVH over its triangles.",
                       "MeshQueryPoint": "mesh_query_point's result (Warp's): result, sign, face, u, v.",
                       "MeshQueryRay": "mesh_query_ray's result (Warp's): result, sign (> 0 from the front), face, t, u, v, "
                                        "normal."
                       }[cls.__name__.rstrip("64")]
        out.append(struct(cls))
    return out


MeshData, MeshQueryPoint, MeshQueryRay = _mesh_struct(T.float32)
MeshData64, MeshQueryPoint64, MeshQueryRay64 = _mesh_struct(T.float64)
MESH_STRUCTS = {MeshData._gk_struct: T.float32, MeshData64._gk_struct: T.float64}
