"""Hash-grid neighbour queries in kernels (Warp's): `gk.hash_grid_query(grid, point, max_dist)`,
`gk.hash_grid_query_next(query, index)`, `gk.hash_grid_point_id(grid, i)`, and `for index in query:`.

A kernel receives a grid as the struct `HashGridData` (its arrays and sizes; a `gk.HashGrid`, or its `.id`,
passed at launch binds to it: geometry/hash_grid.py builds it), and a query is the struct
`HashGridQuery`, a local whose fields are the traversal state. The functions are library `@gk.func` code
written below in the kernel language, so each backend runs them as ordinary loops and loads, and both AD
modes see plain IR: the integer traversal has no derivative (as in Warp), while what the loop body computes
from the positions it reads is differentiated as any other code.

Semantics follow Warp 1.19's hash grid: a point's cell is floor(p * (1 / cell_width)) per axis, wrapped
modulo the grid's dimensions (so points outside the nominal range alias into it, and a query visits the
physical cells of the virtual range [p - r, p + r], at most once each). The query returns every point of
those cells, a superset of the points within `max_dist`: filter by distance in the loop."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from types import SimpleNamespace

from .. import types as T
from ..frontend.macros import Advance
from ..func import Func
from ..lang import NAMES, LangFunction
from ..struct import struct

# cell coordinates are clamped to +-_LIMIT before wrapping (Warp clamps at the int32 range): end - start
# of a query range then never overflows int32; far-away points alias into some cell either way
_LIMIT = 2 ** 29

_ints = T.array_type(T.int32)


@struct
class HashGridData:
    """What a kernel sees of a `gk.HashGrid`: points sorted by cell, the [start, end) range of each cell."""
    cell_starts: _ints
    cell_ends: _ints
    point_ids: _ints
    num_points: T.int32
    dim_x: T.int32
    dim_y: T.int32
    dim_z: T.int32
    cell_width_inv: T.float32


@struct
class HashGridQuery:
    """The state of one neighbour traversal: the virtual cell range, the current cell and its slice."""
    grid: HashGridData
    x_start: T.int32
    y_start: T.int32
    z_start: T.int32
    x_end: T.int32
    y_end: T.int32
    z_end: T.int32
    x: T.int32
    y: T.int32
    z: T.int32
    cx: T.int32             # x, y, z wrapped into the grid (kept in step: no division per cell)
    cy: T.int32
    cz: T.int32
    cx_start: T.int32
    cy_start: T.int32
    cell_index: T.int32
    cell_end: T.int32
    current: T.int32
    found: T.int32


gk = SimpleNamespace(**NAMES)
I32 = T.int32


def _cell(grid: HashGridData, x: I32, y: I32, z: I32) -> I32:
    """The physical cell of virtual cell (x, y, z): each coordinate wrapped (floored %) into the grid."""
    return (z % grid.dim_z) * (grid.dim_x * grid.dim_y) + (y % grid.dim_y) * grid.dim_x + (x % grid.dim_x)


def _query_end(start: I32, end: I32, dim: I32) -> I32:
    """A range wider than the grid visits each physical cell once."""
    return gk.where(end - start >= dim, start + dim - 1, end)


def _next(q: HashGridQuery) -> HashGridQuery:
    """Advance to the next point of the cells in range: q.found = 1 and q.current its index, or found = 0."""
    q.found = 0
    more = q.grid.num_points > 0
    while more:
        if q.cell_index < q.cell_end:
            q.current = q.grid.point_ids[q.cell_index]
            q.cell_index += 1
            q.found = 1
            more = False
        else:
            # the next virtual cell, its wrapped coordinates moved along (a wrap is a compare, not a %)
            q.x += 1
            q.cx += 1
            if q.cx == q.grid.dim_x:
                q.cx = 0
            if q.x > q.x_end:
                q.x = q.x_start
                q.cx = q.cx_start
                q.y += 1
                q.cy += 1
                if q.cy == q.grid.dim_y:
                    q.cy = 0
            if q.y > q.y_end:
                q.y = q.y_start
                q.cy = q.cy_start
                q.z += 1
                q.cz += 1
                if q.cz == q.grid.dim_z:
                    q.cz = 0
            if q.z > q.z_end:
                more = False
            else:
                c = q.cz * (q.grid.dim_x * q.grid.dim_y) + q.cy * q.grid.dim_x + q.cx
                q.cell_index = q.grid.cell_starts[c]
                q.cell_end = q.grid.cell_ends[c]
    return q


def _point_id(grid: HashGridData, i: I32) -> I32:
    """The i-th point in cell order (-1 outside [0, num_points))."""
    out = -1
    if i >= 0 and i < grid.num_points:
        out = grid.point_ids[i]
    return out


def _precision(s: T.ScalarType) -> SimpleNamespace:
    """The functions taking points of scalar type `s` (float32 or float64)."""
    V3 = T.vector(3, s)
    lim = float(_LIMIT)
    lib = SimpleNamespace()            # the helpers call each other through `lib`

    def _coord(v: s) -> I32:
        """floor(v) as an int, clamped to +-_LIMIT (NaN: 0)."""
        c = gk.floor(v)
        c = gk.where(c == c, gk.clamp(c, s(-lim), s(lim)), s(0.0))
        return I32(c)

    def _query(grid: HashGridData, p: V3, r: s) -> HashGridQuery:
        inv = s(grid.cell_width_inv)
        q = HashGridQuery(grid=grid)
        q.x_start = lib.coord((p[0] - r) * inv)
        q.y_start = lib.coord((p[1] - r) * inv)
        q.z_start = lib.coord((p[2] - r) * inv)
        q.x_end = _query_end(q.x_start, lib.coord((p[0] + r) * inv), grid.dim_x)
        q.y_end = _query_end(q.y_start, lib.coord((p[1] + r) * inv), grid.dim_y)
        q.z_end = _query_end(q.z_start, lib.coord((p[2] + r) * inv), grid.dim_z)
        q.x = q.x_start
        q.y = q.y_start
        q.z = q.z_start
        q.cx_start = q.x_start % grid.dim_x
        q.cy_start = q.y_start % grid.dim_y
        q.cx = q.cx_start
        q.cy = q.cy_start
        q.cz = q.z_start % grid.dim_z
        if grid.num_points > 0:
            c = _cell(grid, q.x, q.y, q.z)
            q.cell_index = grid.cell_starts[c]
            q.cell_end = grid.cell_ends[c]
        return q

    for py in (_coord, _query):
        py.__name__ = py.__qualname__ = f"_hash_grid{py.__name__}_{s.name}"
    lib.coord, lib.query = Func(_coord), Func(_query)
    return lib


_cell = Func(_cell)
_query_end = Func(_query_end)
_next = Func(_next)
_point_id = Func(_point_id)
_BY_PRECISION: dict = {}


def _lib(s: T.ScalarType) -> SimpleNamespace:
    if s not in _BY_PRECISION:
        _BY_PRECISION[s] = _precision(s)
    return _BY_PRECISION[s]


# --------------------------------------------------------------------------- the language functions

def _grid_arg(E, grid, what: str):
    t = getattr(grid, "type", None)
    if t is not None and t.is_struct and t.fields.get("grid") is HashGridData._gk_struct:
        return grid.fields["grid"]          # a geometry handle (Warp's wp.uint64, core/library/handle.py)
    if t is not HashGridData._gk_struct:
        E.fail(f"{what} must be a hash grid (a kernel parameter annotated gk.HashGrid, given a gk.HashGrid "
               f"or its .id at launch), got {getattr(grid, 'type', type(grid).__name__)}")
    return grid


def hash_grid_query(E, grid, point, max_dist):
    grid = _grid_arg(E, grid, "grid")
    t = E.type_of(point)
    if not (t.is_vector and t.length == 3 and t.scalar.is_float):
        E.fail(f"point must be a vec3 or vec3d, got {t.name}")
    return E.call(_lib(t.scalar).query, grid, point, E.scalar(max_dist, t.scalar))


def hash_grid_query_next(E, query, index):
    if getattr(query, "type", None) is not HashGridQuery._gk_struct:
        E.fail("query must be the result of gk.hash_grid_query(grid, point, max_dist)")
    q = E.call(_next, query)
    return Advance(E.gt(q.fields["found"], E.const(0, I32)), q, outs={1: q.fields["current"]})


def hash_grid_point_id(E, grid, index):
    grid = _grid_arg(E, grid, "grid")
    return E.call(_point_id, grid, E.scalar(index, I32))


def _kernel_only(name):
    def host(*args, **kwargs):
        raise RuntimeError(f"gk.{name}() can only be called inside a @gk.kernel or @gk.func")
    return host


DOCS = {
    "hash_grid_query": "hash_grid_query(grid, point, max_dist) -> a query over the points in the grid cells "
                       "within max_dist of point (a superset of the points within max_dist); iterate it with "
                       "`for index in query:` or `while gk.hash_grid_query_next(query, index):`",
    "hash_grid_query_next": "hash_grid_query_next(query, index) -> bool: advances the query and assigns the "
                            "next point's index to the local `index`; False when none is left",
    "hash_grid_point_id": "hash_grid_point_id(grid, i) -> the index of the i-th point in cell order (launch "
                          "over the points with i = gk.tid() for coherent neighbour loops); -1 if out of range",
}

for _fn, _assigns in ((hash_grid_query, ()), (hash_grid_query_next, (0, 1)), (hash_grid_point_id, ())):
    _fn.__doc__ = DOCS[_fn.__name__]
    _fn.assigns = _assigns          # argument positions whose local variables a call re-binds
    LangFunction(_fn.__name__, "macro", macro=_fn, host=_kernel_only(_fn.__name__)).define()

HashGridQuery._gk_iter_next = NAMES["hash_grid_query_next"]     # `for index in query:` (core/frontend/loops.py)
