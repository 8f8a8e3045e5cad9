"""`gk.Mesh`: a triangle mesh with a BVH over its triangles, for point, ray and box queries in kernels
(Warp's `wp.Mesh`).

    mesh = gk.Mesh(points, indices, velocities=None)   # points: gk.array of vec3 (or vec3d); indices: int32
    mesh.refit()                                       # after the points moved (same triangles)
    gk.launch(k, n, inputs=[mesh, ...])                # or mesh.id, as Warp passes it

A kernel takes the mesh as a parameter annotated `gk.Mesh` (float32 points; `gk.Mesh[gk.float64]` for
float64 ones; the Warp dialect's `wp.uint64`), the struct `MeshData` of core/library/mesh.py. The mesh
keeps the caller's `points` array (a kernel reads it, so gradients land in `points.grad`); the BVH is
built from the triangles' bounds on the host (geometry/bvh.py), or for float32 points on a device whose
memory is not the host's on that device (the bounds by geometry/refit.py's kernel, the tree by
geometry/bvh_build.py); `refit()` recomputes the bounds from the points as they are now, on the mesh's
device for float32 points (geometry/refit.py).
"""

from __future__ import annotations

import numpy as np

from ..core import types as T
from ..core.library.mesh import MeshData, MeshData64
from ..runtime.arrays.array import array as _array
from ..runtime.launch.device import get_device
from ..runtime.state import current as state
from . import registry
from .bvh import BvhArrays, host_vec3
from .refit import DeviceRefit
from .refit import kernels as refit_kernels

_DATA = {T.float32: MeshData, T.float64: MeshData64}


class _MeshType(type):
    def __getitem__(cls, dtype):
        """`gk.Mesh[gk.float64]`: the annotation of a kernel parameter taking a float64 mesh."""
        return _DATA[T.as_type(dtype)]


class Mesh(metaclass=_MeshType):
    """A triangle mesh: `points` (gk.array of vec3 or vec3d), `indices` (int32, 3 per triangle),
    optional `velocities` (as points); `id` identifies it at launch (Warp's).

    Args:
        points: the vertices, a gk.array of vec3 or vec3d.
        indices: a gk.array of int32, 3 per triangle, on the points' device.
        velocities: per-vertex velocities (same dtype and shape as `points`) for `mesh_eval_velocity`; None:
            none.
        support_winding_number: Warp's switch for winding-number queries; accepted for Warp's signature.
        bvh_constructor: Warp's BVH build algorithm: "lbvh" asks for the device build where device_build is
            None and the points allow it, "sah" and "median" for the host's; None: chosen by device_build.
        bvh_leaf_size: Warp's BVH leaf size; accepted for Warp's signature, unused.
        device_build: build the BVH with kernels on the mesh's device (True; float32 points) or with NumPy
            on the host (False); None: on the device for float32 points where its memory is not the host's
            (OpenCL, most plugins), on the host otherwise. The trees differ, every query's result is the
            same."""

    _gk_struct = MeshData._gk_struct        # `mesh: gk.Mesh` annotates a kernel parameter (float32 points)

    def __init__(self, points, indices, velocities=None, support_winding_number: bool = False,
                 bvh_constructor: str | None = None, bvh_leaf_size: int | None = None,
                 device_build: bool | None = None):
        if not isinstance(points, _array) or points.dtype not in (T.vec3, T.vector(3, T.float64)):
            got = points.dtype.name if isinstance(points, _array) else type(points).__name__
            raise TypeError(f"Mesh: points must be a gk.array of vec3 or vec3d, got {got}")
        if not isinstance(indices, _array) or indices.dtype is not T.int32:
            got = indices.dtype.name if isinstance(indices, _array) else type(indices).__name__
            raise TypeError(f"Mesh: indices must be a gk.array of int32, got {got}")
        if indices.size % 3:
            raise ValueError(f"Mesh: indices must hold 3 per triangle, got {indices.size}")
        if velocities is not None and (not isinstance(velocities, _array) or velocities.dtype is not points.dtype
                                       or velocities.shape != points.shape):
            raise TypeError("Mesh: velocities must be a gk.array of the points' dtype and shape")
        self.device = get_device(points.device)
        for name, a in (("indices", indices), ("velocities", velocities)):
            if a is not None and a.device is not self.device:
                raise ValueError(f"Mesh: {name} are on {a.device.name}, the points on {self.device.name}")
        self.dtype = points.dtype.scalar
        self._points, self.indices, self.velocities = points, indices, velocities
        tris = indices._read().reshape(-1, 3).astype(np.int64)
        if tris.size and (tris.min() < 0 or tris.max() >= points.shape[0]):
            raise ValueError(f"Mesh: indices must lie in [0, {points.shape[0]}), got [{tris.min()}, {tris.max()}]")
        self._tris = tris
        self._bvh = BvhArrays(self.device)
        self._refit = None          # the device refit's scratch arrays, made at the first refit
        on_device = self.dtype is T.float32 and self.num_tris > 0 and state.forward_mode is None
        if device_build and not on_device:
            raise ValueError("Mesh: a device build takes float32 points and at least one triangle, outside "
                             "forward mode")
        if device_build is None:
            device_build = on_device and (points._host is None if bvh_constructor is None
                                          else bvh_constructor == "lbvh")
        if device_build:
            self._build_on_device()
        else:
            self._bvh.build(*self._bounds())
        self._data = None
        self.id = registry.register(self)

    def _build_on_device(self) -> None:
        """The triangles' bounds and edge lengths by the device refit's kernel, the tree over them by
        geometry/bvh_build.py: no point leaves the device (the edge lengths' sum comes back, as a refit's)."""
        from ..runtime.launch.launch import launch
        n = self.num_tris
        self._refit = DeviceRefit(n, self.device, walk=False)
        lo = _array(np.zeros((n, 3), np.float32), dtype=T.vec3, device=self.device)
        hi = _array(np.zeros((n, 3), np.float32), dtype=T.vec3, device=self.device)
        launch(refit_kernels()[0], n, inputs=[self._points, self.indices, lo, hi, self._refit.edges],
               device=self.device, record_tape=False)
        total = float(np.add.reduce(self._refit.edges._read()[:n], dtype=np.float64))
        if total != total:                  # NaN: a corner was not finite
            raise ValueError("Mesh points must be finite")
        self._edge = total / (3 * n)
        self._bvh.build_device(lo, hi)
        self._refit = None                  # the refits choose their own walk

    @property
    def points(self):
        return self._points

    @points.setter
    def points(self, value) -> None:
        """Warp's setter: new points of the same shape and dtype, then a refit."""
        if not isinstance(value, _array) or value.dtype is not self._points.dtype or value.shape != self._points.shape:
            raise ValueError("Mesh.points: the new points must be a gk.array of the same dtype and shape")
        self._points = value
        self._data = None
        self.refit()

    @property
    def num_tris(self) -> int:
        return self._tris.shape[0]

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Each triangle's bounds (in the points' precision), and the average edge length (Warp's, for
        sign_normal's tolerance; Warp's refit recomputes it too). Elementwise over the three corners: NumPy's
        reductions over a (n, 3, 3) array's middle axis were most of a refit's time."""
        p = host_vec3(self._points, "Mesh points")
        if not self._tris.size:
            self._edge = 0.0
            return np.zeros((0, 3), p.dtype), np.zeros((0, 3), p.dtype)
        a, b, c = (p[self._tris[:, k]] for k in range(3))
        lo = np.minimum(np.minimum(a, b), c)
        hi = np.maximum(np.maximum(a, b), c)
        # in the points' precision, as Warp's refit (float32), the mean summed in float64
        edges = np.stack([_length(a - c), _length(b - a), _length(c - b)], axis=1)
        self._edge = float(edges.mean(dtype=np.float64))
        return lo, hi

    def refit(self) -> None:
        """Update the BVH's bounds to the points as they are now (the same triangles): for float32 points on
        the mesh's device (geometry/refit.py), for float64 ones on the host (their bounds are rounded
        outward to float32 there)."""
        if self.dtype is T.float32 and self.num_tris and state.forward_mode is None:
            if self._refit is None:
                self._refit = DeviceRefit(self.num_tris, self.device)
            self._edge = self._refit.mesh(self._points, self.indices, self.num_tris, self._bvh)
        else:
            self._bvh.refit(*self._bounds())
        if self._data is not None:
            # in place: the struct (and the geometry handle holding it, geometry/handle.py) stays the same
            # object, so a launch after a refit binds no new handle (12.7 us a step of example_mesh)
            self._data.average_edge_length = self._edge

    def _gk_struct_value(self):
        if self._data is None:
            vel = self.velocities if self.velocities is not None else self._points
            self._data = _DATA[self.dtype](points=self._points, velocities=vel, indices=self.indices,
                                           num_tris=self.num_tris, num_points=self._points.shape[0],
                                           has_velocities=int(self.velocities is not None),
                                           average_edge_length=self._edge, bvh=self._bvh.data)
        return self._data

    def __repr__(self) -> str:
        return (f"Mesh(points={self._points.shape[0]}, triangles={self.num_tris}, dtype={self.dtype.name}, "
                f"device='{self.device.name}', id={self.id})")


def _length(d: np.ndarray) -> np.ndarray:
    """Row lengths of an (n, 3) array."""
    return np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])


MeshData._gk_resolve = staticmethod(registry.resolver(MeshData, "float32 gk.Mesh"))
MeshData64._gk_resolve = staticmethod(registry.resolver(MeshData64, "float64 gk.Mesh"))
