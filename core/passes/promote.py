"""Promote an array element a loop reads and rewrites to a loop-carried value (register promotion).

`for k in range(n): y[i] *= x[k]` becomes `t = y[i]; for k: t = t * x[k]; y[i] = t`. The loop then
reads memory once before it and writes once after it, so reverse mode differentiates it through the
loop's carried values (the value stack) instead of re-reading an element the loop kept overwriting —
which no replay could see as it was on each trip. It also saves a load and a store per trip.

Promoted: an element (array, index values defined outside the loop or constants, component) when every
access to that array inside the loop is a plain load or store of exactly that element, its stores sit in
the loop body or in `if` branches inside it (a branch yields the element's value), not in an inner loop
(inner loops are promoted first), and the loop has no calls or native code. Anything else is left as is.
"""

from __future__ import annotations

from ..ir import Function, Instr, Region, Value, access_index, different_elements, index_key, local_ids
from ..ops import LOOPS, MEMORY, OPAQUE, Op


def _stores_reachable(region: Region, arr_id: int) -> bool:
    """Every store to the array in `region` sits in it or in `if` branches inside it, not in an inner loop."""
    for ins in region.body:
        if ins.op in LOOPS and any(s.op == Op.STORE and s.args[0].id == arr_id
                                              for r in ins.regions for s in r.walk()):
            return False
        if ins.op == Op.IF and not all(_stores_reachable(r, arr_id) for r in ins.regions):
            return False
    return True


def _candidates(loop: Instr) -> list[tuple]:
    """(array, index values, comp) elements of `loop` that can be promoted."""
    body = loop.regions[-1]
    local = local_ids(loop)
    accesses: dict[int, list[Instr]] = {}
    for r in loop.regions:
        for ins in r.walk():
            if ins.op in OPAQUE:
                return []
            if ins.op in MEMORY:
                accesses.setdefault(ins.args[0].id, []).append(ins)
    cond_reads = {ins.args[0].id for r in loop.regions[:-1] for ins in r.walk() if ins.op == Op.LOAD}
    out = []
    for arr_id, group in accesses.items():
        if arr_id in cond_reads or any(i.op == Op.ATOMIC for i in group):
            continue
        if not any(i.op == Op.STORE for i in group) or not _stores_reachable(body, arr_id):
            continue
        elements: dict = {}
        for i in group:
            elements.setdefault((index_key(access_index(i)), i.attrs.get("comp")), []).append(i)
        keys = [k for k, _ in elements]
        if not all(_distinct(a, b) for n, a in enumerate(keys) for b in keys[n + 1:]):
            continue                        # two accesses that may be one element: leave the array alone
        for (_, comp), accesses in elements.items():
            idx = access_index(accesses[0])
            if any(v.id in local and v.const_value is None for v in idx):   # constants can be made again outside
                break
        else:
            out.extend((accesses[0].args[0], list(access_index(accesses[0])), comp)
                       for (_, comp), accesses in elements.items() if any(a.op == Op.STORE for a in accesses))
    return out


def _distinct(a: tuple, b: tuple) -> bool:
    """Element keys of one array in a candidate set: the same index (told apart by component) or
    provably different elements."""
    return a == b or different_elements(a, b)


def _rename(region: Region, names: dict[int, Value]) -> None:
    for ins in region.body:
        ins.args = [names.get(a.id, a) for a in ins.args]
        for r in ins.regions:
            _rename(r, names)
    region.yields = [names.get(y.id, y) for y in region.yields]


def _thread(region: Region, arr: Value, key: tuple, comp, cur: Value, names: dict) -> Value:
    """Replace the element's loads and stores in `region` by SSA values, starting from `cur`; branches
    that store yield the element's value out of their `if`. Returns the value at the region's end."""
    mine = lambda i: (i.op in (Op.LOAD, Op.STORE) and i.args[0] is arr and i.attrs.get("comp") == comp
                      and index_key(access_index(i)) == key)
    kept = []
    for ins in region.body:
        if ins.op == Op.STORE and mine(ins):
            cur = names.get(ins.args[-1].id, ins.args[-1])
            continue
        if ins.op == Op.LOAD and mine(ins):
            names[ins.result.id] = cur
            continue
        if ins.op == Op.IF and any(s.op == Op.STORE and mine(s) for r in ins.regions for s in r.walk()):
            for r in ins.regions:
                r.yields.append(_thread(r, arr, key, comp, cur, names))
            cur = Value(cur.type, "elem")
            ins.results.append(cur)
        else:
            for sub_region in ins.regions:          # loads only (inner loops never store it)
                for sub in sub_region.walk():
                    if sub.op == Op.LOAD and mine(sub):
                        names[sub.result.id] = cur
        kept.append(ins)
    region.body = kept
    return cur


def _promote(loop: Instr) -> tuple[list[Instr], list[Instr]]:
    """Rewrite `loop` in place; returns the loads to put before it and the stores to put after it."""
    before, after = [], []
    body = loop.regions[-1]
    local = local_ids(loop)
    for arr, idx, comp in _candidates(loop):
        key = index_key(idx)
        outer = []
        for v in idx:                       # a constant index made inside the loop: make it again before it
            if v.id in local:
                c = Value(v.type, v.hint)
                c.const_value = v.const_value
                before.append(Instr(Op.CONST, [], [c], {"value": v.const_value}, loc=loop.loc))
                v = c
            outer.append(v)
        idx = outer
        t = arr.type.dtype.scalar if comp is not None else arr.type.dtype
        first = Value(t, "elem")
        before.append(Instr(Op.LOAD, [arr, *idx], [first], {"comp": comp, "promoted": True}, loc=loop.loc))
        param = Value(t, "elem")
        for r in loop.regions[:-1]:                 # a while's condition region takes the carried values too
            r.params.append(Value(t, "elem"))
        body.params.append(param)
        loop.args.append(first)
        result = Value(t, "elem")
        loop.results.append(result)
        names: dict = {}
        body.yields.append(_thread(body, arr, key, comp, param, names))
        _rename(body, names)
        after.append(Instr(Op.STORE, [arr, *idx, result], [], {"comp": comp, "promoted": True}, loc=loop.loc))
    return before, after


def _region(region: Region) -> None:
    out = []
    for ins in region.body:
        for r in ins.regions:
            _region(r)
        if ins.op in LOOPS:
            before, after = _promote(ins)
            out.extend(before)
            out.append(ins)
            out.extend(after)
        else:
            out.append(ins)
    region.body = out


def _straight_line(fn: Function) -> None:
    while _straight_line_once(fn):
        pass


def _straight_line_once(fn: Function) -> bool:
    """The same for the kernel's own body: an element read, then rewritten under branches (unrolled
    `gk.static` trips with `if`s) becomes one load before its first access, values the branches yield,
    and one store after its last access — no load then reads a value an earlier branch stored."""
    body = fn.body
    top_of: dict[int, int] = {}
    accesses: dict[int, list[Instr]] = {}
    for pos, ins in enumerate(body.body):
        for sub in [ins, *(s for r in ins.regions for s in r.walk())]:
            if sub.op in OPAQUE:
                return False
            if sub.op in MEMORY and sub.args[0].type.is_array:
                accesses.setdefault(sub.args[0].id, []).append(sub)
                top_of[id(sub)] = pos
    looped = {s.args[0].id for ins in body.body if ins.op in LOOPS
              for r in ins.regions for s in r.walk() if s.op in MEMORY}
    # Position of the top-level instruction defining each value (-1: a parameter): "defined before
    # position p" is def_pos < p. One dict, not a set per position (that was quadratic in body length).
    def_pos = {p.value.id: -1 for p in fn.params}
    for pos, ins in enumerate(body.body):
        for r in ins.results:
            def_pos.setdefault(r.id, pos)
    top = None
    for arr_id, group in accesses.items():
        if arr_id in looped or any(i.op == Op.ATOMIC for i in group) or not any(i.op == Op.STORE for i in group):
            continue
        if top is None:
            top = {id(i) for i in body.body}
        if all(id(i) in top for i in group):
            continue                                  # nothing under a branch: simplify forwards it already
        elements: dict = {}
        for i in group:
            elements.setdefault((index_key(access_index(i)), i.attrs.get("comp")), []).append(i)
        keys = [k for k, _ in elements]
        if not all(_distinct(a, b) for n, a in enumerate(keys) for b in keys[n + 1:]):
            continue
        for (key, comp), members in elements.items():
            if not any(m.op == Op.STORE and id(m) not in top for m in members):
                continue                              # only an element stored under a branch needs it
            first, last = min(top_of[id(m)] for m in members), max(top_of[id(m)] for m in members)
            idx = access_index(members[0])
            if any(v.const_value is None and def_pos.get(v.id, first) >= first for v in idx):
                continue
            arr = members[0].args[0]
            pre = []
            outer = []
            for v in idx:
                if v.const_value is not None and def_pos.get(v.id, first) >= first:
                    c = Value(v.type, v.hint)
                    c.const_value = v.const_value
                    pre.append(Instr(Op.CONST, [], [c], {"value": v.const_value}, loc=members[0].loc))
                    v = c
                outer.append(v)
            t = arr.type.dtype.scalar if comp is not None else arr.type.dtype
            start = Value(t, "elem")
            pre.append(Instr(Op.LOAD, [arr, *outer], [start], {"comp": comp, "promoted": True}, loc=members[0].loc))
            span = Region([], body.body[first:last + 1])
            names: dict = {}
            end = _thread(span, arr, key, comp, start, names)
            store = Instr(Op.STORE, [arr, *outer, end], [], {"comp": comp, "promoted": True}, loc=members[-1].loc)
            body.body = body.body[:first] + pre + span.body + [store] + body.body[last + 1:]
            _rename(body, names)
            return True                               # positions moved: start over for the next element
    return False


def promote_elements(fn: Function) -> Function:
    _region(fn.body)
    _straight_line(fn)
    return fn
