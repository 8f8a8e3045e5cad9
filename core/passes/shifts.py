"""Which arrays a kernel only scatter-adds into at its own thread index plus a constant (`adj_u[i - 1, j] +=`,
the adjoint of a stencil's shifted read): such adds collide only between threads a few rows apart, which the
gather pass (ad/gather.py) and the CPU backend's chunked launches (backends/cpu) exploit."""

from __future__ import annotations

from ..ir import Function, Instr, copy_function, used_ids
from ..ops import Op


def shifted_adds(fn: Function) -> dict[int, dict[Instr, tuple]]:
    """{array parameter value id: {atomic instruction: shift per axis}} for the arrays whose every access is
    an atomic add or sub at tid + constant (axis d indexed by tid axis d) whose old value nobody reads."""
    ndim = fn.attrs.get("tid_ndim", 1)
    tids = {ins.result.id: ins.attrs["axis"] for ins in fn.body.body if ins.op == Op.TID}
    if sorted(tids.values()) != list(range(ndim)):
        return {}
    used = used_ids(fn)
    defs = {r.id: ins for ins in fn.walk() for r in ins.results}
    arrays = {p.value.id for p in fn.params if p.type.is_array}
    found: dict[int, dict] = {}
    refused: set[int] = set()
    for ins in fn.walk():
        if ins.op == Op.SHAPE or not ins.args or ins.args[0].id not in arrays:
            continue
        arr = ins.args[0].id
        shift = None
        if ins.op == Op.ATOMIC and ins.attrs["kind"] in ("add", "sub") and ins.result.id not in used:
            shift = index_shift(ins.args[1:-1], ndim, tids, defs)
        if shift is None:
            refused.add(arr)
        else:
            found.setdefault(arr, {})[ins] = shift
    return {a: sites for a, sites in found.items() if a not in refused}


def index_shift(idx, ndim: int, tids: dict, defs: dict) -> tuple | None:
    """The constant offset of an index tuple from the thread's own coordinates, or None."""
    if len(idx) != ndim:
        return None
    out = []
    for d, v in enumerate(idx):
        if tids.get(v.id) == d:
            out.append(0)
            continue
        op = defs.get(v.id)
        if op is None or op.op != Op.PRIM or op.attrs.get("name") not in ("add", "sub") or len(op.args) != 2:
            return None
        a, b = op.args
        if tids.get(a.id) == d and int_const(b) is not None:
            out.append(b.const_value if op.attrs["name"] == "add" else -b.const_value)
        elif op.attrs["name"] == "add" and tids.get(b.id) == d and int_const(a) is not None:
            out.append(a.const_value)
        else:
            return None
    return tuple(out)


def int_const(v) -> int | None:
    """The value of an integer constant (not a bool), else None."""
    c = v.const_value
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def has_exclusive_adds(fn: Function) -> bool:
    """True when some atomic is marked exclusive: an add into the thread's own element done without an atomic
    instruction (reverse mode's adds at [tid], a gathered adjoint's), right while no other parameter of the
    launch writes the same memory."""
    return any(ins.op == Op.ATOMIC and ins.attrs.get("exclusive") for ins in fn.walk())


def without_exclusive_adds(fn: Function) -> Function:
    """A copy of `fn` whose exclusive adds are atomics again (for launches whose written arrays overlap)."""
    out = copy_function(fn)
    for ins in out.walk():
        if ins.op == Op.ATOMIC and ins.attrs.get("exclusive"):
            ins.attrs["exclusive"] = False
    return out
