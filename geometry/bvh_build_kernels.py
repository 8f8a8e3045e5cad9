"""The device BVH build's kernels (bvh_build.py's steps 1-8, as its docstring describes them) and the small
@gk.func helpers they share, made once; bvh_build.py is the host driver that allocates and launches them."""

# (no `from __future__ import annotations`: the @gk.func code below needs evaluated annotations)

import threading
from types import SimpleNamespace

from ..core import types as T
from ..core.func import Func
from ..core.lang import NAMES
from ..core.library.bvh import LEAF_SIZE
from .refit import min_max_funcs

BLOCK = 64              # boxes one thread of the centres' bounds reduces
RADIX = 8               # key bits a sort pass
SORT_BLOCK = 256        # keys one thread of a sort pass counts and scatters
KEY_BITS = 30
CUT = 256               # nodes of up to this many items take their box over their items, larger ones over parts

I32 = T.int32
gk = SimpleNamespace(**NAMES)       # the kernel language's names for the @gk.func code below
_INTS = T.array_type(T.int32)
_LOCK = threading.Lock()
_KERNELS: dict = {}


def _top_bit(x: I32) -> I32:
    """The position of the highest set bit of x > 0 (a binary search)."""
    r = I32(0)
    v = x
    if v >= 65536:
        v = v >> 16
        r += 16
    if v >= 256:
        v = v >> 8
        r += 8
    if v >= 16:
        v = v >> 4
        r += 4
    if v >= 4:
        v = v >> 2
        r += 2
    if v >= 2:
        r += 1
    return r


def _delta(keys: _INTS, n: I32, i: I32, j: I32) -> I32:
    """Karras's delta: the common prefix length of (key, index) at sorted positions i and j; -1 outside."""
    out = I32(-1)
    if j >= 0 and j < n:
        x = keys[i] ^ keys[j]
        if x != 0:
            out = 31 - _top_bit(x)
        else:
            out = 63 - _top_bit(i ^ j)
    return out


def _spread(v: I32) -> I32:
    """The low 10 bits of v spread to every third bit."""
    x = v & 1023
    x = (x | (x << 16)) & 0x030000FF
    x = (x | (x << 8)) & 0x0300F00F
    x = (x | (x << 4)) & 0x030C30C3
    x = (x | (x << 2)) & 0x09249249
    return x


def _first(n: I32, kfirst: _INTS, y: I32) -> I32:
    """The first sorted position of combined node y (inner nodes 0..n-2, then leaf n-1+j for item j)."""
    out = y - (n - 1)
    if y < n - 1:
        out = kfirst[y]
    return out


def _last(n: I32, klast: _INTS, y: I32) -> I32:
    out = y - (n - 1)
    if y < n - 1:
        out = klast[y]
    return out


_top_bit = Func(_top_bit)
_delta = Func(_delta)
_spread = Func(_spread)
_first = Func(_first)
_last = Func(_last)


def _make_kernels() -> dict:
    """The build's kernels by name."""
    import gradkit as gk

    ints = gk.array(dtype=gk.int32)
    vecs = gk.array(dtype=gk.vec3)
    BIG = 3.4028234663852886e38        # float32's largest number  # noqa: N806
    vmin, vmax = min_max_funcs()

    @gk.kernel
    def bvh_centre_blocks(lowers: vecs, uppers: vecs, n: int, block_lo: vecs, block_hi: vecs, block_bad: ints):
        b = gk.tid()
        lo = gk.vec3(BIG, BIG, BIG)
        hi = gk.vec3(-BIG, -BIG, -BIG)
        bad = int(0)
        for k in range(b * BLOCK, gk.min(b * BLOCK + BLOCK, n)):
            a = lowers[k]
            c = uppers[k]
            z = (a - a) + (c - c)                # NaN where a coordinate is not finite
            if not (z[0] == 0.0 and z[1] == 0.0 and z[2] == 0.0):
                bad = 1
            m = 0.5 * (a + c)
            lo = vmin(lo, m)
            hi = vmax(hi, m)
        block_lo[b] = lo
        block_hi[b] = hi
        block_bad[b] = bad

    @gk.kernel
    def bvh_centre_top(block_lo: vecs, block_hi: vecs, block_bad: ints, blocks: int, scene: vecs, bad: ints):
        lo = gk.vec3(BIG, BIG, BIG)
        hi = gk.vec3(-BIG, -BIG, -BIG)
        flag = int(0)
        for b in range(blocks):
            lo = vmin(lo, block_lo[b])
            hi = vmax(hi, block_hi[b])
            flag = gk.max(flag, block_bad[b])
        scene[0] = lo
        scene[1] = hi
        bad[0] = flag

    @gk.kernel
    def bvh_morton(lowers: vecs, uppers: vecs, scene: vecs, item_lowers: vecs, item_uppers: vecs,
                   keys: ints, vals: ints, flags: ints):
        i = gk.tid()
        a = lowers[i]
        c = uppers[i]
        item_lowers[i] = a
        item_uppers[i] = c
        lo = scene[0]
        ext = scene[1] - lo
        m = 0.5 * (a + c) - lo
        code = int(0)
        for ax in range(3):
            q = int(0)
            if ext[ax] > 0.0:
                t = m[ax] / ext[ax] * 1023.0
                if t > 0.0:                      # NaN and negatives: 0
                    q = int(gk.min(t, 1023.0))
            code = code | (_spread(q) << (2 - ax))
        keys[i] = code
        vals[i] = i
        flags[i] = 0

    @gk.kernel
    def bvh_sort_count(keys: ints, n: int, shift: int, blocks: int, hist: ints):
        b = gk.tid()
        for d in range(1 << RADIX):
            hist[d * blocks + b] = 0
        for k in range(b * SORT_BLOCK, gk.min(b * SORT_BLOCK + SORT_BLOCK, n)):
            d = (keys[k] >> shift) & ((1 << RADIX) - 1)
            hist[d * blocks + b] += 1

    @gk.kernel
    def bvh_sort_scatter(keys: ints, vals: ints, n: int, shift: int, blocks: int, offsets: ints,
                         keys_out: ints, vals_out: ints):
        b = gk.tid()
        for k in range(b * SORT_BLOCK, gk.min(b * SORT_BLOCK + SORT_BLOCK, n)):
            key = keys[k]
            d = (key >> shift) & ((1 << RADIX) - 1)
            p = offsets[d * blocks + b]
            offsets[d * blocks + b] = p + 1
            keys_out[p] = key
            vals_out[p] = vals[k]

    @gk.kernel
    def bvh_karras(keys: ints, n: int, kleft: ints, kfirst: ints, klast: ints, kparent: ints, kaxis: ints):
        i = gk.tid()
        d = int(1)
        if _delta(keys, n, i, i + 1) < _delta(keys, n, i, i - 1):
            d = -1
        dmin = _delta(keys, n, i, i - d)
        lmax = int(2)
        while _delta(keys, n, i, i + lmax * d) > dmin:
            lmax = lmax * 2
        span = int(0)
        t = lmax // 2
        while t >= 1:
            if _delta(keys, n, i, i + (span + t) * d) > dmin:
                span += t
            t = t // 2
        j = i + span * d
        dnode = _delta(keys, n, i, j)
        s = int(0)
        div = int(2)
        more = True
        while more:
            t = (span + div - 1) // div
            if _delta(keys, n, i, i + (s + t) * d) > dnode:
                s += t
            div = div * 2
            more = t > 1
        gamma = i + s * d + gk.min(d, 0)
        first = gk.min(i, j)
        last = gk.max(i, j)
        left = gamma
        if first == gamma:
            left = n - 1 + gamma
        right = gamma + 1
        if last == gamma + 1:
            right = n + gamma
        kleft[i] = left
        kfirst[i] = first
        klast[i] = last
        kparent[left] = i
        kparent[right] = i
        axis = int(0)
        x = keys[first] ^ keys[last]
        if x != 0:
            axis = 2 - _top_bit(x) % 3
        kaxis[i] = axis
        if i == 0:
            kparent[0] = -1

    @gk.func
    def kept(n: int, kfirst: ints, klast: ints, kparent: ints, y: int) -> bool:
        """Whether combined node y is a node of the output tree (the root, or a child of a node of more than
        LEAF_SIZE items)."""
        out = True
        if y != 0:
            p = kparent[y]
            out = klast[p] - kfirst[p] + 1 > LEAF_SIZE
        return out

    @gk.kernel
    def bvh_mark(n: int, kfirst: ints, klast: ints, kparent: ints, flags: ints):
        y = gk.tid()
        if kept(n, kfirst, klast, kparent, y):
            first = _first(n, kfirst, y)
            if _last(n, klast, y) - first + 1 <= LEAF_SIZE:
                flags[first] = 1

    @gk.kernel
    def bvh_emit(n: int, kleft: ints, kfirst: ints, klast: ints, kparent: ints, lrank: ints, outid: ints,
                 info: gk.array(dtype=gk.vec4i)):
        y = gk.tid()
        if kept(n, kfirst, klast, kparent, y):
            turns = int(0)                        # ancestors whose left subtree holds y
            cur = y
            while cur != 0:
                p = kparent[cur]
                if kleft[p] == cur:
                    turns += 1
                cur = p
            out = int(0)
            if y != 0:
                p = kparent[y]
                is_left = int(0)
                if kleft[p] == y:
                    is_left = 1
                out = 1 + 2 * (lrank[kfirst[p]] + turns - is_left) + 1 - is_left
            outid[y] = out
            first = _first(n, kfirst, y)
            count = _last(n, klast, y) - first + 1
            if count > LEAF_SIZE:
                info[out] = gk.vec4i(1 + 2 * (lrank[first] + turns), -1, first, 0)
            else:
                info[out] = gk.vec4i(-1, -1, first, count)

    @gk.kernel
    def bvh_links(n: int, kleft: ints, kfirst: ints, klast: ints, kparent: ints, kaxis: ints, outid: ints,
                  nodes: int, info: gk.array(dtype=gk.vec4i), ray_order: gk.array(dtype=gk.vec2i)):
        y = gk.tid()
        if kept(n, kfirst, klast, kparent, y):
            out = outid[y]
            row = info[out]
            axis = int(0)
            if row[0] >= 0:
                axis = kaxis[y]
            for o in range(8):
                near = int(-1)
                if row[0] >= 0:
                    near = row[0] + ((o >> axis) & 1)
                ray_order[o * nodes + out] = gk.vec2i(near, -1)
            miss = int(-1)
            mask = int(255)
            cur = y
            while cur != 0 and mask != 0:
                p = kparent[cur]
                is_left = int(0)
                if kleft[p] == cur:
                    is_left = 1
                here = outid[cur]
                sibling = here + 2 * is_left - 1
                pax = kaxis[p]
                for o in range(8):
                    if (mask >> o) & 1 == 1:
                        if is_left != ((o >> pax) & 1):          # cur is the near child for octant o
                            first = ray_order[o * nodes + out][0]
                            ray_order[o * nodes + out] = gk.vec2i(first, sibling)
                            mask = mask - (1 << o)
                            if o == 0:
                                miss = sibling
                cur = p
            info[out] = gk.vec4i(row[0], miss, row[2], row[3])

    @gk.kernel
    def bvh_bounds(n: int, kfirst: ints, klast: ints, kparent: ints, outid: ints, prims: ints,
                   item_lowers: vecs, item_uppers: vecs, node_lowers: vecs, node_uppers: vecs,
                   part_lo: vecs, part_hi: vecs, part_next: ints, phase: int):
        # phase 0: nodes of up to CUT items over their items; those whose parent holds more (the parts: they
        # tile the sorted items) also at their first item. Phase 1: larger nodes over their parts.
        y = gk.tid()
        if kept(n, kfirst, klast, kparent, y):
            first = _first(n, kfirst, y)
            last = _last(n, klast, y)
            big = last - first + 1 > CUT
            if phase == 0 and not big:
                item = prims[first]
                lo = item_lowers[item]
                hi = item_uppers[item]
                for k in range(first + 1, last + 1):
                    item = prims[k]
                    lo = vmin(lo, item_lowers[item])
                    hi = vmax(hi, item_uppers[item])
                node_lowers[outid[y]] = lo
                node_uppers[outid[y]] = hi
                if y != 0:
                    p = kparent[y]
                    if klast[p] - kfirst[p] + 1 > CUT:
                        part_lo[first] = lo
                        part_hi[first] = hi
                        part_next[first] = last + 1
            if phase == 1 and big:
                lo = part_lo[first]
                hi = part_hi[first]
                k = part_next[first]
                while k <= last:
                    lo = vmin(lo, part_lo[k])
                    hi = vmax(hi, part_hi[k])
                    k = part_next[k]
                node_lowers[outid[y]] = lo
                node_uppers[outid[y]] = hi

    @gk.kernel
    def bvh_one_leaf(n: int, item_lowers: vecs, item_uppers: vecs, prims: ints, info: gk.array(dtype=gk.vec4i),
                     ray_order: gk.array(dtype=gk.vec2i), node_lowers: vecs, node_uppers: vecs):
        # a tree of one leaf (n <= LEAF_SIZE): the items in index order
        lo = item_lowers[0]
        hi = item_uppers[0]
        for k in range(n):
            prims[k] = k
            lo = vmin(lo, item_lowers[k])
            hi = vmax(hi, item_uppers[k])
        info[0] = gk.vec4i(-1, -1, 0, n)
        for o in range(8):
            ray_order[o] = gk.vec2i(-1, -1)
        node_lowers[0] = lo
        node_uppers[0] = hi

    @gk.kernel
    def bvh_leaf_total(lrank: ints, flags: ints, n: int, total: ints):
        total[0] = lrank[n - 1] + flags[n - 1]

    return dict(
        leaf_total=bvh_leaf_total, centre_blocks=bvh_centre_blocks, centre_top=bvh_centre_top, morton=bvh_morton,
        sort_count=bvh_sort_count, sort_scatter=bvh_sort_scatter, karras=bvh_karras, mark=bvh_mark,
        emit=bvh_emit, links=bvh_links, bounds=bvh_bounds, one_leaf=bvh_one_leaf)


def kernels() -> dict:
    """The build's kernels by name, made once (under a lock: builds may run in threads)."""
    with _LOCK:
        if "k" not in _KERNELS:
            _KERNELS["k"] = _make_kernels()
        return _KERNELS["k"]
