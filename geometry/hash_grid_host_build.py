"""`gk.HashGrid.build` on the host with NumPy: each point's cell, a stable radix sort, the sorted cells' runs.

Every per-point array lives in scratch kept across builds (`HostBuild`): on this machine a fresh NumPy
array of a few hundred KiB costs about 3 us per 4 KiB page in page faults when glibc has handed the memory
back since the last build (two 750 KiB temporaries alive at once cost sph's build 0.55 ms of its 1.7), so
the builds write into the same buffers with `out=` instead."""

from __future__ import annotations

import numpy as np

from ..core.library.hash_grid import _LIMIT


class HostBuild:
    """One grid's host-build scratch (the points scaled and floored, their integer cells, the cells sorted),
    grown as builds need and reused across builds.

    Args:
        dims: the grid's (dim_x, dim_y, dim_z)."""

    def __init__(self, dims: tuple):
        self.dims = dims
        self.num_cells = dims[0] * dims[1] * dims[2]
        self.points = 0
        self.scaled = {}                         # by the points' NumPy dtype: (n, 3) floored p * inv
        self.coords = self.cells = self.sorted = self.low = self.runs = None

    def _grow(self, n: int) -> None:
        n = max(n, 1)
        if n > self.points:
            self.scaled = {}
            self.coords = np.empty((3, n), np.int32)
            self.cells = np.empty(n, np.int32)
            self.sorted = np.empty(n, np.int32)
            self.low = np.empty(n, np.uint16)
            self.runs = np.empty(n, np.bool_)
            self.points = n

    def cells_of(self, p: np.ndarray, inv: np.float32) -> np.ndarray:
        """Each point's physical cell (a view of scratch), as the kernel-side query computes it
        (core/library/hash_grid.py): floor(p * inv) in the points' precision, wrapped (floored %)."""
        n = p.shape[0]
        self._grow(n)
        f = self.scaled.get(p.dtype)
        if f is None:
            f = self.scaled[p.dtype] = np.empty((self.points, 3), p.dtype)
        f = f[:n]
        with np.errstate(invalid="ignore", over="ignore"):
            np.multiply(p, p.dtype.type(inv), out=f)
            np.floor(f, out=f)
        cell = self.cells[:n]
        if not n:
            return cell
        lo, hi = f.min(), f.max()                         # NaN anywhere makes both NaN
        if not (lo >= -_LIMIT and hi <= _LIMIT):
            cell[:] = self._cells_clamped(f)
            return cell
        # the common case: every coordinate finite and in range, int32 all the way, one contiguous row per axis
        # (NumPy divides a contiguous int32 row by a scalar with libdivide, 7x faster than np.remainder or a
        # strided column), and an axis whose cells all lie in [0, dim) needs no wrap; the cell index is below
        # num_cells <= 2^31 - 1, and so is each partial sum
        ci = self.coords[:, :n]
        np.copyto(ci, f.T, casting="unsafe")
        dims = self.dims
        if lo < 0 or hi >= min(dims):
            q = self.sorted[:n]                          # free until `order`
            for a, d in enumerate(dims):
                row = ci[a]
                if row.min() < 0 or row.max() >= d:
                    np.floor_divide(row, d, out=q)      # floored: row - d * q is in [0, d), as the kernel's `%`
                    q *= np.int32(d)
                    row -= q
        np.multiply(ci[2], np.int32(dims[0] * dims[1]), out=cell)
        ci[1] *= np.int32(dims[0])
        cell += ci[1]
        cell += ci[0]
        return cell

    def _cells_clamped(self, c: np.ndarray) -> np.ndarray:
        """cells_of for floored coordinates with NaNs (cell 0) or beyond +-_LIMIT (clamped), as the query."""
        c = np.where(np.isnan(c), 0, np.clip(c, -_LIMIT, _LIMIT)).astype(np.int64)
        c %= np.array(self.dims, np.int64)
        dx, dy = self.dims[0], self.dims[1]
        return (c[:, 2] * (dx * dy) + c[:, 1] * dx + c[:, 0]).astype(np.int32)

    def order(self, cell: np.ndarray) -> np.ndarray:
        """The permutation sorting `cell` stably: LSD radix sort over 16-bit digits (NumPy's stable argsort
        of uint16 is a radix sort, O(n) per digit)."""
        n = cell.shape[0]
        low = self.low[:n]
        np.copyto(low, cell, casting="unsafe")           # the low 16 bits (wraps modulo 2^16)
        order = np.argsort(low, kind="stable")
        if self.num_cells > 0x10000:
            high = self.sorted[:n]
            np.take(cell, order, out=high, mode="clip")
            np.right_shift(high, 16, out=high)
            np.copyto(low, high, casting="unsafe")
            order = order[np.argsort(low, kind="stable")]
        return order

    def ranges(self, cell: np.ndarray, order: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        """Each occupied cell's [start, end) in the sorted order into `starts` / `ends` (host arrays of every
        cell); every other cell [0, 0). O(n) besides clearing the two arrays."""
        n = cell.shape[0]
        starts.fill(0)
        ends.fill(0)
        if not n:
            return
        sc = self.sorted[:n]
        np.take(cell, order, out=sc, mode="clip")
        runs = self.runs[:n]
        runs[0] = True
        np.not_equal(sc[1:], sc[:-1], out=runs[1:])
        first = np.flatnonzero(runs)
        occupied = sc[first]
        starts[occupied] = first
        ends[occupied[:-1]] = first[1:]
        ends[occupied[-1]] = n
