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
those cells, a superset of the points within `max_dist`: filter by distance in the loop.

The traversal walks rows (y, z) of the range; a row's cells are one or two runs of consecutive physical cells
(two where the x range wraps), and as the grid's points are sorted by cell, a run's points are one slice of
`point_ids` (from its first occupied cell's start to its last one's end). The neighbour loop then steps
through a slice with one compare and one load per point, in Warp's order (x fastest, then y, then z), and
changes row 9 times per query of a 3x3x3 range instead of changing cell 27 times."""

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
    """What a kernel sees of a `gk.HashGrid`: point_ids sorted by cell index (z * dim_x * dim_y + y * dim_x + x;
    the queries rely on it: a run of consecutive cells is one slice), the [start, end) range of each occupied
    cell in it (an empty cell's range has start >= end, its values otherwise free)."""
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
    """The state of one neighbour traversal: the virtual (y, z) row range, the current row, and the slice of
    sorted points the current row segment holds. A row's x range is at most two runs of consecutive physical
    cells (two where it wraps past dim_x): each run's points are one slice, as the points are sorted by cell."""
    grid: HashGridData
    row: T.int32            # the current row's first cell (x = 0), moved along with cy and cz
    ny: T.int32             # rows along y and z (at least 1 each), and the current one's position
    nz: T.int32
    yi: T.int32
    zi: T.int32
    cy: T.int32             # y, z wrapped into the grid (kept in step: no division per row)
    cz: T.int32
    cy_start: T.int32
    cx_start: T.int32       # the first run: cells cx_start .. cx_start + len_a - 1 of the row
    len_a: T.int32
    len_b: T.int32          # the second run, past the wrap: cells 0 .. len_b - 1 (0: none)
    seg: T.int32            # which run the current slice is
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


def _run(q: HashGridQuery, a: I32, n: I32) -> HashGridQuery:
    """Point to the slice of cells a .. a + n - 1 (n >= 1) of the current row: from the first occupied cell's
    start to the last one's end (the points are sorted by cell, so a run of consecutive cells is one slice;
    an empty cell's range, start >= end, may hold anything). Both ends are found by scanning in from the
    run's ends, which in a filled grid reads just the two end cells."""
    base = q.row + a
    lo = 0
    hi = 0
    k = 0
    s = q.grid.cell_starts[base]
    e = q.grid.cell_ends[base]
    while s >= e and k + 1 < n:         # the first occupied cell from the left (mostly the first cell)
        k += 1
        s = q.grid.cell_starts[base + k]
        e = q.grid.cell_ends[base + k]
    if s < e:
        lo = s
        m = n - 1
        s = q.grid.cell_starts[base + m]
        e = q.grid.cell_ends[base + m]
        while s >= e:                   # the last occupied one from the right (cell k is occupied)
            m -= 1
            s = q.grid.cell_starts[base + m]
            e = q.grid.cell_ends[base + m]
        hi = e
    q.cell_index = lo - 1
    q.cell_end = hi
    return q


def _advance(q: HashGridQuery) -> HashGridQuery:
    """Move on to the next run of cells that holds points (q.cell_index + 1 < q.cell_end), or past the last row
    (q.zi == q.nz). Runs are visited in Warp's cell order: x fastest, then y, then z."""
    while q.cell_index + 1 >= q.cell_end and q.zi < q.nz:
        if q.seg == 0 and q.len_b > 0:
            q.seg = 1
            q = _run(q, 0, q.len_b)
        else:
            # the next row, its wrapped coordinates moved along (a wrap is a compare, not a %)
            q.seg = 0
            q.yi += 1
            q.cy += 1
            q.row += q.grid.dim_x
            if q.cy == q.grid.dim_y:
                q.cy = 0
                q.row -= q.grid.dim_x * q.grid.dim_y
            if q.yi == q.ny:
                q.yi = 0
                q.zi += 1
                q.cz += 1
                if q.cz == q.grid.dim_z:
                    q.cz = 0
                q.cy = q.cy_start
                q.row = q.cz * (q.grid.dim_x * q.grid.dim_y) + q.cy * q.grid.dim_x
            if q.zi < q.nz:
                q = _run(q, q.cx_start, q.len_a)
    return q


def _next(q: HashGridQuery) -> HashGridQuery:
    """The next point of the cells in range: q.found = 1 and q.current its index, or found = 0 (q.current
    then keeps the last index, as Warp's query leaves its out-argument).

    The common step, another point of the same run, is one compare and one load in a branch of its own that
    changes nothing but the run position; the move to the next run (`_advance`) is the other branch. The CPU
    backend closes a loop body that ends in such a branch with a back edge per arm (backends/cpu/control.py),
    so LLVM makes the common step a tight inner loop over the run's points."""
    if q.cell_index + 1 < q.cell_end:
        q.cell_index += 1
        q.current = q.grid.point_ids[q.cell_index]
        q.found = 1
    else:
        q = _advance(q)
        q.found = 0
        if q.cell_index + 1 < q.cell_end:
            q.cell_index += 1
            q.current = q.grid.point_ids[q.cell_index]
            q.found = 1
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
        x_start = lib.coord((p[0] - r) * inv)
        x_end = _query_end(x_start, lib.coord((p[0] + r) * inv), grid.dim_x)
        y_start = lib.coord((p[1] - r) * inv)
        y_end = _query_end(y_start, lib.coord((p[1] + r) * inv), grid.dim_y)
        z_start = lib.coord((p[2] - r) * inv)
        z_end = _query_end(z_start, lib.coord((p[2] + r) * inv), grid.dim_z)
        q.ny = gk.max(y_end - y_start + 1, 1)     # a negative max_dist visits the start cell, as Warp's
        q.nz = gk.max(z_end - z_start + 1, 1)
        q.cx_start = x_start % grid.dim_x
        q.cy_start = y_start % grid.dim_y
        q.cy = q.cy_start
        q.cz = z_start % grid.dim_z
        q.row = q.cz * (grid.dim_x * grid.dim_y) + q.cy * grid.dim_x
        width = gk.max(x_end - x_start + 1, 1)
        q.len_a = gk.min(width, grid.dim_x - q.cx_start)
        q.len_b = width - q.len_a
        if grid.num_points > 0:
            q = _run(q, q.cx_start, q.len_a)
        else:
            q.zi = q.nz                # nothing to visit (the arrays may be placeholders)
        return q

    for py in (_coord, _query):
        py.__name__ = py.__qualname__ = f"_hash_grid{py.__name__}_{s.name}"
    lib.coord, lib.query = Func(_coord), Func(_query)
    return lib


_cell = Func(_cell)
_run = Func(_run)
_query_end = Func(_query_end)
_advance = Func(_advance)
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
