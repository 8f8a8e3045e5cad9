"""`gk.HashGrid`: a uniform hash grid over points for neighbour queries in kernels (Warp's `wp.HashGrid`).

    grid = gk.HashGrid(dim_x, dim_y, dim_z, device=None)
    grid.build(points, radius)          # points: a gk.array of vec3 (or vec3d); radius: the cell width
    gk.launch(k, n, inputs=[grid, ...])  # or grid.id, as Warp passes it

A kernel takes the grid as a parameter annotated `gk.HashGrid` (in the Warp dialect `wp.uint64`), which is
the struct `HashGridData` (core/library/hash_grid.py): at launch the grid object, or its `id`, binds to
that struct's arrays and sizes, so the kernel is compiled once and the query is ordinary IR.

A build buckets the points in O(n + cells) one of two ways, with the same result: each point's cell
(floor(p / width) per axis, wrapped modulo the dimensions, computed in the points' precision exactly as the
query computes it), the points sorted stably by cell (within a cell they keep their index order, as Warp's
radix sort keeps them, so neighbour loops add in Warp's order), each cell's [start, end) ([0, 0) if empty).
- On the host with NumPy (geometry/hash_grid_host_build.py): a two-pass LSD radix sort of 16-bit digits
  (`argsort(kind="stable")` on uint16 is NumPy's radix sort) and the sorted cells' runs.
- On the device, as kernels (geometry/hash_grid_build.py): a counting sort, so no point travels to the host
  and back every step.
By default (`default_device_build`) a device whose memory is not the host's (OpenCL, most plugins) builds
on the device, and one whose memory is the host's (cpu, c, numpy) on the host: there the host build was the
faster at every size measured (below). `build(..., device_build=)` forces either. The grid's arrays live on
its device (`reserve(n)` sizes them ahead).
"""

from __future__ import annotations

import operator

import numpy as np

from ..core import types as T
from ..core.library.hash_grid import HashGridData
from ..runtime.arrays.array import array as _array
from ..runtime.launch.device import get_device
from . import registry
from .hash_grid_build import DeviceBuild
from .hash_grid_host_build import HostBuild

MAX_CELLS = 2 ** 31 - 1


def default_device_build(grid: HashGrid) -> bool:
    """Whether `grid.build` runs as kernels on the grid's device unless told: where the device's memory is
    not the host's (its arrays have no host view).

    Where it is the host's, the host build was as fast or faster at every size measured on the cpu device
    (2 cores, 2026-11-27, load 1.3-1.9, median of 5 builds; points uniform in the grid's box, or over twice
    it so that cells wrap; 8,192 to 1M points in 16^3 to 128^3 cells): host / kernel time 0.28-1.03, the
    1.03 within noise (62,500 uniform points in 48^3 cells, 1.18 / 1.14 ms), 0.72-0.86 at 250k-1M uniform
    points in 64^3-128^3 cells; in their own processes sph's build (62,500 points, 25^3) 1.2 / 1.4 ms and
    dem's (8,192, 128^3) 0.5 / 1.9 ms. Both builds are O(points + cells), the kernel build's costs per point
    (a rank per point against its cell's others) and per cell (its scan) each the larger here, so there is
    no crossover to model. The kernel build's launches use a second core where one is free: at load 1.0,
    with the host build before its reused scratch, 1M points in 64^3 cells took 24.4 ms on the host and 17.3
    as kernels, so on an idle machine the largest builds may favour the kernels; the default stays on the
    host (the conservative choice: it never measured slower by more than noise). The c and numpy devices
    run kernels slower still."""
    return grid.cell_starts._host is None


class HashGrid:
    """A hash grid of dim_x * dim_y * dim_z cells on `device`; `id` identifies it at launch (Warp's).

    Args:
        dim_x: cells along x (positions wrap around: the grid is a hash, not a bounded box).
        dim_y: cells along y.
        dim_z: cells along z.
        device: where its arrays live; None: the current device.
        dtype: the point type's scalar, gk.float32 (vec3 points) or gk.float64 (vec3d); None: float32."""

    _gk_struct = HashGridData._gk_struct        # `grid: gk.HashGrid` annotates a kernel parameter

    def __init__(self, dim_x: int, dim_y: int, dim_z: int, device=None, dtype=None):
        try:
            dims = tuple(operator.index(d) for d in (dim_x, dim_y, dim_z))
        except TypeError:
            raise TypeError("HashGrid dimensions must be integers") from None
        if min(dims) <= 0:
            raise ValueError(f"HashGrid dimensions must be positive, got {dims}")
        if dims[0] * dims[1] * dims[2] > MAX_CELLS:
            raise ValueError(f"HashGrid has {dims[0] * dims[1] * dims[2]} cells; the limit is {MAX_CELLS}")
        self.dtype = T.float32 if dtype is None else T.as_type(dtype)
        if self.dtype not in (T.float32, T.float64):
            raise TypeError(f"HashGrid dtype must be float32 or float64, got {self.dtype.name}")
        self.device = get_device(device)
        self.dim_x, self.dim_y, self.dim_z = dims
        self.num_cells = dims[0] * dims[1] * dims[2]
        self.cell_width = 0.0
        self.num_points = 0
        self.reserved = False
        self.id = registry.register(self)        # one id space with gk.Bvh and gk.Mesh (geometry/registry.py)
        ints = dict(dtype=T.int32, device=self.device)
        self.cell_starts = _array(np.zeros(self.num_cells, np.int32), **ints)
        self.cell_ends = _array(np.zeros(self.num_cells, np.int32), **ints)
        self.point_ids = _array(np.zeros(1, np.int32), **ints)
        self._data = None
        self._device_build = None                # the device build's scratch arrays, made on its first use
        self._host_build = None                  # the host build's scratch arrays, likewise

    def reserve(self, num_points: int) -> None:
        """Size the point arrays for builds of up to `num_points` points (builds grow them as needed).

        Args:
            num_points: the largest number of points a build will bucket."""
        num_points = operator.index(num_points)
        if num_points > self.point_ids.shape[0]:
            old = self.point_ids._read()
            host = np.zeros(num_points, np.int32)
            host[:old.shape[0]] = old
            self.point_ids = _array(host, dtype=T.int32, device=self.device)
            self._data = None
        self.reserved = True

    def build(self, points, radius: float, device_build: bool | None = None) -> None:
        """Bucket `points` (a gk.array of vec3, or vec3d for a float64 grid) into cells of width `radius`.

        Args:
            points: the points, on the grid's device.
            radius: the cell width; queries find the points within this distance.
            device_build: build with kernels on the grid's device (True) or with NumPy on the host (False);
                None: `default_device_build(grid)`. Both give the same arrays."""
        want = T.vector(3, self.dtype)
        if not isinstance(points, _array) or points.dtype is not want:
            got = points.dtype.name if isinstance(points, _array) else type(points).__name__
            raise TypeError(f"HashGrid.build: points must be a gk.array of {want.name}, got {got}")
        if points.device is not self.device:
            raise ValueError(f"HashGrid.build: the points are on {points.device.name}, the grid on "
                             f"{self.device.name}")
        if not radius > 0.0:
            raise ValueError(f"HashGrid.build: the cell width (radius) must be positive, got {radius}")
        if device_build is None:
            device_build = default_device_build(self)
        if device_build:
            self._build_on_device(points, radius)
        else:
            self._build_on_host(points, radius)

    def _build_on_device(self, points, radius: float) -> None:
        """The build as kernels on the grid's device (geometry/hash_grid_build.py): no point leaves it."""
        if points.ndim != 1:
            points = points.reshape(-1)          # a view: arrays are contiguous
        n = points.size
        inv = np.float32(1.0) / np.float32(radius)
        self.reserve(max(n, 1))
        if self._device_build is None:
            self._device_build = DeviceBuild(self.num_cells, self.device)
        data = HashGridData(cell_starts=self.cell_starts, cell_ends=self.cell_ends, point_ids=self.point_ids,
                            num_points=n, dim_x=self.dim_x, dim_y=self.dim_y, dim_z=self.dim_z,
                            cell_width_inv=inv)
        self._device_build.run(points, n, data, self.cell_starts, self.cell_ends, self.point_ids)
        self.cell_width, self._inv, self.num_points = float(np.float32(radius)), inv, n
        self._data = None

    def _build_on_host(self, points, radius: float) -> None:
        """The build with NumPy (geometry/hash_grid_host_build.py): the points' cells, a stable radix sort, the
        cells' runs; copied to the device where its memory is not the host's."""
        p = points._read().reshape(-1, 3)
        n = p.shape[0]
        inv = np.float32(1.0) / np.float32(radius)      # the kernel reads it as float32 (HashGridData)
        work = self._host_work()
        cell = work.cells_of(p, inv)
        order = work.order(cell)
        self.reserve(max(n, 1))
        ids, starts, ends = self.point_ids, self.cell_starts, self.cell_ends
        if ids._host is not None:                 # host-memory devices: filled in place
            np.copyto(ids._host[:n], order, casting="unsafe")
            work.ranges(cell, order, starts._host, ends._host)
            for arr in (ids, starts, ends):
                arr._bump()
        else:
            self._write(ids, order.astype(np.int32), n)
            host = [np.empty(self.num_cells, np.int32) for _ in range(2)]
            work.ranges(cell, order, *host)
            self._write(starts, host[0], self.num_cells)
            self._write(ends, host[1], self.num_cells)
        self.cell_width, self._inv, self.num_points = float(np.float32(radius)), inv, n
        self._data = None

    def _host_work(self) -> HostBuild:
        if self._host_build is None:
            self._host_build = HostBuild((self.dim_x, self.dim_y, self.dim_z))
        return self._host_build

    def _cells(self, p: np.ndarray, inv: np.float32) -> np.ndarray:
        """Each point's physical cell, as the kernel-side query computes it (core/library/hash_grid.py)."""
        return self._host_work().cells_of(p, inv).copy()

    def _cells_clamped(self, c: np.ndarray) -> np.ndarray:
        """_cells for floored coordinates with NaNs (cell 0) or beyond +-_LIMIT (clamped), as the query."""
        return self._host_work()._cells_clamped(c)

    @staticmethod
    def _write(arr, host: np.ndarray, n: int) -> None:
        """Write the first n elements of device array `arr` from host (the rest keeps its contents)."""
        if arr._host is not None:                 # host-memory devices: in place
            arr._host[:n] = host[:n]
        elif n == arr.shape[0]:
            arr._write_host(host[:n])
        else:
            full = arr._read()
            full[:n] = host[:n]
            arr._write_host(full)
        arr._bump()

    def _gk_struct_value(self) -> HashGridData:
        """What a kernel's grid parameter receives (built once per build)."""
        if self._data is None:
            self._data = HashGridData(cell_starts=self.cell_starts, cell_ends=self.cell_ends,
                                      point_ids=self.point_ids, num_points=self.num_points, dim_x=self.dim_x,
                                      dim_y=self.dim_y, dim_z=self.dim_z,
                                      cell_width_inv=getattr(self, "_inv", np.float32(0.0)))
        return self._data

    def __repr__(self) -> str:
        return (f"HashGrid({self.dim_x}, {self.dim_y}, {self.dim_z}, device='{self.device.name}', "
                f"points={self.num_points}, cell_width={self.cell_width})")


def _resolve(value):
    """A launch argument standing for a grid: its id (Warp passes `grid.id`); None if it is none."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        grid = registry.OBJECTS.get(int(value))
        if not isinstance(grid, HashGrid):
            raise ValueError(f"no gk.HashGrid has id {int(value)} (was it garbage-collected?)")
        return grid._gk_struct_value()
    return None


HashGridData._gk_resolve = staticmethod(_resolve)
