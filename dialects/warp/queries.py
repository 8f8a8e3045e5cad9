"""Warp 1.19's mesh queries that gradkit's geometry library does not name:
`wp.mesh_query_ray_count_intersections(mesh, start, dir)`, the number of triangles the ray start + t dir
meets at t >= 0 (Warp counts every hit, both faces, no nearest-first), by the count mesh_parity.py's sign
votes with. An integer: no derivative, as in Warp."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from ..core.lang import LangFunction
from ..core.library.bvh import kernel_only
from ..core.library.mesh import _vec, mesh_arg
from ..core.library.mesh_parity import parity_for


def mesh_query_ray_count_intersections(E, id, start, dir, root=-1):
    """mesh_query_ray_count_intersections(mesh, start, dir) -> int: the triangles the ray meets at t >= 0
    (`root`: Warp's group root, which gradkit's ungrouped meshes do not have; only -1)."""
    if not (isinstance(root, int) and root == -1):
        E.fail("root= selects a group's BVH root; gradkit's meshes are not grouped (only -1)")
    mesh, s = mesh_arg(E, id)
    return E.call(parity_for(s).count, mesh, _vec(E, start, s, "start"), _vec(E, dir, s, "dir"))


QUERY_MACROS = {
    fn.__name__: LangFunction(fn.__name__, "macro", macro=fn, host=kernel_only(fn.__name__), doc=fn.__doc__)
    for fn in (mesh_query_ray_count_intersections,)
}
