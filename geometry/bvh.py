"""`gk.Bvh`: a bounding-volume hierarchy over boxes for queries in kernels (Warp's `wp.Bvh`).

    bvh = gk.Bvh(lowers, uppers)         # gk.arrays of vec3: each item's box
    bvh.refit()                          # after the boxes moved (same items)
    gk.launch(k, n, inputs=[bvh, ...])   # or bvh.id, as Warp passes it

A kernel takes the BVH as a parameter annotated `gk.Bvh` (in the Warp dialect `wp.uint64`), the struct
`BvhData` (core/library/bvh.py) of flat arrays; the queries traverse it with an explicit stack.

The build runs on the host with NumPy, level by level (every node of a level at once): a node holding
more than LEAF_SIZE items is split at the median of its items' centres along the widest axis of those
centres (a segmented sort: `lexsort` by (node, coordinate)), so the tree is balanced, O(n log^2 n) in
vectorised passes and depth ceil(log2(n / LEAF_SIZE)) + 1. Leaves own contiguous ranges of the primitive
order; node bounds are refitted bottom-up (leaves by `minimum.reduceat` over their ranges, inner nodes
level by level), rounded outward to float32 so that they contain float64 items too.

On devices whose memory is not the host's (OpenCL, most plugins) float32 boxes are built on the device instead
(geometry/bvh_build.py: a linear BVH in kernels, same node layout, every query's result the same);
`device_build=` forces either.
"""

from __future__ import annotations

import numpy as np

from ..core import types as T
from ..core.library.bvh import LEAF_SIZE, BvhData
from ..runtime.arrays.array import array as _array
from ..runtime.launch.device import get_device
from ..runtime.state import current as state
from . import registry
from .refit import DeviceRefit


class Tree:
    """A built hierarchy's topology (host arrays): node_info rows (left, right, start, count), the
    primitive order, the leaves (ids, sorted by start), the inner nodes of each level and each node's split
    axis (the axis its items were split along, the left child taking the lower half; -1 for a leaf)."""

    def __init__(self, info: np.ndarray, prims: np.ndarray, leaves: np.ndarray, levels: list,
                 axes: np.ndarray | None = None):
        self.info, self.prims, self.leaves, self.levels = info, prims, leaves, levels
        self.axes = np.full(info.shape[0], -1, np.int64) if axes is None else axes
        # each leaf's items as a row of a (leaves, widest leaf) table, short rows padded with their last
        # item: a refit takes a leaf's bounds as a min / max over the columns (reduceat over the leaf ranges
        # and NumPy's axis reductions were most of a refit's time)
        counts = info[leaves, 3] if leaves.size and prims.size else np.zeros(0, np.int64)
        width = int(counts.max()) if counts.size else 0
        k = np.minimum(np.arange(width)[None, :], counts[:, None] - 1)
        self.leaf_items = prims[info[leaves, 2][:, None] + k] if width else np.zeros((0, 0), np.int64)

    @property
    def depth(self) -> int:
        return len(self.levels) + 1

    def device_info(self) -> np.ndarray:
        """node_info as kernels read it (core/library/bvh.py): (left, miss link, start, count), the miss link
        being the node a depth-first, left-first walk visits after this node's subtree (-1: none)."""
        out = self.info.copy()
        out[0, 1] = -1
        for level in self.levels:               # parents before children
            left, right = self.info[level, 0], self.info[level, 1]
            out[left, 1] = right
            out[right, 1] = out[level, 1]
        return out

    def ray_orders(self) -> np.ndarray:
        """(8 * nodes, 2) int rows (first child or -1 for a leaf, miss link) of a depth-first walk per octant
        of ray directions (octant o: axis a negative where bit a of o is set) that enters each inner node's
        child on the ray's near side of its split first (the left child along a positive direction): a
        closest-hit search then meets near hits early and prunes the far subtrees by them."""
        n = self.info.shape[0]
        out = np.full((8, n, 2), -1, np.int64)
        for o in range(8):
            first, miss = out[o, :, 0], out[o, :, 1]
            for level in self.levels:           # parents before children
                left, right = self.info[level, 0], self.info[level, 1]
                neg = (o >> np.maximum(self.axes[level], 0)) & 1 == 1
                near, far = np.where(neg, right, left), np.where(neg, left, right)
                first[level] = near
                miss[near] = far
                miss[far] = miss[level]
        return out.reshape(8 * n, 2)

    def bounds(self, lowers: np.ndarray, uppers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Node bounds from the items' bounds, in their precision (min and max round nothing): leaves over
        their items, then inner nodes from their children, deepest level first."""
        n_nodes = self.info.shape[0]
        lo = np.zeros((n_nodes, 3), lowers.dtype)
        hi = np.zeros((n_nodes, 3), uppers.dtype)
        if self.leaf_items.size:
            cols = self.leaf_items.T
            lo[self.leaves] = _fold(np.minimum, lowers, cols)
            hi[self.leaves] = _fold(np.maximum, uppers, cols)
        for level in reversed(self.levels):
            left, right = self.info[level, 0], self.info[level, 1]
            lo[level] = np.minimum(lo[left], lo[right])
            hi[level] = np.maximum(hi[left], hi[right])
        return lo, hi


def _fold(op, values: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """op over values[cols[0]], values[cols[1]], ... (rows of equal length)."""
    out = values[cols[0]]
    for col in cols[1:]:
        op(out, values[col], out=out)
    return out


def build_tree(lowers: np.ndarray, uppers: np.ndarray, leaf_size: int = LEAF_SIZE) -> Tree:
    """A balanced median-split hierarchy over n boxes ((n, 3) arrays, float32 or float64)."""
    n = lowers.shape[0]
    centres = 0.5 * (lowers.astype(np.float64) + uppers)     # float64 whatever the items' precision
    # each centre's rank along each axis, equal centres sharing one: a level's segmented sort by (node,
    # centre) is then a stable radix sort of one int64, node * n + rank, in the order lexsort gave
    # (lexsort was 60% of a 360k-item build)
    ranks = np.stack([np.unique(centres[:, a], return_inverse=True)[1].reshape(-1) for a in range(3)], axis=1) \
        if n else np.zeros((0, 3), np.int64)
    prims = np.arange(n, dtype=np.int64)
    info = np.zeros((max(2 * n - 1, 1), 4), np.int64)       # a binary tree over n >= 1 items per leaf
    info[0] = (-1, -1, 0, n)
    starts, counts, ids = np.array([0]), np.array([n]), np.array([0])
    next_id, levels, leaves = 1, [], []
    axes = np.full(info.shape[0], -1, np.int64)
    while ids.size:
        split = counts > leaf_size
        leaves.append(ids[~split])
        starts, counts, ids = starts[split], counts[split], ids[split]
        if not ids.size:
            break
        # the elements of the nodes to split, in order, and the node each belongs to
        seg = np.repeat(np.arange(ids.size), counts)
        pos = np.arange(seg.size) - np.repeat(np.cumsum(counts) - counts - starts, counts)
        c = centres[prims[pos]]
        first = np.cumsum(counts) - counts                   # each node's elements are contiguous in c
        lo = np.minimum.reduceat(c, first, axis=0)           # (ufunc.at took 45% of a 360k-item build)
        hi = np.maximum.reduceat(c, first, axis=0)
        axis = np.argmax(hi - lo, axis=1)
        order = _stable_order(seg * n + ranks[prims[pos], axis[seg]], ids.size * n)
        prims[pos] = prims[pos[order]]
        half = counts // 2
        left = next_id + 2 * np.arange(ids.size)
        next_id += 2 * ids.size
        levels.append(ids)
        axes[ids] = axis
        info[ids] = np.stack([left, left + 1, starts, np.zeros_like(left)], axis=1)
        starts = np.stack([starts, starts + half], axis=1).reshape(-1)
        counts = np.stack([half, counts - half], axis=1).reshape(-1)
        ids = np.stack([left, left + 1], axis=1).reshape(-1)
        info[ids] = np.stack([-np.ones_like(ids), -np.ones_like(ids), starts, counts], axis=1)
    info = info[:next_id]
    leaves = np.concatenate(leaves)
    leaves = leaves[np.argsort(info[leaves, 2], kind="stable")]
    return Tree(info, prims, leaves, levels, axes[:next_id])


def _stable_order(keys: np.ndarray, bound: int) -> np.ndarray:
    """The permutation sorting non-negative int64 `keys` (all below `bound`) stably: an LSD radix sort over
    16-bit digits, NumPy's stable argsort of uint16 being a radix sort (O(n) a digit; on int64 it is a
    merge sort)."""
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while bound >> shift:
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


def outward_f32(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 bounds as float32 bounds containing them (float32 bounds as they are)."""
    if lo.dtype == np.float32 and hi.dtype == np.float32:
        return lo, hi
    lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    lo32 = np.where(lo32 > lo, np.nextafter(lo32, np.float32(-np.inf)), lo32)
    hi32 = np.where(hi32 < hi, np.nextafter(hi32, np.float32(np.inf)), hi32)
    return lo32, hi32


class BvhArrays:
    """A built hierarchy's device arrays and the BvhData a kernel sees (shared by Bvh and Mesh)."""

    def __init__(self, device):
        self.device = device
        self._tree: Tree | None = None
        self.data: BvhData | None = None

    @property
    def tree(self) -> Tree | None:
        """The topology on the host (the refits read it); after a device build, read back from the device's
        node_info and prims at the first use (its split axes unknown there: -1)."""
        if self._tree is None and self.data is not None:
            self._tree = tree_from_device(self.node_info._read().reshape(-1, 4), self.prims._read().reshape(-1),
                                          self.data.num_items)
        return self._tree

    def build_device(self, lowers, uppers) -> None:
        """Build over float32 boxes (gk.arrays of vec3 on this device) with kernels on the device
        (geometry/bvh_build.py); ValueError if a box is not finite."""
        from . import bvh_build
        out = bvh_build.build(lowers, uppers, self.device)
        self._tree = None
        for name, arr in out.items():
            setattr(self, name, arr)
        self.data = BvhData(node_lowers=self.node_lowers, node_uppers=self.node_uppers, node_info=self.node_info,
                            ray_order=self.ray_order, prims=self.prims, item_lowers=self.item_lowers,
                            item_uppers=self.item_uppers, num_items=lowers.size)

    def build(self, lowers: np.ndarray, uppers: np.ndarray) -> None:
        self._tree = tree = build_tree(lowers, uppers)
        dev = dict(device=self.device)
        self.node_info = _array(tree.device_info().astype(np.int32), dtype=T.vector(4, T.int32), **dev)
        self.ray_order = _array(tree.ray_orders().astype(np.int32), dtype=T.vector(2, T.int32), **dev)
        self.prims = _array(tree.prims.astype(np.int32) if tree.prims.size else np.zeros(1, np.int32),
                            dtype=T.int32, **dev)
        n_nodes = tree.info.shape[0]
        self.node_lowers = _array(np.zeros((n_nodes, 3), np.float32), dtype=T.vec3, **dev)
        self.node_uppers = _array(np.zeros((n_nodes, 3), np.float32), dtype=T.vec3, **dev)
        self.item_lowers = _array(np.zeros((max(lowers.shape[0], 1), 3), np.float32), dtype=T.vec3, **dev)
        self.item_uppers = _array(np.zeros((max(lowers.shape[0], 1), 3), np.float32), dtype=T.vec3, **dev)
        self.data = BvhData(node_lowers=self.node_lowers, node_uppers=self.node_uppers, node_info=self.node_info,
                            ray_order=self.ray_order,
                            prims=self.prims, item_lowers=self.item_lowers, item_uppers=self.item_uppers,
                            num_items=lowers.shape[0])
        self.refit(lowers, uppers)

    def refit(self, lowers: np.ndarray, uppers: np.ndarray) -> None:
        """Recompute every node's bounds for the items' new bounds (same topology)."""
        n = lowers.shape[0]
        lo, hi = outward_f32(*self.tree.bounds(lowers, uppers))
        _write(self.node_lowers, lo)
        _write(self.node_uppers, hi)
        if n:
            ilo, ihi = outward_f32(lowers, uppers)
            _write(self.item_lowers, ilo)
            _write(self.item_uppers, ihi)


def tree_from_device(info: np.ndarray, prims: np.ndarray, n: int) -> Tree:
    """The Tree of device node_info rows (left, miss link, start, count) and prims (a device build's)."""
    info = info.astype(np.int64)
    rows = info.copy()
    inner = rows[:, 0] >= 0
    rows[:, 1] = np.where(inner, rows[:, 0] + 1, -1)
    levels, level = [], np.zeros(1, np.int64)
    while level.size:
        level = level[inner[level]]
        if level.size:
            levels.append(level)
            level = np.stack([rows[level, 0], rows[level, 0] + 1], axis=1).reshape(-1)
    leaves = np.flatnonzero(~inner)
    leaves = leaves[np.argsort(rows[leaves, 2], kind="stable")]
    return Tree(rows, prims[:n].astype(np.int64), leaves, levels)


def _write(arr, host: np.ndarray) -> None:
    """Overwrite device array `arr` (same shape) from host memory, in place."""
    if arr._host is not None:
        arr._host[...] = host.reshape(arr._host.shape)
    else:
        arr._write_host(np.ascontiguousarray(host.reshape(arr.shape + (-1,) if host.ndim > 1 else arr.shape)))
    arr._bump()


def host_vec3(a, what: str) -> np.ndarray:
    """A gk.array of 3-vectors (or anything NumPy reads as (n, 3)) as an (n, 3) host array: float32 stays
    float32 (bounds of float32 values are float32 values: nothing to round), anything else is float64."""
    host = a._read() if isinstance(a, _array) else np.asarray(a)
    dtype = np.float32 if host.dtype == np.float32 else np.float64
    host = np.asarray(host, dtype).reshape(-1, 3) if np.size(host) else np.zeros((0, 3), dtype)
    if not np.isfinite(host).all():
        raise ValueError(f"{what} must be finite")
    return host


class Bvh:
    """A BVH over the boxes [lowers[i], uppers[i]] (gk.arrays of vec3) on their device; `id` identifies
    it at launch (Warp's). `refit()` updates it after the boxes moved.

    Args:
        lowers: a gk.array of vec3 (or vec3d): each box's lower corner.
        uppers: a gk.array of the same shape: each box's upper corner.
        constructor: Warp's choice of build algorithm: "lbvh" (Warp's GPU builder) asks for the device
            build where device_build is None and the boxes allow it, "sah" and "median" for the host's
            median split; None: chosen by device_build.
        leaf_size: Warp's leaf size; accepted for Warp's signature, unused.
        device_build: build with kernels on the boxes' device (True; float32 boxes, a linear BVH) or with
            NumPy on the host (False; a median split); None: on the device for float32 boxes where its
            memory is not the host's (OpenCL, most plugins), on the host otherwise (cpu, c, numpy; float64
            boxes). The trees differ, every query's result is the same."""

    _gk_struct = BvhData._gk_struct        # `bvh: gk.Bvh` annotates a kernel parameter

    def __init__(self, lowers, uppers, constructor: str | None = None, leaf_size: int | None = None,
                 device_build: bool | None = None):
        for name, a in (("lowers", lowers), ("uppers", uppers)):
            if not isinstance(a, _array) or a.dtype.name not in ("vec3", "vec3d"):
                raise TypeError(f"Bvh: {name} must be a gk.array of vec3, got "
                                f"{a.dtype.name if isinstance(a, _array) else type(a).__name__}")
        if lowers.shape != uppers.shape:
            raise ValueError(f"Bvh: lowers and uppers differ in shape ({lowers.shape} and {uppers.shape})")
        self.lowers, self.uppers = lowers, uppers
        self.device = get_device(lowers.device)
        self._arrays = BvhArrays(self.device)
        on_device = lowers.dtype is T.vec3 and uppers.dtype is T.vec3 and lowers.size > 0 and state.forward_mode is None \
            and lowers.device is self.device and uppers.device is self.device
        if device_build and not on_device:
            raise ValueError("Bvh: a device build takes float32 boxes (vec3), at least one, outside forward mode")
        if device_build is None:
            device_build = on_device and (lowers._host is None if constructor is None else constructor == "lbvh")
        if device_build:
            self._arrays.build_device(lowers, uppers)
        else:
            self._arrays.build(host_vec3(lowers, "lowers"), host_vec3(uppers, "uppers"))
        self._refit = None          # the device refit's scratch (geometry/refit.py), made at the first refit
        self.id = registry.register(self)

    def refit(self) -> None:
        """Update the node bounds after `lowers` / `uppers` changed (the same items): on the device for
        float32 boxes (geometry/refit.py), else on the host (float64 boxes are rounded outward there)."""
        n = self.lowers.shape[0]
        if n and self.lowers.dtype is T.vec3 and self.uppers.dtype is T.vec3 and state.forward_mode is None \
                and self.lowers.device is self.device and self.uppers.device is self.device:
            if self._refit is None:
                self._refit = DeviceRefit(0, self.device)
            self._refit.boxes(self.lowers, self.uppers, self._arrays)
        else:
            self._arrays.refit(host_vec3(self.lowers, "lowers"), host_vec3(self.uppers, "uppers"))

    def _gk_struct_value(self) -> BvhData:
        return self._arrays.data

    def __repr__(self) -> str:
        return f"Bvh(items={self.lowers.shape[0]}, device='{self.device.name}', id={self.id})"


BvhData._gk_resolve = staticmethod(registry.resolver(BvhData, "gk.Bvh"))
