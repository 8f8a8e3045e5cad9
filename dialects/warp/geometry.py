"""Warp's geometry over gradkit's (geometry/): `wp.HashGrid(dim_x, dim_y, dim_z, device=, dtype=)` is
`gk.HashGrid` with Warp's device names; in kernels `wp.hash_grid_query`, `wp.hash_grid_query_next` and
`wp.hash_grid_point_id` are gradkit's (core/library/hash_grid.py), and a `wp.uint64` parameter takes the
grid or its `.id`. `wp.Bvh` and `wp.Mesh` are gradkit's (geometry/bvh.py, geometry/mesh.py; their queries
core/library/bvh.py and mesh.py), a `wp.uint64` parameter taking them or their ids too (the geometry
handle, core/library/handle.py). `wp.Volume` is not there (WarpFeatureMissing)."""

from __future__ import annotations

from ..core.library.bvh import BvhQuery  # noqa: F401  (Warp's names for the query types)
from ..core.library.hash_grid import HashGridQuery  # noqa: F401
from ..core.library.mesh import MeshQuery, MeshQueryPoint, MeshQueryRay  # noqa: F401
from ..geometry.bvh import Bvh as _GkBvh
from ..geometry.bvh import host_vec3 as _host_vec3
from ..geometry.mesh import Mesh as _GkMesh
from ..geometry.hash_grid import HashGrid as _GkHashGrid
from .device import to_gk
from .errors import WarpFeatureMissing


class HashGrid(_GkHashGrid):
    """`wp.HashGrid`: gradkit's hash grid; `device` takes Warp's names ("cuda" is gradkit's OpenCL)."""

    def __init__(self, dim_x: int, dim_y: int, dim_z: int, device=None, dtype=None):
        try:
            super().__init__(dim_x, dim_y, dim_z, device=to_gk(device), dtype=dtype)
        except ValueError as error:
            if "cells" not in str(error):
                raise
            raise HashGridSizeError(f"HashGrid: cell count exceeds supported limit ({error})") from None

    def build(self, points, radius: float, groups=None) -> None:
        """Warp's build; inside wp.ScopedCapture it is recorded with the launches and runs at each
        capture_launch, on the points as they are then (as a CUDA graph replays it)."""
        from .runtime import _CAPTURE, _capturing
        if groups is not None:
            raise WarpFeatureMissing("HashGrid.build(groups=)", "grouped hash grids are not supported yet")
        if _capturing():
            _CAPTURE[-1].ops.append((HashGrid.build, (self, points, radius), {}))
            return
        super().build(points, radius)

    def reserve(self, num_points: int, with_groups: bool = False) -> None:
        """Warp's reserve; refused inside wp.ScopedCapture, as Warp refuses it (it allocates: reserve before
        capture)."""
        from .runtime import _capturing
        if _capturing():
            raise NotImplementedError("HashGrid.reserve() inside a graph capture: reserve before capture")
        super().reserve(num_points)


class HashGridSizeError(RuntimeError, ValueError):
    """Too many cells: Warp's RuntimeError, and gradkit's ValueError."""


MeshQueryAABB = MeshQuery       # mesh_query_aabb's and mesh_query_sphere's query (float32 meshes), Warp's MeshQuery


def _no_groups(what: str, groups) -> None:
    if groups is not None:
        raise WarpFeatureMissing(f"{what}(groups=)", "Grouped BVHs (a root per group id) are not supported yet")


class Bvh(_GkBvh):
    """`wp.Bvh(lowers, uppers, constructor=, leaf_size=)`: gradkit's BVH (takes its device from the
    arrays, as Warp's), with Warp's `rebuild()`; `groups=` raises WarpFeatureMissing."""

    def __init__(self, lowers, uppers, constructor: str | None = None, leaf_size: int | None = None, groups=None):
        _no_groups("Bvh", groups)
        super().__init__(lowers, uppers, constructor=constructor, leaf_size=leaf_size)

    def rebuild(self, constructor: str | None = None) -> None:
        """Warp's rebuild: a new tree over the boxes as they are now (refit keeps the old tree's shape).
        Inside wp.ScopedCapture it is recorded with the launches and runs at each capture_launch."""
        from .runtime import _CAPTURE, _capturing
        if _capturing():
            _CAPTURE[-1].ops.append((Bvh.rebuild, (self, constructor), {}))
            return
        self._arrays.build(_host_vec3(self.lowers, "lowers"), _host_vec3(self.uppers, "uppers"))
        self._refit = None


class Mesh(_GkMesh):
    """`wp.Mesh(points, indices, velocities=, ...)`: gradkit's mesh; `groups=` raises WarpFeatureMissing. Bad
    inputs raise Warp's RuntimeError, which is also gradkit's TypeError or ValueError."""

    def __init__(self, points=None, indices=None, velocities=None, support_winding_number: bool = False,
                 bvh_constructor: str | None = None, bvh_leaf_size: int | None = None, groups=None):
        _no_groups("Mesh", groups)
        try:
            super().__init__(points, indices, velocities=velocities, support_winding_number=support_winding_number,
                             bvh_constructor=bvh_constructor, bvh_leaf_size=bvh_leaf_size)
        except (TypeError, ValueError) as error:
            raise _MESH_ERRORS[type(error) if type(error) in _MESH_ERRORS else ValueError](str(error)) from None


class MeshTypeError(RuntimeError, TypeError):
    """A wp.Mesh input of the wrong type: Warp's RuntimeError, gradkit's TypeError."""


class MeshValueError(RuntimeError, ValueError):
    """A wp.Mesh input of the wrong shape, range or device: Warp's RuntimeError, gradkit's ValueError."""


_MESH_ERRORS = {TypeError: MeshTypeError, ValueError: MeshValueError}
