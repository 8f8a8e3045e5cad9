"""Promote an array element a loop reads and rewrites to a loop-carried value (register promotion).

`for k in range(n): y[i] *= x[k]` becomes `t = y[i]; for k: t = t * x[k]; y[i] = t`. The loop then
reads memory once before it and writes once after it, so reverse mode differentiates it through the
loop's carried values (the value stack) instead of re-reading an element the loop kept overwriting —
which no replay could see as it was on each trip. It also saves a load and a store per trip.

Promoted: an element (array, index values defined outside the loop, component) when every access to
that array inside the loop is a plain load or store of exactly that element, its stores sit at the top
level of the loop body (not inside a branch or an inner loop: inner loops are promoted first), and the
loop has no calls or native code. Anything else is left as it is.
"""

from __future__ import annotations

from ..ir import Function, Instr, Region, Value, local_ids


def _candidates(loop: Instr) -> list[tuple]:
    """(array, index values, comp) elements of `loop` that can be promoted."""
    body = loop.regions[-1]
    local = local_ids(loop)
    accesses: dict[int, list[Instr]] = {}
    for r in loop.regions:
        for ins in r.walk():
            if ins.op in ("call", "native"):
                return []
            if ins.op in ("load", "store", "atomic"):
                accesses.setdefault(ins.args[0].id, []).append(ins)
    top_stores = {id(ins) for ins in body.body if ins.op == "store"}
    cond_reads = {ins.args[0].id for r in loop.regions[:-1] for ins in r.walk() if ins.op == "load"}
    out = []
    for arr_id, group in accesses.items():
        if arr_id in cond_reads or any(i.op == "atomic" for i in group):
            continue
        if not any(i.op == "store" for i in group) or any(i.op == "store" and id(i) not in top_stores
                                                           for i in group):
            continue
        idx_of = lambda i: tuple(a.id for a in (i.args[1:-1] if i.op == "store" else i.args[1:]))
        keys = {idx_of(i) for i in group}
        if len(keys) != 1:
            continue
        first = group[0]
        idx = first.args[1:-1] if first.op == "store" else first.args[1:]
        if any(v.id in local and v.const_value is None for v in idx):    # constants can be made again outside
            continue
        comps = {i.attrs.get("comp") for i in group}
        out.extend((first.args[0], list(idx), c) for c in comps)
    return out


def _rename(region: Region, names: dict[int, Value]) -> None:
    for ins in region.body:
        ins.args = [names.get(a.id, a) for a in ins.args]
        for r in ins.regions:
            _rename(r, names)
    region.yields = [names.get(y.id, y) for y in region.yields]


def _promote(loop: Instr) -> tuple[list[Instr], list[Instr]]:
    """Rewrite `loop` in place; returns the loads to put before it and the stores to put after it."""
    before, after = [], []
    body = loop.regions[-1]
    local = local_ids(loop)
    for arr, idx, comp in _candidates(loop):
        outer = []
        for v in idx:                       # a constant index made inside the loop: make it again before it
            if v.id in local:
                c = Value(v.type, v.hint)
                c.const_value = v.const_value
                before.append(Instr("const", [], [c], {"value": v.const_value}, loc=loop.loc))
                v = c
            outer.append(v)
        idx = outer
        t = arr.type.dtype.scalar if comp is not None else arr.type.dtype
        first = Value(t, "elem")
        before.append(Instr("load", [arr, *idx], [first], {"comp": comp}, loc=loop.loc))
        param = Value(t, "elem")
        for r in loop.regions[:-1]:                 # a while's condition region takes the carried values too
            r.params.append(Value(t, "elem"))
        body.params.append(param)
        loop.args.append(first)
        result = Value(t, "elem")
        loop.results.append(result)
        cur, names, kept = param, {}, []
        for ins in body.body:
            mine = ins.args and ins.args[0] is arr and ins.attrs.get("comp") == comp
            if ins.op == "store" and mine:
                cur = names.get(ins.args[-1].id, ins.args[-1])
                continue
            if ins.op == "load" and mine:
                names[ins.result.id] = cur
                continue
            for sub_region in ins.regions:
                for sub in sub_region.walk():
                    if sub.op == "load" and sub.args[0] is arr and sub.attrs.get("comp") == comp:
                        names[sub.result.id] = cur
            kept.append(ins)
        body.body = kept
        body.yields.append(cur)
        _rename(body, names)
        after.append(Instr("store", [arr, *idx, result], [], {"comp": comp}, loc=loop.loc))
    return before, after


def _region(region: Region) -> None:
    out = []
    for ins in region.body:
        for r in ins.regions:
            _region(r)
        if ins.op in ("for", "while"):
            before, after = _promote(ins)
            out.extend(before)
            out.append(ins)
            out.extend(after)
        else:
            out.append(ins)
    region.body = out


def promote_elements(fn: Function) -> Function:
    _region(fn.body)
    return fn
