"""Geometry over the kernel language (issue #40): host-side builders whose kernels see plain structs of
arrays, and whose queries are library code in core/library (so every backend and both AD modes get them).

- hash_grid.py: `gk.HashGrid` (build, reserve, id); queries `gk.hash_grid_query`, `hash_grid_query_next`,
  `hash_grid_point_id` (core/library/hash_grid.py).
- bvh.py: `gk.Bvh` and the median-split tree build both it and the mesh use; queries core/library/bvh.py.
- mesh.py: `gk.Mesh` (a BVH over its triangles); queries core/library/mesh.py.
- refit.py: the refits of float32 meshes and BVHs as kernels on their device.
- handle.py, registry.py: the `wp.uint64` geometry handle and the id space behind it.
"""

from .hash_grid import HashGrid  # noqa: F401
from .bvh import Bvh  # noqa: F401
from .mesh import Mesh  # noqa: F401
from . import handle as _handle  # noqa: F401  (binds wp.uint64 geometry handles)
