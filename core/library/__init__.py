"""The library: language functions written in the kernel language itself, so it sits above the compiler
it uses (core/func, core/frontend). Importing the package defines each of them in core/lang (`gk.<name>`),
which the package gradkit does before it exports the language:

- macros.py: the macro protocol (written once from primitives, run by the frontend's emitter in kernels
  and by NumPy on the host); quat.py (quaternions) and random.py (rand_init, randf, ...) are macros.
- decompositions.py: svd3, svd2, qr3, eig3 and polar_decompose, library @gk.func code.
- hash_grid.py: hash-grid neighbour queries (the structs a kernel sees a grid and a query as, library
  @gk.func traversal code and the macros hash_grid_query, hash_grid_query_next, hash_grid_point_id).
- bvh.py, mesh.py: BVH and triangle-mesh queries (stack traversal as @gk.func code; mesh_query_point*,
  mesh_query_ray, mesh_query_aabb, mesh_eval_position/velocity).
"""

from . import macros  # noqa: F401  (the protocol: MACROS, macro, call_on_host)
from . import quat as _quat  # noqa: F401  (defines the quaternion functions)
from . import random as _random  # noqa: F401  (defines rand_init, randf, randi, randn)
from . import decompositions as _decompositions  # noqa: F401  (svd3, svd2, qr3, eig3, polar_decompose)
from . import hash_grid as _hash_grid  # noqa: F401  (hash_grid_query, hash_grid_query_next, hash_grid_point_id)
from . import bvh as _bvh  # noqa: F401  (bvh_query_aabb, bvh_query_ray, bvh_query_next)
from . import mesh as _mesh  # noqa: F401  (mesh_query_point*, mesh_query_ray, mesh_query_aabb, mesh_eval_*)
from . import handle as _handle  # noqa: F401  (GeometryHandle: any geometry object, Warp's uint64)
