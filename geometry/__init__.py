"""Geometry over the kernel language (issue #40): host-side builders whose kernels see plain structs of
arrays, and whose queries are library code in core/library (so every backend and both AD modes get them).

- hash_grid.py: `gk.HashGrid` (build, reserve, id); queries `gk.hash_grid_query`, `hash_grid_query_next`,
  `hash_grid_point_id` (core/library/hash_grid.py).
"""

from .hash_grid import HashGrid  # noqa: F401
from .bvh import Bvh  # noqa: F401
from .mesh import Mesh  # noqa: F401
from . import handle as _handle  # noqa: F401  (binds wp.uint64 geometry handles)
