"""Facts about one kernel that the tape's hazard report reads (runtime/tape/hazards.py): where it stores each
parameter, which stores overwrite a whole launch-grid-sized array, and which array parameters reach its
outputs only through uses without a derivative (int(), comparisons, stop_gradient, indices, conditions).
"""

from __future__ import annotations

from ..core.builtins import BUILTINS
from ..core.ir import Function
from ..core.ops import LOOPS, Op

COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}


def _params(fn: Function) -> dict[int, int]:
    return {p.value.id: k for k, p in enumerate(fn.params)}


def store_lines(fn: Function) -> dict[int, str]:
    """{parameter position: 'file:line'} of the first store (or atomic) into each written array."""
    index, out = _params(fn), {}
    for ins in fn.walk():
        if ins.op in (Op.STORE, Op.ATOMIC) and ins.args[0].id in index and ins.loc is not None:
            out.setdefault(index[ins.args[0].id], f"{ins.loc.file}:{ins.loc.line}")
    return out


def covering_stores(fn: Function) -> dict[int, bool]:
    """{parameter position: whether the stored values vary} for the arrays every thread overwrites at its own
    index, unconditionally (top level, outside branches and loops), and the kernel never reads or updates
    otherwise: over a grid the array's shape, such a launch overwrites every element."""
    index = _params(fn)
    tids = {ins.result.id: ins.attrs["axis"] for ins in fn.body.body if ins.op == Op.TID}
    ndim = fn.attrs.get("tid_ndim", 1)
    const = {ins.result.id for ins in fn.walk() if ins.op == Op.CONST}
    found: dict[int, bool] = {}
    other: set[int] = set()
    for ins in fn.body.body:
        if ins.op == Op.STORE and ins.args[0].id in index and ins.attrs.get("whole") is not False:
            idx = ins.args[1:-1]
            if len(idx) == ndim and [tids.get(v.id) for v in idx] == list(range(ndim)):
                k = index[ins.args[0].id]
                found[k] = found.get(k, False) or ins.args[-1].id not in const
                continue
    top = {id(ins) for ins in fn.body.body}
    for ins in fn.walk():
        if ins.op in (Op.LOAD, Op.ATOMIC) and ins.args and ins.args[0].id in index:
            other.add(index[ins.args[0].id])
        elif ins.op == Op.STORE and ins.args[0].id in index and (id(ins) not in top or ins.attrs.get("whole") is False):
            other.add(index[ins.args[0].id])
        elif ins.op == Op.NATIVE:
            other.update(index[a.id] for a in ins.args if a.id in index)
    return {k: varies for k, varies in found.items() if k not in other}


def blocked_reads(fwd: Function, adj: Function) -> dict[int, str]:
    """{parameter position: what blocks it} for the float arrays the kernel reads whose gradient the adjoint
    never writes: their values reach the outputs only through uses without a derivative. What blocks it is
    'int() at file:line', 'a comparison at file:line', 'stop_gradient at file:line' (or 'an index or a
    condition at file:line'), from the first such use of a loaded value."""
    index = _params(fwd)
    adj_index = {p.value.id: k for k, p in enumerate(adj.params)}
    of = adj.attrs.get("adj_of", [])
    first = len(adj.params) - len(of)
    written = {of[adj_index[ins.args[0].id] - first] for ins in adj.walk()
               if ins.op in (Op.STORE, Op.ATOMIC) and ins.args and ins.args[0].id in adj_index
               and adj_index[ins.args[0].id] >= first}
    loads: dict[int, list] = {}
    for ins in fwd.walk():
        if ins.op == Op.LOAD and ins.args[0].id in index:
            k = index[ins.args[0].id]
            if fwd.params[k].type.dtype.scalar.is_float:
                loads.setdefault(k, []).append(ins.result.id)
    users: dict[int, list] = {}
    for ins in fwd.walk():
        for pos, a in enumerate(ins.args):
            users.setdefault(a.id, []).append((ins, pos))
    out = {}
    for k, ids in loads.items():
        if k in written:
            continue
        out[k] = _first_blocking_use(ids, users) or "no use that reaches an output"
    return out


def _first_blocking_use(ids: list[int], users: dict) -> str | None:
    seen, todo = set(), list(ids)
    while todo:
        v = todo.pop(0)
        if v in seen:
            continue
        seen.add(v)
        for ins, pos in users.get(v, ()):
            where = f"{ins.loc.file}:{ins.loc.line}" if ins.loc is not None else "an unknown line"
            if ins.op == Op.PRIM:
                name = ins.attrs["name"]
                entry = BUILTINS.get(name)
                if name == "cast" and not ins.result.type.scalar.is_float:
                    return f"int() at {where}"
                if name in COMPARISONS:
                    return f"a comparison at {where}"
                if entry is not None and not entry.differentiable:
                    return f"{name} at {where}"
                todo.extend(r.id for r in ins.results)
            elif ins.op in (Op.LOAD, Op.STORE, Op.ATOMIC) and pos > 0 and not (ins.op != Op.LOAD and
                                                                               pos == len(ins.args) - 1):
                return f"an index at {where}"
            elif ins.op in (Op.IF, Op.WHILE) or (ins.op in LOOPS and pos < 3):
                return f"a condition or loop bound at {where}"
            else:
                todo.extend(r.id for r in ins.results)
    return None
