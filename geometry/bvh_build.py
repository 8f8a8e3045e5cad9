"""`gk.Bvh` / `gk.Mesh` BVH builds on the geometry's device (OpenCL, GPUs, plugins): a linear BVH written in the
kernel language, so every backend runs it and no box travels to the host and back.

1. `centre_blocks`, `centre_top`: the box centres' bounds (a block of BLOCK boxes a thread, then one thread
   over the blocks), and a flag for a non-finite box (the build then raises ValueError, as the host build).
2. `morton`: each box's 30-bit Morton code (10 bits an axis of its centre in those bounds), its bounds
   copied to the BVH's item arrays.
3. A stable LSD radix sort of (code, index) by RADIX bits a pass: a thread counts the digits of a block of
   SORT_BLOCK keys, the (digit, block) counts are scanned (hash_grid_build's scan kernels), a thread scatters
   its block in order, so equal digits keep their order.
4. `karras`: the hierarchy over the sorted codes (Karras 2012, equal codes split by index): each inner
   node's range, split, children, parent and split axis (the highest bit where its codes differ).
5. `mark` and a scan: leaves are the nodes of at most LEAF_SIZE items whose parent holds more (the host
   build's leaf size); each leaf flags its first item, and the scan ranks the leaves.
6. `emit`: node ids as geometry/bvh.py's build numbers them (children after their parent, the right child
   at left + 1, so the refits and queries read the tree as they read a host-built one): inner node X in
   the q-th place of a depth-first walk of the inner nodes has its children at 1 + 2q and 2 + 2q, where q =
   (leaves before X's range) + (ancestors whose left subtree holds X), counted by walking up the parents.
7. `links`: each node's miss link and its (first child, miss link) rows of the 8 ray-octant walks
   (Tree.ray_orders' layout), by walking up to the first ancestor below which it was the near child.
8. `bounds`: each node's box as the min / max over its items' boxes (no atomics; min and max of numbers in
   any order, so the same numbers as the host's fold): a node of up to CUT items over its range of the sorted
   items; such a node under a larger one is a part (the parts tile the sorted items), and each larger node
   then takes the min / max over the parts in its range. A thread reads at most about CUT + n / (smallest
   part) boxes, instead of the root's thread reading all n.

The tree differs from the host build's median split (a Morton-order split), so queries visit other nodes,
but every query's result is the same set of items and closest distances (they depend on the items' boxes,
not on the tree). Walking up costs O(depth) a node (depth ~ 2-3 log2 n for spread boxes). The launches are
not recorded on a tape (a build is not differentiated, as in Warp).
Kernels: bvh_build_kernels.py; this module is the host driver (allocations, launches, the radix sort's
scans)."""

from ..core import types as T
from ..core.library.bvh import LEAF_SIZE
from ..runtime.arrays.creation import zeros as _zeros
from . import hash_grid_build
from .bvh_build_kernels import BLOCK, CUT, KEY_BITS, RADIX, SORT_BLOCK, kernels

__all__ = ["BLOCK", "CUT", "KEY_BITS", "LEAF_SIZE", "RADIX", "SORT_BLOCK", "build", "kernels"]


class _Scan:
    """An exclusive prefix sum of m int32 values on `device` with hash_grid_build's block kernels."""

    def __init__(self, m: int, device):
        sizes = [m]
        while sizes[-1] > hash_grid_build.BLOCK:
            sizes.append(-(-sizes[-1] // hash_grid_build.BLOCK))
        self.sizes = sizes
        self.sums = [_ints(s, device) for s in sizes[1:]]
        self.offsets = [_ints(s, device) for s in sizes[1:]]
        self.zero = _ints(1, device)

    def run(self, go, values, out) -> None:
        k = hash_grid_build.kernels(T.float32)
        block, sizes = hash_grid_build.BLOCK, self.sizes
        levels = [values] + self.sums
        for level in range(len(sizes) - 1):
            go(k["block_sums"], sizes[level + 1], levels[level], sizes[level], self.sums[level])
        offset = self.zero
        for level in range(len(sizes) - 1, 0, -1):
            go(k["block_scan"], -(-sizes[level] // block), levels[level], sizes[level], offset,
               self.offsets[level - 1])
            offset = self.offsets[level - 1]
        go(k["block_scan"], -(-sizes[0] // block), values, sizes[0], offset, out)


def _ints(n: int, device):
    """A zero-filled int32 array of max(n, 1) on the device (allocated there: nothing uploaded)."""
    return _zeros(max(n, 1), dtype=T.int32, device=device)


def _vecs(n: int, device):
    return _zeros(max(n, 1), dtype=T.vec3, device=device)


def build(lowers, uppers, device) -> dict:
    """A BVH over the n >= 1 float32 boxes [lowers[i], uppers[i]] (gk.arrays of vec3 on `device`): its arrays
    on the device, as geometry/bvh.py's BvhArrays holds them (node_info, ray_order, prims, node_lowers,
    node_uppers, item_lowers, item_uppers). ValueError if a box is not finite."""
    from ..runtime.launch.launch import launch
    k = kernels()
    n = lowers.size
    if lowers.ndim != 1:
        lowers, uppers = lowers.reshape(-1), uppers.reshape(-1)

    def go(kernel, dim, *args):
        launch(kernel, dim, inputs=list(args), device=device, record_tape=False)

    out = dict(item_lowers=_vecs(n, device), item_uppers=_vecs(n, device))
    blocks = -(-n // BLOCK)
    block_lo, block_hi, block_bad = _vecs(blocks, device), _vecs(blocks, device), _ints(blocks, device)
    scene, bad = _vecs(2, device), _ints(1, device)
    go(k["centre_blocks"], blocks, lowers, uppers, n, block_lo, block_hi, block_bad)
    go(k["centre_top"], 1, block_lo, block_hi, block_bad, blocks, scene, bad)
    if bad._read()[0]:
        raise ValueError("Bvh lowers and uppers must be finite")
    if n <= LEAF_SIZE:
        out.update(node_info=_zeros(1, dtype=T.vec4i, device=device), ray_order=_zeros(8, dtype=T.vec2i, device=device),
                   prims=_ints(n, device), node_lowers=_vecs(1, device), node_uppers=_vecs(1, device))
        go(k["morton"], n, lowers, uppers, scene, out["item_lowers"], out["item_uppers"], _ints(n, device),
           _ints(n, device), _ints(n, device))
        go(k["one_leaf"], 1, n, out["item_lowers"], out["item_uppers"], out["prims"], out["node_info"],
           out["ray_order"], out["node_lowers"], out["node_uppers"])
        return out
    keys, vals, keys2, vals2, flags = (_ints(n, device) for _ in range(5))
    go(k["morton"], n, lowers, uppers, scene, out["item_lowers"], out["item_uppers"], keys, vals, flags)
    sort_blocks = -(-n // SORT_BLOCK)
    hist, offsets = _ints(sort_blocks << RADIX, device), _ints(sort_blocks << RADIX, device)
    scan = _Scan(sort_blocks << RADIX, device)
    for shift in range(0, KEY_BITS, RADIX):
        go(k["sort_count"], sort_blocks, keys, n, shift, sort_blocks, hist)
        scan.run(go, hist, offsets)
        go(k["sort_scatter"], sort_blocks, keys, vals, n, shift, sort_blocks, offsets, keys2, vals2)
        keys, vals, keys2, vals2 = keys2, vals2, keys, vals
    total = 2 * n - 1
    kleft, kfirst, klast, kaxis = (_ints(n - 1, device) for _ in range(4))
    kparent, outid = _ints(total, device), _ints(total, device)
    go(k["karras"], n - 1, keys, n, kleft, kfirst, klast, kparent, kaxis)
    go(k["mark"], total, n, kfirst, klast, kparent, flags)
    lrank = _ints(n, device)
    _Scan(n, device).run(go, flags, lrank)
    leaves = _ints(1, device)
    go(k["leaf_total"], 1, lrank, flags, n, leaves)
    nodes = 2 * int(leaves._read()[0]) - 1
    info = _zeros(nodes, dtype=T.vec4i, device=device)
    ray_order = _zeros(8 * nodes, dtype=T.vec2i, device=device)
    node_lowers, node_uppers = _vecs(nodes, device), _vecs(nodes, device)
    go(k["emit"], total, n, kleft, kfirst, klast, kparent, lrank, outid, info)
    go(k["links"], total, n, kleft, kfirst, klast, kparent, kaxis, outid, nodes, info, ray_order)
    part_lo, part_hi, part_next = _vecs(n, device), _vecs(n, device), _ints(n, device)
    for phase in (0, 1):
        go(k["bounds"], total, n, kfirst, klast, kparent, outid, vals, out["item_lowers"], out["item_uppers"],
           node_lowers, node_uppers, part_lo, part_hi, part_next, phase)
    out.update(node_info=info, ray_order=ray_order, prims=vals, node_lowers=node_lowers, node_uppers=node_uppers)
    return out
