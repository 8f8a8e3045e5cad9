"""`gk.HashGrid.build` on the grid's device (OpenCL, third-party backends): a stable counting sort written in
the kernel language, so every backend runs it and no point travels to the host and back.

1. `cells`: each point's cell as the query computes it (floor(p * inv) per axis in the points' precision,
   clamped to +-2^29, NaN 0, then wrapped, floored %: core/library/hash_grid.py); `count`: its arrival
   rank in the cell from an atomic add on the cell's count (an arbitrary order among the cell's points).
2. An exclusive prefix sum over the cells' counts, work-efficient in passes: each thread sums a block of
   BLOCK counts (again over those sums, until one block is left), then each block's running sums go back
   down from its offset; the last pass writes each cell's [start, end) ([0, 0) when empty, as the host).
3. `scatter`: each point to start + arrival rank (the cell's slots, in that arbitrary order).
4. `order`: the slots again in index order, as the host build and Warp's radix sort keep them: in a cell of
   up to SMALL points each point counts the smaller indices in its cell's slots (O(k) each, in parallel);
   a larger cell (`count` lists them as they pass SMALL) is copied and heap-sorted by one thread (O(k log k);
   one cell holding most of the points makes that thread the build's critical path).
The launches are not recorded on a tape (a build is not differentiated, as in Warp)."""

# (no `from __future__ import annotations`: the @gk.func below needs evaluated annotations)

import threading
from types import SimpleNamespace

import numpy as np

from ..core import types as T
from ..core.func import Func
from ..core.lang import NAMES
from ..core.library.hash_grid import _LIMIT, HashGridData
from ..runtime.arrays.array import array as _array

BLOCK = 64        # counts one scan thread sums serially (a 128-byte line of int32 per thread)
SMALL = 128       # cells up to this many points rank each point in parallel; larger ones are heap-sorted

I32 = T.int32
gk = SimpleNamespace(**NAMES)       # the kernel language's names for the @gk.func code below
_INTS = T.array_type(T.int32)
_LOCK = threading.Lock()
_KERNELS: dict = {}


def _cells_kernel(s: T.ScalarType):
    """The kernel writing each point's cell, for points of scalar type `s`."""
    import gradkit as gk

    V3 = T.vector(3, s)
    coord = _coord(s)

    @gk.kernel
    def hash_grid_cells(grid: HashGridData, points: gk.array(dtype=V3), cells: gk.array(dtype=gk.int32)):
        i = gk.tid()
        p = points[i]
        inv = s(grid.cell_width_inv)
        cells[i] = _cell(grid, coord(p[0] * inv), coord(p[1] * inv), coord(p[2] * inv))

    return hash_grid_cells


def _sort_kernels() -> dict:
    """The count, scan, scatter and order kernels (on int32 cell ids: the same for every precision)."""
    import gradkit as gk

    ints = gk.array(dtype=gk.int32)

    @gk.kernel
    def hash_grid_count(cells: ints, ranks: ints, counts: ints, large: ints, num_large: ints):
        # apart from the cells: PoCL ran the two fused 3-8x slower than apart (an atomic in a kernel keeps
        # it from vectorising the arithmetic)
        i = gk.tid()
        c = cells[i]
        r = gk.atomic_add(counts, c, 1)
        ranks[i] = r
        if r == SMALL:                       # the cell just outgrew the parallel ranking: list it once
            large[gk.atomic_add(num_large, 0, 1)] = c

    @gk.kernel
    def hash_grid_block_sums(values: ints, n: int, sums: ints):
        b = gk.tid()
        total = int(0)
        for k in range(b * BLOCK, b * BLOCK + gk.min(BLOCK, n - b * BLOCK)):
            total += values[k]
        sums[b] = total

    @gk.kernel
    def hash_grid_block_scan(values: ints, n: int, offsets: ints, out: ints):
        b = gk.tid()
        run = offsets[b]
        for k in range(b * BLOCK, b * BLOCK + gk.min(BLOCK, n - b * BLOCK)):
            v = values[k]
            out[k] = run
            run += v

    @gk.kernel
    def hash_grid_cell_ranges(counts: ints, n: int, offsets: ints, starts: ints, ends: ints):
        b = gk.tid()
        run = offsets[b]
        for k in range(b * BLOCK, b * BLOCK + gk.min(BLOCK, n - b * BLOCK)):
            c = counts[k]
            if c > 0:
                starts[k] = run
                ends[k] = run + c
            else:
                starts[k] = 0
                ends[k] = 0
            run += c

    @gk.kernel
    def hash_grid_scatter(cells: ints, ranks: ints, starts: ints, slots: ints):
        i = gk.tid()
        slots[starts[cells[i]] + ranks[i]] = i

    @gk.kernel
    def hash_grid_order(cells: ints, starts: ints, ends: ints, slots: ints, point_ids: ints):
        i = gk.tid()
        c = cells[i]
        first = starts[c]
        k = ends[c] - first
        if k <= SMALL:                       # index order: count the cell's smaller indices
            r = int(0)
            for m in range(first, first + k):
                if slots[m] < i:
                    r += 1
            point_ids[first + r] = i

    @gk.kernel
    def hash_grid_order_large(large: ints, num_large: ints, starts: ints, ends: ints, slots: ints,
                              point_ids: ints):
        # a thread per listed cell (launched for as many as n points could fill): copy, then heap-sort
        t = gk.tid()
        if t < num_large[0]:
            c = large[t]
            first = starts[c]
            k = ends[c] - first
            for m in range(first, first + k):
                point_ids[m] = slots[m]
            for j in range(k // 2):
                _sift_down(point_ids, first, k // 2 - 1 - j, k)
            for j in range(k - 1):
                last = k - 1 - j
                top = point_ids[first]
                point_ids[first] = point_ids[first + last]
                point_ids[first + last] = top
                _sift_down(point_ids, first, 0, last)

    return dict(count=hash_grid_count, block_sums=hash_grid_block_sums, block_scan=hash_grid_block_scan,
                cell_ranges=hash_grid_cell_ranges, scatter=hash_grid_scatter, order=hash_grid_order,
                order_large=hash_grid_order_large)


def _coord(s: T.ScalarType) -> Func:
    """floor(v) as an int for `s` values v, clamped to +-_LIMIT, NaN 0: the query's coordinate
    (core/library/hash_grid.py `coord`), with the in-range case first (PoCL ran the query's clamp-everything
    form 4x slower than this compare and branch)."""
    lim = float(_LIMIT)

    def _coord(v: s) -> I32:
        c = gk.floor(v)
        out = I32(0)                        # NaN
        if c >= s(-lim) and c <= s(lim):
            out = I32(c)
        elif c > s(0.0):
            out = I32(_LIMIT)
        elif c < s(0.0):
            out = I32(-_LIMIT)
        return out

    _coord.__name__ = _coord.__qualname__ = f"_hash_grid_build_coord_{s.name}"
    return Func(_coord)


def _wrap(c: I32, dim: I32) -> I32:
    """c wrapped into [0, dim) (floored %), the division only for a c outside it (three per point cost more
    than the rest of the cell's arithmetic)."""
    out = c
    if c < 0 or c >= dim:
        out = c % dim
    return out


def _cell(grid: HashGridData, x: I32, y: I32, z: I32) -> I32:
    """The physical cell of virtual cell (x, y, z), each coordinate wrapped (floored %) into the grid, as the
    query and the host build (geometry/hash_grid.py `_cells`) index it."""
    return (_wrap(z, grid.dim_z) * (grid.dim_x * grid.dim_y) + _wrap(y, grid.dim_y) * grid.dim_x
            + _wrap(x, grid.dim_x))


def _sift_down(a: _INTS, base: I32, root: I32, end: I32) -> I32:
    """Sift a[base + root] down the max-heap a[base : base + end]; the slot it lands in."""
    r = root
    v = a[base + r]
    more = True
    while more:
        child = 2 * r + 1
        if child >= end:
            more = False
        else:
            if child + 1 < end:
                if a[base + child + 1] > a[base + child]:
                    child += 1
            if a[base + child] > v:
                a[base + r] = a[base + child]
                r = child
            else:
                more = False
    a[base + r] = v
    return r


_wrap = Func(_wrap)
_cell = Func(_cell)
_sift_down = Func(_sift_down)


def kernels(s: T.ScalarType) -> dict:
    """The build's kernels by name for points of scalar type `s`, made once (under a lock: builds may run in
    threads)."""
    with _LOCK:
        if s not in _KERNELS:
            if "sort" not in _KERNELS:
                _KERNELS["sort"] = _sort_kernels()
            _KERNELS[s] = dict(_KERNELS["sort"], cells=_cells_kernel(s))
        return _KERNELS[s]


class DeviceBuild:
    """One grid's scratch arrays for device builds (the cells' counts, per-point cells, ranks and slots, the
    scan's block sums), grown as builds need and reused across builds.

    Args:
        num_cells: the grid's cell count.
        device: the grid's device."""

    def __init__(self, num_cells: int, device):
        self.device = device
        self.num_cells = num_cells
        self.counts = self._ints(num_cells)
        self.points = 0
        self.cells = self.ranks = self.slots = self.large = None    # per point; the cells past SMALL points
        self.num_large = self._ints(1)
        # the scan's levels: sizes[0] = num_cells, sizes[l + 1] = its blocks, until one block is left;
        # sums[l]: level l's block sums (level l + 1's values), offsets[l]: their exclusive running sums
        sizes = [num_cells]
        while sizes[-1] > BLOCK:
            sizes.append(-(-sizes[-1] // BLOCK))
        self.sizes = sizes
        self.sums = [self._ints(m) for m in sizes[1:]]
        self.offsets = [self._ints(m) for m in sizes[1:]]
        self.zero = self._ints(1)                # the top block's offset

    def _ints(self, n: int):
        return _array(np.zeros(max(n, 1), np.int32), dtype=T.int32, device=self.device)

    def run(self, points, n: int, data: HashGridData, starts, ends, point_ids) -> None:
        """Bucket the first n `points` into `data`'s cells: fill `starts`, `ends` and `point_ids[:n]`."""
        from ..runtime.launch.launch import launch
        if n == 0:
            _clear(starts)
            _clear(ends)
            return
        k = kernels(points.dtype.scalar)
        dev, sizes = self.device, self.sizes
        if n > self.points:
            self.cells, self.ranks, self.slots = self._ints(n), self._ints(n), self._ints(n)
            self.large = self._ints(n // (SMALL + 1))
            self.points = n

        def go(kernel, dim, *args):
            launch(kernel, dim, inputs=list(args), device=dev, record_tape=False)

        _clear(self.counts)
        _clear(self.num_large)
        go(k["cells"], n, data, points, self.cells)
        go(k["count"], n, self.cells, self.ranks, self.counts, self.large, self.num_large)
        values = [self.counts] + self.sums             # level l's values
        for level in range(len(sizes) - 1):            # up: each level's block sums
            go(k["block_sums"], sizes[level + 1], values[level], sizes[level], self.sums[level])
        offset = self.zero                             # down: the top level in one block, then each level
        for level in range(len(sizes) - 1, 0, -1):     # from its blocks' offsets
            go(k["block_scan"], -(-sizes[level] // BLOCK), values[level], sizes[level], offset,
               self.offsets[level - 1])
            offset = self.offsets[level - 1]
        go(k["cell_ranges"], -(-sizes[0] // BLOCK), self.counts, sizes[0], offset, starts, ends)
        go(k["scatter"], n, self.cells, self.ranks, starts, self.slots)
        go(k["order"], n, self.cells, starts, ends, self.slots, point_ids)
        if n > SMALL:
            go(k["order_large"], n // (SMALL + 1), self.large, self.num_large, starts, ends, self.slots,
               point_ids)


def _clear(arr) -> None:
    """Zero `arr` on its device without recording it on a tape (a build is no differentiable step)."""
    if arr.nbytes:
        arr.device.impl.fill_zero(arr.device.info, arr.buffer, arr.nbytes)
    arr._bump()
