"""Facts about a lowered forward function that reverse mode reads while building its adjoint: the float
values a loop's body uses from outside it, the atomics whose old value nobody reads, and the arrays
written once per thread and never read (whose gradient reset the adjoint may leave to the tape)."""

from __future__ import annotations

from ..core.ir import Function, Instr, Region, Value, local_ids, used_ids
from ..core.ops import LOOPS, OPAQUE, Op


def _is_float(v: Value) -> bool:
    return v.type.is_scalar and v.type.is_float


def free_floats(ins: Instr) -> list[Value]:
    """Float values used inside the instruction's regions but defined outside them."""
    local = local_ids(ins)
    seen, out = set(), []

    def visit(values) -> None:
        for v in values:
            if v.id not in local and v.id not in seen and _is_float(v):
                seen.add(v.id)
                out.append(v)

    def region(r: Region) -> None:
        for sub in r.body:
            visit(sub.args)
            for nested in sub.regions:
                region(nested)
        visit(r.yields)          # nested regions may yield an outer value directly

    for r in ins.regions:
        region(r)
    return out


def unused_atomics(fn: Function) -> set[int]:
    """Result ids of the atomics whose returned old value nothing uses: the replay skips them (their
    effect is on memory, which the replay does not redo). Atomics of inlined callee bodies, made later,
    are not in it and are replayed."""
    used = used_ids(fn)
    return {ins.result.id for ins in fn.walk() if ins.op == Op.ATOMIC and ins.result.id not in used}


def sole_writes(fn: Function) -> set:
    """Arrays the kernel writes with exactly one store per component, outside loops, and never reads or
    updates: each thread writes its element once, so after the adjoint of that store nothing else in this kernel can
    take gradient from the element, and its adjoint need not be zeroed (as in Warp, `y.grad` keeps the
    gradient that reached y; zeroing also cost 5x on an H100: a load then a zero store per element)."""
    stores: dict = {}
    other = set()

    def visit(region, in_loop):
        for ins in region.body:
            if ins.op == Op.STORE:
                # a whole element's components are stored one by one (counted per component); writes of
                # part of an element (v[i][k] = x) leave the rest of it in place: counted together
                part = ins.attrs.get("whole") is False
                key = (ins.args[0].id, "part" if part else ins.attrs.get("comp"))
                stores[key] = stores.get(key, 0) + (2 if in_loop else 1)
            elif ins.op in (Op.LOAD, Op.ATOMIC):
                other.add(ins.args[0].id)
            elif ins.op in OPAQUE:
                other.update(a.id for a in ins.args)
            for sub in ins.regions:
                visit(sub, in_loop or ins.op in LOOPS)

    visit(fn.body, False)
    per_array: dict = {}
    for (a, _), count in stores.items():
        per_array[a] = per_array.get(a, True) and count == 1
    return {a for a, once in per_array.items() if once and a not in other}
