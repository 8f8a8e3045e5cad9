"""Warp 1.19's mesh queries that gradkit's geometry library does not name, written over its functions
(core/library/mesh_device.py): `wp.mesh_query_ray_count_intersections(mesh, start, dir)`, the number of
triangles the ray start + t dir meets at t >= 0 (Warp counts every hit, both faces, no nearest-first).
An integer: no derivative, as in Warp."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from ..core import types as T
from ..core.func import Func
from ..core.lang import LangFunction
from ..core.library.bvh import BIG, kernel_only
from ..core.library.mesh import _vec, mesh_arg
from ..core.library.mesh_device import MeshData, MeshData64, lib_for

I32 = T.int32
_COUNTERS: dict = {}


def _counter(s: T.ScalarType) -> Func:
    """The @gk.func counting a ray's hits on a mesh with points of scalar type `s`: the BVH walk of
    mesh_device's `_ray_face` (boxes by `ray_enters`, triangles by `ray_tri`), every hit at t >= 0 counted."""
    if s in _COUNTERS:
        return _COUNTERS[s]
    V = T.vector(3, s)
    M = MeshData if s is T.float32 else MeshData64
    lib = lib_for(s)
    big = s(BIG)

    def count(mesh: M, start: V, dir: V) -> I32:
        bvh = mesh.bvh
        hits = 0
        node = -1
        if bvh.num_items > 0:
            node = 0
        while node >= 0:
            info = bvh.node_info[node]
            nxt = info[1]
            if lib.ray_enters(start, dir, V(bvh.node_lowers[node]), V(bvh.node_uppers[node]), big):
                if info[3] > 0:
                    for k in range(info[2], info[2] + info[3]):
                        f = bvh.prims[k]
                        h = lib.ray_tri(start, dir, lib.vertex(mesh, f, 0), lib.vertex(mesh, f, 1),
                                        lib.vertex(mesh, f, 2))
                        if h[0] >= s(0.0):
                            hits += 1
                else:
                    nxt = info[0]
            node = nxt
        return hits

    count.__name__ = count.__qualname__ = f"_wp_mesh_ray_count_{s.name}"
    _COUNTERS[s] = Func(count)
    return _COUNTERS[s]


def mesh_query_ray_count_intersections(E, id, start, dir, root=-1):
    """mesh_query_ray_count_intersections(mesh, start, dir) -> int: the triangles the ray meets at t >= 0
    (`root`: Warp's group root, which gradkit's ungrouped meshes do not have; only -1)."""
    if not (isinstance(root, int) and root == -1):
        E.fail("root= selects a group's BVH root; gradkit's meshes are not grouped (only -1)")
    mesh, s = mesh_arg(E, id)
    return E.call(_counter(s), mesh, _vec(E, start, s, "start"), _vec(E, dir, s, "dir"))


QUERY_MACROS = {
    fn.__name__: LangFunction(fn.__name__, "macro", macro=fn, host=kernel_only(fn.__name__), doc=fn.__doc__)
    for fn in (mesh_query_ray_count_intersections,)
}
