"""Edge tests: a kernel's comparisons of its last-axis thread index (plus a constant) with a value fixed over a
row — `j == 0`, `i == n - 1` in a 1-D grid, `j + 1 < m`, the boundary tests of a stencil and of its gathered
adjoint. Each keeps one outcome on any stretch of the row that avoids its one point `K - c`; the CPU backend runs
the middle stretch of every row in a loop of its own where these tests are loop invariants
(thread_loops.inner_loops), so boundary conditions cost nothing per element there and the loop vectorises
without masks (index-set splitting, done on the IR where the tests are still plain to see)."""

from __future__ import annotations

from dataclasses import dataclass

from ...core import types as T
from ...core.ir import Function, Instr, Value
from ...core.ops import Op
from ...core.passes.shifts import int_const

# LLVM signed predicates of the IR's comparisons, and each one with its operands swapped
PREDICATES = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
MAX_OFFSET = 1 << 16          # |c| above this is no stencil: left alone
# integer arithmetic a bound may be built from: none of it can trap when evaluated ahead of the row
BOUND_PRIMS = frozenset({"add", "sub", "mul", "neg", "min", "max"})


@dataclass(frozen=True)
class EdgeTest:
    """`(j + offset) pred bound`, j the last-axis thread index; `ins` the comparison in the IR."""
    ins: Instr
    pred: str
    offset: int
    bound: Value


def edge_tests(fn: Function) -> tuple[list[EdgeTest], list[Instr]]:
    """The kernel's edge tests and, in an order that defines each before its use, the instructions that
    compute their bounds (constants, shapes, scalar parameters, leading-axis thread indices and + - * min max
    of them: evaluated once per row, where no branch guards them, so nothing that can trap)."""
    ndim = fn.attrs.get("tid_ndim", 1)
    last = ndim - 1
    gathered = bool(fn.attrs.get("gather_margin"))
    defs = {r.id: ins for ins in fn.walk() for r in ins.results}
    scalars = {p.value.id for p in fn.params if p.type is T.int32}
    offsets: dict[int, int] = {}
    for ins in fn.walk():
        offset = _offset(ins, offsets, last, ndim, gathered)
        if offset is not None and abs(offset) <= MAX_OFFSET:
            offsets[ins.result.id] = offset
    invariant: dict[int, bool] = {}

    def fixed(v: Value) -> bool:
        """True when `v` is the same for every thread of a row and safe to compute ahead of it."""
        known = invariant.get(v.id)
        if known is None:
            ins = defs.get(v.id)
            if ins is None:
                known = v.id in scalars
            elif v.type is not T.int32:
                known = False
            elif ins.op in (Op.CONST, Op.SHAPE):
                known = True
            elif ins.op == Op.TID:
                known = ins.attrs["axis"] != last and ins.attrs["ndim"] == ndim
            else:
                known = ins.op == Op.PRIM and ins.attrs["name"] in BOUND_PRIMS and all(map(fixed, ins.args))
            invariant[v.id] = known
        return known

    tests, order, seen = [], [], set()

    def define(v: Value) -> None:
        ins = defs.get(v.id)
        if ins is None or id(ins) in seen:
            return
        seen.add(id(ins))
        for a in ins.args if ins.op == Op.PRIM else ():
            define(a)
        order.append(ins)

    for ins in fn.walk():
        if ins.op != Op.PRIM or ins.attrs["name"] not in PREDICATES or len(ins.args) != 2 \
                or ins.args[0].type is not T.int32:
            continue
        name, (x, y) = ins.attrs["name"], ins.args
        if x.id not in offsets:
            name, x, y = SWAPPED[name], y, x
        if x.id not in offsets or y.id in offsets or not fixed(y):
            continue
        tests.append(EdgeTest(ins, PREDICATES[name], offsets[x.id], y))
        define(y)
    return tests, order


def _offset(ins: Instr, offsets: dict, last: int, ndim: int, gathered: bool) -> int | None:
    """c when `ins` computes j + c (j the last-axis thread index) as int32, else None. A gathered adjoint's
    guarded select is its replayed index in the interior loop (ad/gather.py), the only place tests fold."""
    if ins.op == Op.TID:
        return 0 if ins.attrs["axis"] == last and ins.attrs["ndim"] == ndim else None
    if ins.op != Op.PRIM or not ins.results or ins.result.type is not T.int32:
        return None
    name, args = ins.attrs["name"], ins.args
    if name == "where":
        guarded = gathered and ins.attrs.get("guard") == (last,)
        return offsets.get(args[1].id) if guarded else None
    if name not in ("add", "sub") or len(args) != 2:
        return None
    k = [int_const(a) for a in args]
    if name == "add":
        if args[0].id in offsets and k[1] is not None:
            return offsets[args[0].id] + k[1]
        if args[1].id in offsets and k[0] is not None:
            return offsets[args[1].id] + k[0]
    elif args[0].id in offsets and k[1] is not None:
        return offsets[args[0].id] - k[1]
    return None

