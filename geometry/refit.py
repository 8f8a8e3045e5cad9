"""Refits on the geometry's device, for float32 points and boxes (`gk.Mesh.refit`, run every step by Warp's
example_mesh, and `gk.Bvh.refit`): kernels in the kernel language, so every backend runs them and no point
travels to the host. On CPUs (the LLVM backend, the C plugin) a mesh of fewer than FUSE_BELOW triangles
refits in one launch of one thread (mesh_walk): it walks the node ids downwards (build_tree numbers nodes
breadth-first with the right child beside the left, left + 1, so it meets children before their parent),
taking each leaf's triangles' bounds and edge lengths where it meets the leaf. Otherwise one kernel takes
each item's bounds in parallel (a triangle's, with its edge lengths; a box's, checked finite), then the
node bounds, bottom-up, one of two ways:
- on CPUs one thread walks the node ids downwards (node_walk), one launch;
- elsewhere (GPUs, the reference interpreter) each leaf's bounds in parallel, then each level's inner
  nodes in parallel from the deepest, a launch per level (on CPUs the launches cost more than the walk; on
  a lent H100 through OpenCL the walk took 2.6 ms, a GPU thread runs a serial loop slowly, against the host
  refit's 1.4 ms).
Bounds take their minima and maxima as comparisons and selects (`vmin`, `vmax`: NumPy's np.minimum /
np.maximum for numbers, so the host refit's bits): gk.min / gk.max are IEEE minimum / maximum, which the
LLVM backend expands to several instructions a component; at 9k triangles that was 75 -> 56 us for the
triangles' kernel and 37 -> 22 us for the walk. A non-finite corner makes the edge sum NaN (a NaN
coordinate its triangle's edges, an infinite one the root's box too), so the mesh refit's check is the sum
it reads back anyway (no flag to zero and read back). On this 2-core CPU at 9k triangles (example_mesh) a
mesh refit took 126 us before these changes, 64 us after (Warp's 103 us); NumPy's version (geometry/bvh.py)
1.7 ms. The launches are not recorded on a tape (a refit is not differentiated, as in Warp)."""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def min_max_funcs():
    """(vmin, vmax): np.minimum / np.maximum of two vec3 of numbers (b where equal) as @gk.func, a compare and
    a select per component (gk.min / gk.max are IEEE's, several instructions a component on CPUs); the
    refits here and the device BVH build (bvh_build.py) share them."""
    import gradkit as gk

    @gk.func
    def vmin(a: gk.vec3, b: gk.vec3) -> gk.vec3:
        return gk.vec3(gk.where(a[0] < b[0], a[0], b[0]), gk.where(a[1] < b[1], a[1], b[1]),
                       gk.where(a[2] < b[2], a[2], b[2]))

    @gk.func
    def vmax(a: gk.vec3, b: gk.vec3) -> gk.vec3:
        return gk.vec3(gk.where(a[0] > b[0], a[0], b[0]), gk.where(a[1] > b[1], a[1], b[1]),
                       gk.where(a[2] > b[2], a[2], b[2]))

    return vmin, vmax


@functools.lru_cache(maxsize=None)
def kernels():
    """(triangle_bounds, box_bounds, node_walk, leaf_bounds, inner_bounds, mesh_walk), compiled on first use."""
    import gradkit as gk
    FLT_MAX = 3.4028234663852886e38        # float32's largest number  # noqa: N806
    vmin, vmax = min_max_funcs()

    @gk.kernel
    def triangle_bounds(points: gk.array(dtype=gk.vec3), indices: gk.array(dtype=gk.int32),
                        lowers: gk.array(dtype=gk.vec3), uppers: gk.array(dtype=gk.vec3),
                        edges: gk.array(dtype=gk.float32)):
        t = gk.tid()
        a = points[indices[3 * t]]
        b = points[indices[3 * t + 1]]
        c = points[indices[3 * t + 2]]
        lowers[t] = vmin(vmin(a, b), c)
        uppers[t] = vmax(vmax(a, b), c)
        z = (a - a) + (b - b) + (c - c)              # NaN where a coordinate is infinite or NaN, else 0
        # Warp's sum per triangle, NaN for a non-finite corner (the lengths of finite points are not NaN)
        edges[t] = gk.length(a - b) + gk.length(a - c) + gk.length(c - b) + (z[0] + z[1] + z[2])

    @gk.kernel
    def box_bounds(lowers: gk.array(dtype=gk.vec3), uppers: gk.array(dtype=gk.vec3),
                   item_lowers: gk.array(dtype=gk.vec3), item_uppers: gk.array(dtype=gk.vec3),
                   bad: gk.array(dtype=gk.int32)):
        t = gk.tid()
        a = lowers[t]
        b = uppers[t]
        item_lowers[t] = a
        item_uppers[t] = b
        z = (a - a) + (b - b)
        if not (z[0] == 0.0 and z[1] == 0.0 and z[2] == 0.0):
            gk.atomic_max(bad, 0, 1)

    @gk.kernel
    def node_walk(info: gk.array(dtype=gk.vector(4, gk.int32)), prims: gk.array(dtype=gk.int32),
                  item_lowers: gk.array(dtype=gk.vec3), item_uppers: gk.array(dtype=gk.vec3),
                  node_lowers: gk.array(dtype=gk.vec3), node_uppers: gk.array(dtype=gk.vec3), n_nodes: int):
        for k in range(n_nodes):
            node = n_nodes - 1 - k
            row = info[node]
            lo = gk.vec3()
            hi = gk.vec3()
            if row[3] > 0:                           # a leaf: its items
                first = prims[row[2]]
                lo = item_lowers[first]
                hi = item_uppers[first]
                for j in range(row[2] + 1, row[2] + row[3]):
                    lo = vmin(lo, item_lowers[prims[j]])
                    hi = vmax(hi, item_uppers[prims[j]])
            else:                                    # children row[0] and row[0] + 1
                lo = vmin(node_lowers[row[0]], node_lowers[row[0] + 1])
                hi = vmax(node_uppers[row[0]], node_uppers[row[0] + 1])
            node_lowers[node] = lo
            node_uppers[node] = hi

    @gk.kernel
    def leaf_bounds(leaves: gk.array(dtype=gk.int32), info: gk.array(dtype=gk.vector(4, gk.int32)),
                    prims: gk.array(dtype=gk.int32), item_lowers: gk.array(dtype=gk.vec3),
                    item_uppers: gk.array(dtype=gk.vec3), node_lowers: gk.array(dtype=gk.vec3),
                    node_uppers: gk.array(dtype=gk.vec3)):
        node = leaves[gk.tid()]
        row = info[node]
        first = prims[row[2]]
        lo = item_lowers[first]
        hi = item_uppers[first]
        for j in range(row[2] + 1, row[2] + row[3]):
            lo = vmin(lo, item_lowers[prims[j]])
            hi = vmax(hi, item_uppers[prims[j]])
        node_lowers[node] = lo
        node_uppers[node] = hi

    @gk.kernel
    def inner_bounds(nodes: gk.array(dtype=gk.int32), offset: int, info: gk.array(dtype=gk.vector(4, gk.int32)),
                     node_lowers: gk.array(dtype=gk.vec3), node_uppers: gk.array(dtype=gk.vec3)):
        node = nodes[offset + gk.tid()]
        left = info[node][0]
        node_lowers[node] = vmin(node_lowers[left], node_lowers[left + 1])
        node_uppers[node] = vmax(node_uppers[left], node_uppers[left + 1])

    @gk.kernel
    def mesh_walk(points: gk.array(dtype=gk.vec3), corners: gk.array(dtype=gk.vector(3, gk.int32)),
                  info: gk.array(dtype=gk.vector(4, gk.int32)), prims: gk.array(dtype=gk.int32),
                  item_lowers: gk.array(dtype=gk.vec3), item_uppers: gk.array(dtype=gk.vec3),
                  node_lowers: gk.array(dtype=gk.vec3), node_uppers: gk.array(dtype=gk.vec3),
                  edge_sum: gk.array(dtype=gk.float64), n_nodes: int):
        """triangle_bounds and node_walk in one thread: each leaf's triangles where the walk meets them
        (`corners[j]`: the vertex ids of triangle prims[j], in leaf order: one load less a triangle than
        through prims and the mesh's indices, 8 of 68 us at 9k triangles)."""
        total = gk.float64(0.0)
        lo = gk.vec3()
        hi = gk.vec3()
        for k in range(n_nodes):
            node = n_nodes - 1 - k
            row = info[node]
            lo = gk.vec3(FLT_MAX, FLT_MAX, FLT_MAX)       # vmin(FLT_MAX, x) is x for every number
            hi = gk.vec3(-FLT_MAX, -FLT_MAX, -FLT_MAX)
            if row[3] > 0:                           # a leaf: its triangles' bounds, then theirs
                for j in range(row[2], row[2] + row[3]):
                    t = prims[j]
                    v = corners[j]
                    a = points[v[0]]
                    b = points[v[1]]
                    c = points[v[2]]
                    tlo = vmin(vmin(a, b), c)
                    thi = vmax(vmax(a, b), c)
                    item_lowers[t] = tlo
                    item_uppers[t] = thi
                    lo = vmin(lo, tlo)
                    hi = vmax(hi, thi)
                    total += gk.float64(gk.length(a - b) + gk.length(a - c) + gk.length(c - b))
            else:
                lo = vmin(node_lowers[row[0]], node_lowers[row[0] + 1])
                hi = vmax(node_uppers[row[0]], node_uppers[row[0] + 1])
            node_lowers[node] = lo
            node_uppers[node] = hi
        # NaN for a non-finite corner, without a test per triangle (17 us of 86 at 9k triangles): a NaN
        # coordinate makes its edges NaN; an infinite one (edges inf, or NaN) reaches the root's box, the
        # last node walked, whose lo - lo + hi - hi is then NaN
        z = (lo - lo) + (hi - hi)
        edge_sum[0] = total + gk.float64(z[0] + z[1] + z[2])

    return triangle_bounds, box_bounds, node_walk, leaf_bounds, inner_bounds, mesh_walk


# On CPUs a mesh of fewer triangles than this refits in one launch of one thread (mesh_walk): the CPU backend
# runs straight-line launches below 2^15 threads on the calling thread anyway (backends/cpu/backend.py's
# INLINE_BELOW), so the fused walk loses no parallelism and saves a launch, a pass over the item bounds
# and the host's sum (example_mesh, 9k triangles: 56 + 22 + 4 us -> 72 us in all on this 2-core CPU; 64 us
# with the corners in leaf order).
FUSE_BELOW = 1 << 15
SERIAL_BACKENDS = ("cpu", "c")       # where one thread walking the nodes beats a launch per level


class DeviceRefit:
    """The scratch arrays of one geometry object's device refits (edge lengths; the boxes' non-finite flag).

    Args:
        num_items: the triangles a mesh refit takes (0 for a BVH of boxes).
        device: the geometry's device.
        walk: the node bounds by one thread (True) or a launch per level (False); None: by the device's
            backend (SERIAL_BACKENDS walk). A walking mesh refit of fewer than `fuse_below` triangles
            (FUSE_BELOW; tests lower it) takes the triangles' bounds in the same walk (mesh_walk)."""

    def __init__(self, num_items: int, device, walk: bool | None = None):
        self.walk = getattr(device, "backend", None) in SERIAL_BACKENDS if walk is None else walk
        from ..core import types as T
        from ..runtime.arrays.array import array
        self.fuse_below = FUSE_BELOW
        self.edges = array(np.zeros(max(num_items, 1), np.float32), dtype=T.float32, device=device)
        self.edge_sum = array(np.zeros(1, np.float64), dtype=T.float64, device=device)
        self.bad = array(np.zeros(1, np.int32), dtype=T.int32, device=device)
        self._levels: dict = {}         # id(BvhArrays) -> (its tree, leaf ids, inner ids, level spans)
        self._corners: dict = {}        # id(BvhArrays) -> (its tree, indices, their version, leaf-order corners)

    def mesh(self, points, indices, num_tris: int, bvh) -> float:
        """Refit `bvh` (geometry/bvh.py's BvhArrays, built over these triangles) to `points`; the average edge
        length. ValueError if a point is not finite (the node bounds are then not to be used)."""
        from ..runtime.launch.launch import launch
        if self.walk and num_tris < self.fuse_below:
            corners = self._corners.get(id(bvh))
            if corners is None or corners[0] is not bvh.tree or corners[1] is not indices \
                    or corners[2] != indices.version:
                corners = self._corners[id(bvh)] = (bvh.tree, indices, indices.version,
                                                    _leaf_corners(bvh.tree, indices))
            launch(kernels()[5], 1, inputs=[points, corners[3], bvh.node_info, bvh.prims, bvh.item_lowers,
                                            bvh.item_uppers, bvh.node_lowers, bvh.node_uppers, self.edge_sum,
                                            bvh.node_info.shape[0]], device=points.device, record_tape=False)
            total = float(self.edge_sum._read()[0])
        else:
            launch(kernels()[0], num_tris, inputs=[points, indices, bvh.item_lowers, bvh.item_uppers, self.edges],
                   device=points.device, record_tape=False)
            total = float(np.add.reduce(self.edges._read()[:num_tris], dtype=np.float64))
        if total != total:                  # NaN: a corner was not finite (triangle_bounds, mesh_walk)
            raise ValueError("Mesh points must be finite")
        if not (self.walk and num_tris < self.fuse_below):
            self._nodes(bvh)
        return total / (3 * num_tris)

    def boxes(self, lowers, uppers, bvh) -> None:
        """Refit `bvh` to the boxes [lowers[i], uppers[i]] (float32); ValueError if one is not finite."""
        self._items(kernels()[1], lowers.shape[0], [lowers, uppers, bvh.item_lowers, bvh.item_uppers],
                    "Bvh lowers and uppers")
        self._nodes(bvh)

    def _items(self, kernel, n: int, args: list, what: str) -> None:
        from ..runtime.launch.launch import launch
        self.bad.zero_()
        launch(kernel, n, inputs=args + [self.bad], device=args[0].device, record_tape=False)
        if self.bad._read()[0]:
            raise ValueError(f"{what} must be finite")

    def _nodes(self, bvh) -> None:
        """The node bounds from the items': one thread's walk, or the leaves and then inner nodes level by level
        from the deepest (their ids on the device, made once)."""
        from ..runtime.launch.launch import launch
        _, _, node_walk, leaf_bounds, inner_bounds, _ = kernels()
        if self.walk:
            launch(node_walk, 1, inputs=[bvh.node_info, bvh.prims, bvh.item_lowers, bvh.item_uppers,
                                         bvh.node_lowers, bvh.node_uppers, bvh.node_info.shape[0]],
                   device=bvh.device, record_tape=False)
            return
        levels = self._levels.get(id(bvh))
        if levels is None or levels[0] is not bvh.tree:
            levels = self._levels[id(bvh)] = (bvh.tree, *_level_arrays(bvh.tree, bvh.device))
        _, leaves, inner, spans = levels
        dev = bvh.device
        launch(leaf_bounds, leaves.shape[0], inputs=[leaves, bvh.node_info, bvh.prims, bvh.item_lowers,
                                                     bvh.item_uppers, bvh.node_lowers, bvh.node_uppers],
               device=dev, record_tape=False)
        for offset, count in spans:
            launch(inner_bounds, count, inputs=[inner, offset, bvh.node_info, bvh.node_lowers, bvh.node_uppers],
                   device=dev, record_tape=False)


def _level_arrays(tree, device) -> tuple:
    """(leaf ids, inner ids deepest level first, [(offset, count)] of each level in them) on `device`."""
    from ..core import types as T
    from ..runtime.arrays.array import array
    deepest_first = list(reversed(tree.levels))
    inner = np.concatenate(deepest_first).astype(np.int32) if deepest_first else np.zeros(1, np.int32)
    offsets = np.cumsum([0] + [lv.size for lv in deepest_first])
    spans = [(int(o), int(lv.size)) for o, lv in zip(offsets, deepest_first)]
    ints = dict(dtype=T.int32, device=device)
    return array(tree.leaves.astype(np.int32), **ints), array(inner, **ints), spans


def _leaf_corners(tree, indices):
    """The vertex ids of each triangle in the tree's primitive (leaf) order, a gk.array of int32 3-vectors on
    the indices' device (mesh_walk's `corners`)."""
    from ..core import types as T
    from ..runtime.arrays.array import array
    tris = indices._read().reshape(-1, 3)
    return array(np.ascontiguousarray(tris[tree.prims].astype(np.int32)), dtype=T.vector(3, T.int32),
                 device=indices.device)
