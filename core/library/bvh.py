"""BVH queries in kernels (Warp's): `gk.bvh_query_aabb(bvh, lower, upper)`, `gk.bvh_query_ray(bvh, start,
dir)`, `gk.bvh_query_sphere(bvh, center, radius)`, `gk.bvh_query_capsule(bvh, start, dir, radius)`,
`gk.bvh_query_next(query, index[, max_dist])`, and `for index in query:`.

A kernel receives a BVH as the struct `BvhData`: flat arrays built on the host (geometry/bvh.py): node
bounds, node_info = (left child, miss link, first primitive, primitive count) with count > 0 for a leaf,
the primitives in leaf order and each item's own bounds. The miss link of a node is the node a
depth-first, left-first walk visits after skipping the node's subtree (-1: none), so a traversal needs no
stack: from a node it goes to the left child when the node's box passes the test and is inner, else to the
miss link (a leaf's items are enumerated first). It visits the nodes a stack walk would, in the same order.
(A stack held in a vector local compiles, on CPUs, to one select per slot at every push and pop: several
times slower.) A query is the struct `BvhQuery`, a kernel local holding the traversal state: the next node,
the leaf being enumerated, the query's kind (stored, so a local assigned queries of two kinds in two branches
iterates by the kind it holds, as Warp's kind-erased BvhQuery) and its box, ray, sphere or capsule. The traversal is library `@gk.func` code below, so
every backend runs it as an ordinary `while` loop and AD sees plain integer IR (no derivative, as in
Warp's: the query only selects items).

Semantics follow Warp 1.19: an AABB query reports every item whose own bounds overlap [lower, upper]
(touching counts); a ray query every item whose bounds the ray enters at a t < max_dist (in multiples of
|dir|); a sphere query every item whose bounds lie within radius of the center (squared distance to the box
<= radius², touching counts, max_dist unused); a capsule query every item whose bounds grown by radius on
each side the segment start + t dir, t in [0, max_dist] (closed), meets (Warp's conservative sweep: a box,
not a rounded capsule, so corners may add candidates). A negative radius counts as 0. Items in traversal
order."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from types import SimpleNamespace

from .. import types as T
from ..frontend.macros import Advance
from ..func import Func
from ..lang import NAMES, LangFunction
from ..struct import struct

LEAF_SIZE = 4               # primitives per leaf at most

I32 = T.int32
F32 = T.float32
V3 = T.vector(3, F32)
V4I = T.vector(4, I32)
V2 = T.vector(2, F32)
BIG = 3.0e38                # "no limit" for max_dist (float32's max is 3.4e38)

_ints = T.array_type(I32)
_vec3s = T.array_type(V3)


@struct
class BvhData:
    """What a kernel sees of a `gk.Bvh` (or a mesh's BVH): flat node arrays and the items' bounds."""
    node_lowers: _vec3s
    node_uppers: _vec3s
    node_info: T.array_type(V4I)
    ray_order: T.array_type(T.vector(2, I32))      # per octant of ray directions: (first child, miss link)
    prims: _ints
    item_lowers: _vec3s
    item_uppers: _vec3s
    num_items: I32


@struct
class BvhQuery:
    """The state of one BVH traversal: the next node (-1: none), the leaf range being enumerated, the query."""
    bvh: BvhData
    node: I32
    prim_cur: I32
    prim_end: I32
    lower: V3
    upper: V3
    kind: I32               # AABB, RAY, CAPSULE or SPHERE (below)
    radius: F32             # capsule: the boxes' growth; sphere: the radius squared
    found: I32
    current: I32


AABB, RAY, CAPSULE, SPHERE = 0, 1, 2, 3      # BvhQuery.kind (Warp's BvhQueryKind order)

gk = SimpleNamespace(**NAMES)


def _overlap(lo: V3, hi: V3, qlo: V3, qhi: V3) -> bool:
    """Boxes [lo, hi] and [qlo, qhi] overlap (touching counts, as Warp's intersect_aabb_aabb)."""
    return (lo[0] <= qhi[0] and lo[1] <= qhi[1] and lo[2] <= qhi[2] and hi[0] >= qlo[0] and hi[1] >= qlo[1]
            and hi[2] >= qlo[2])


def _slab(s: F32, d: F32, lo: F32, hi: F32, near: F32, far: F32) -> V2:
    """Narrow [near, far] by one axis of the slab test; a ray parallel to the slab keeps it when it starts
    inside the slab and empties it otherwise (no 0 * inf)."""
    n = near
    f = far
    if d == F32(0.0):
        if s < lo or s > hi:
            n = F32(1.0)
            f = F32(-1.0)
    else:
        inv = F32(1.0) / d
        t0 = (lo - s) * inv
        t1 = (hi - s) * inv
        # comparisons and selects (C's a < b ? a : b, as Warp's): cheaper than gk.min's IEEE minimum on CPUs
        near_t = gk.where(t0 < t1, t0, t1)
        far_t = gk.where(t0 < t1, t1, t0)
        n = gk.where(near_t > n, near_t, n)
        f = gk.where(far_t < f, far_t, f)
    return V2(n, f)


def _ray_box(start: V3, dir: V3, lo: V3, hi: V3) -> V2:
    """(t_enter, t_exit) of the ray start + t dir through the box; t_enter > t_exit when it misses."""
    r = V2(F32(-BIG), F32(BIG))
    r = _slab(start[0], dir[0], lo[0], hi[0], r[0], r[1])
    r = _slab(start[1], dir[1], lo[1], hi[1], r[0], r[1])
    r = _slab(start[2], dir[2], lo[2], hi[2], r[0], r[1])
    return r


def _ray_hits(start: V3, dir: V3, lo: V3, hi: V3, max_t: F32) -> bool:
    """The ray enters the box at some t >= 0 before max_t (or starts inside it)."""
    r = _ray_box(start, dir, lo, hi)
    return r[1] >= r[0] and r[1] >= F32(0.0) and r[0] < max_t


def _sphere_box(c: V3, radius_sq: F32, lo: V3, hi: V3) -> bool:
    """The box [lo, hi] lies within the sphere's radius of c: its squared distance <= radius_sq (Warp's
    intersect_sphere_aabb; per axis the larger of lo - c, c - hi and 0, by comparisons and selects)."""
    a = lo - c
    b = c - hi
    x = gk.where(a[0] > b[0], a[0], b[0])
    y = gk.where(a[1] > b[1], a[1], b[1])
    z = gk.where(a[2] > b[2], a[2], b[2])
    x = gk.where(x > F32(0.0), x, F32(0.0))
    y = gk.where(y > F32(0.0), y, F32(0.0))
    z = gk.where(z > F32(0.0), z, F32(0.0))
    return x * x + y * y + z * z <= radius_sq


def _capsule_hits(start: V3, dir: V3, lo: V3, hi: V3, radius: F32, max_t: F32) -> bool:
    """The segment start + t dir, 0 <= t <= max_t (closed, as Warp's capsule), meets the box grown by radius."""
    g = V3(radius, radius, radius)
    r = _ray_box(start, dir, lo - g, hi + g)
    return r[1] >= r[0] and r[1] >= F32(0.0) and r[0] <= max_t


def _test(q: BvhQuery, lo: V3, hi: V3, max_dist: F32) -> bool:
    hit = False
    if q.kind == AABB:
        hit = _overlap(lo, hi, q.lower, q.upper)
    elif q.kind == RAY:
        hit = _ray_hits(q.lower, q.upper, lo, hi, max_dist)
    elif q.kind == SPHERE:
        hit = _sphere_box(q.lower, q.radius, lo, hi)
    else:
        hit = _capsule_hits(q.lower, q.upper, lo, hi, q.radius, max_dist)
    return hit


def _start(bvh: BvhData, lower: V3, upper: V3, kind: I32, radius: F32) -> BvhQuery:
    q = BvhQuery(bvh=bvh)
    q.lower = lower
    q.upper = upper
    q.kind = kind
    q.radius = radius
    q.node = -1
    if bvh.num_items > 0:
        q.node = 0
    return q


def _next(q: BvhQuery, max_dist: F32) -> BvhQuery:
    """Advance to the next item passing the query's test: q.found = 1 and q.current its index, or 0."""
    q.found = 0
    more = True
    while more:
        if q.prim_cur < q.prim_end:
            item = q.bvh.prims[q.prim_cur]
            q.prim_cur += 1
            if _test(q, q.bvh.item_lowers[item], q.bvh.item_uppers[item], max_dist):
                q.current = item
                q.found = 1
                more = False
        elif q.node < 0:
            more = False
        else:
            node = q.node
            info = q.bvh.node_info[node]
            q.node = info[1]
            if _test(q, q.bvh.node_lowers[node], q.bvh.node_uppers[node], max_dist):
                if info[3] > 0:
                    q.prim_cur = info[2]
                    q.prim_end = info[2] + info[3]
                else:
                    q.node = info[0]
    return q


_overlap = Func(_overlap)
_slab = Func(_slab)
_ray_box = Func(_ray_box)
_ray_hits = Func(_ray_hits)
_sphere_box = Func(_sphere_box)
_capsule_hits = Func(_capsule_hits)
_test = Func(_test)
_start = Func(_start)
_next = Func(_next)


# --------------------------------------------------------------------------- the language functions

def bvh_arg(E, bvh, what: str = "id"):
    """The BvhData a kernel argument stands for: a `gk.Bvh` parameter, or a geometry handle (Warp's
    `wp.uint64`) holding one."""
    t = getattr(bvh, "type", None)
    if t is BvhData._gk_struct:
        return bvh
    if t is not None and t.is_struct and "bvh" in t.fields and t.fields["bvh"] is BvhData._gk_struct:
        return bvh.fields["bvh"]
    E.fail(f"{what} must be a BVH (a kernel parameter annotated gk.Bvh, or wp.uint64, given a gk.Bvh or "
           f"its .id at launch), got {getattr(t, 'name', type(bvh).__name__)}")


def as_vec3(E, x, what: str):
    """x as a float32 vec3 (Warp's BVH is float32; a vec3d query is rounded to it)."""
    t = E.type_of(x)
    if not (t.is_vector and t.length == 3 and t.scalar.is_float):
        E.fail(f"{what} must be a vec3, got {t.name}")
    if t.scalar is F32:
        return x
    return E.make(V3, [E.cast(c, F32) for c in E.comps(x)])


def _no_root(E, root):
    if not (isinstance(root, int) and root == -1):
        E.fail("root= starts the walk at a group's root; gradkit's BVHs are not grouped (only -1)")


def as_radius(E, radius):
    """A query radius as float32, a negative one as 0 (Warp clamps it)."""
    r = E.scalar(radius, F32)
    return E.where(E.gt(r, E.const(0.0, F32)), r, E.const(0.0, F32))


def bvh_query_aabb(E, id, low, high, root=-1):
    _no_root(E, root)
    bvh = bvh_arg(E, id)
    return E.call(_start, bvh, as_vec3(E, low, "low"), as_vec3(E, high, "high"), E.const(AABB, I32),
                  E.const(0.0, F32))


def bvh_query_ray(E, id, start, dir, root=-1):
    _no_root(E, root)
    bvh = bvh_arg(E, id)
    return E.call(_start, bvh, as_vec3(E, start, "start"), as_vec3(E, dir, "dir"), E.const(RAY, I32),
                  E.const(0.0, F32))


def bvh_query_sphere(E, id, center, radius, root=-1):
    _no_root(E, root)
    bvh = bvh_arg(E, id)
    r = as_radius(E, radius)
    c = as_vec3(E, center, "center")
    return E.call(_start, bvh, c, c, E.const(SPHERE, I32), r * r)


def bvh_query_capsule(E, id, start, dir, radius, root=-1):
    _no_root(E, root)
    bvh = bvh_arg(E, id)
    return E.call(_start, bvh, as_vec3(E, start, "start"), as_vec3(E, dir, "dir"), E.const(CAPSULE, I32),
                  as_radius(E, radius))


def bvh_query_next(E, query, index, max_dist=BIG):
    if getattr(query, "type", None) is not BvhQuery._gk_struct:
        E.fail("query must be the result of gk.bvh_query_aabb(...), bvh_query_ray, bvh_query_sphere or "
               "bvh_query_capsule")
    q = E.call(_next, query, E.scalar(max_dist, F32))
    return Advance(E.gt(q.fields["found"], E.const(0, I32)), q, outs={1: q.fields["current"]})


def kernel_only(name):
    def host(*args, **kwargs):
        raise RuntimeError(f"gk.{name}() can only be called inside a @gk.kernel or @gk.func")
    return host


DOCS = {
    "bvh_query_aabb": "bvh_query_aabb(bvh, low, high) -> a query over the items whose bounds overlap the box "
                      "[low, high]; iterate it with `for index in query:` or `while gk.bvh_query_next(query, "
                      "index):`",
    "bvh_query_ray": "bvh_query_ray(bvh, start, dir) -> a query over the items whose bounds the ray start + t dir "
                     "(t >= 0) enters; iterate it as bvh_query_aabb's",
    "bvh_query_sphere": "bvh_query_sphere(bvh, center, radius) -> a query over the items whose bounds lie within "
                        "radius of center (a negative radius counts as 0); iterate it as bvh_query_aabb's",
    "bvh_query_capsule": "bvh_query_capsule(bvh, start, dir, radius) -> a query over the items whose bounds, grown by "
                         "radius, the segment start + t dir (0 <= t <= max_dist of bvh_query_next: pass 1.0 to "
                         "sweep start to start + dir) meets; iterate it as bvh_query_aabb's",
    "bvh_query_next": "bvh_query_next(query, index, max_dist=inf) -> bool: advances the query and assigns the next "
                      "item's index to the local `index`; False when none is left (max_dist: for rays, the "
                      "largest t, in multiples of |dir|; for capsules, the segment's end, included)",
}

for _fn, _assigns in ((bvh_query_aabb, ()), (bvh_query_ray, ()), (bvh_query_sphere, ()), (bvh_query_capsule, ()),
                      (bvh_query_next, (0, 1))):
    _fn.__doc__ = DOCS[_fn.__name__]
    _fn.assigns = _assigns          # argument positions whose local variables a call re-binds
    LangFunction(_fn.__name__, "macro", macro=_fn, host=kernel_only(_fn.__name__)).define()

BvhQuery._gk_iter_next = NAMES["bvh_query_next"]     # `for index in query:` (core/frontend/loops.py)
