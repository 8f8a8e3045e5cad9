"""Stencil adjoints as gathers: the adjoint of shifted reads `u[i - 1, j]`, `u[i + 1, j]`, ... scatters with
atomic adds into `adj_u[i - 1, j]`, `adj_u[i + 1, j]`, ..., which several threads hit at once. When every
access of an array in the adjoint is such an add at the thread's own index plus a constant shift, thread p can
instead gather what thread p - s would have added at shift s: it replays the adjoint body as thread p - s
(when that thread exists) keeping only that add, now to its own element — no atomics, no write contention
(JAX's adjoint of a shifted slice is the same gather). The adds are summed in registers (branches yield
values) and stored once per component; a thread replays itself, adding nothing, where p - s does not exist,
so no branch guards the replay.

The gathered kernel is right only when the gathered arrays' shape is the launch grid (then every element a
thread of the grid adds to is a thread of the grid); `fn.attrs["gather_sources"]` names the user-level
parameters whose shape the launch must check before choosing it (runtime/launch/launch.py `adjoint_variant`).
Kernels with loops, calls, native code or value stacks keep their scatter adjoint."""

from __future__ import annotations

from ..core import types as T
from ..core.ir import Builder, Function, Instr, Region, Value, copy_function, copy_instr
from ..core.ops import LOOPS, OPAQUE, STACK, WRITES, Op
from ..core.passes.scalarize import user_params
from ..core.passes.shifts import shifted_adds


def gather_plan(fn: Function) -> dict | None:
    """{array param id: {atomic instr: shift tuple}} for the arrays whose every access is an add at
    tid + constant (core/passes/shifts.py) with some shift nonzero; None when there is nothing to gather or
    the kernel is out of scope (loops, calls, native code, value stacks, an array both read and written)."""
    if any(ins.op in LOOPS or ins.op in STACK or ins.op in OPAQUE for ins in fn.walk()):
        return None
    plan = {a: sites for a, sites in shifted_adds(fn).items() if any(any(s) for s in sites.values())}
    # A replay as thread p - s reads what that thread reads; if the kernel also writes one of those arrays
    # (the adjoint of a store zeroes the element's gradient after reading it), the replay may read it
    # after that thread changed it.
    loaded = {ins.args[0].id for ins in fn.walk() if ins.op == Op.LOAD}
    written = {ins.args[0].id for ins in fn.walk() if ins.op in WRITES and ins.args[0].id not in plan}
    if loaded & written:
        return None
    # A replay performs no write but the gathered add, so what it adds must not come from a write's result
    # (an atomic's old value, the exchange of a max's gradient).
    from_writes = _from_writes(fn.body, set())
    if any(a.id in from_writes for sites in plan.values() for ins, sh in sites.items() if any(sh)
           for a in ins.args):
        return None
    return plan or None


def _from_writes(region: Region, tainted: set) -> set:
    """Ids of the values computed from the result of a write (`tainted` grows; regions before their `if`)."""
    for ins in region.body:
        for r in ins.regions:
            _from_writes(r, tainted)
        if ins.op in WRITES or any(a.id in tainted for a in ins.args) or \
                any(y.id in tainted for r in ins.regions for y in r.yields):
            tainted.update(v.id for v in ins.results)
    return tainted


def gather_adjoint(fn: Function) -> Function:
    """The adjoint `fn` with its shifted atomic adds turned into gathers (see the module docstring); `fn`
    itself when `gather_plan` finds nothing to do."""
    plan = gather_plan(fn)
    if plan is None:
        return fn
    sites = {ins: (arr, s) for arr, group in plan.items() for ins, s in group.items()}
    shifts: dict[tuple, int] = {}                     # shift -> an array gathered at it (for its shape)
    for arr, s in sites.values():
        shifts.setdefault(s, arr)
    out = copy_function(fn)
    params = {p.value.id: p.value for p in out.params}
    old_params = {p.value.id: q.value for p, q in zip(fn.params, out.params)}
    tid_of = {ins.attrs["axis"]: ins.result for ins in out.body.body if ins.op == Op.TID}
    # the thread's own part: adds at shift 0 stay (now no other thread hits that element), the others go
    for old_ins, new_ins in _matching(out, fn, sites):
        new_ins.attrs["exclusive"] = True
    _drop(out.body, {id(n) for o, n in _matching(out, fn, sites) if any(sites[o][1])})
    arrays = {params[_new_id(fn, out, a)].id for a in plan}
    b = Builder(out.body, fn.loc)
    out.body.body, sums = _hoist(out.body.body, arrays, b)
    tid_ids = {tid.result.id: tid.attrs["axis"] for tid in fn.body.body if tid.op == Op.TID}
    for s, arr in shifts.items():
        if not any(s):
            continue
        # thread p replays thread q = p - s when that thread exists; otherwise it replays itself (a thread
        # that does exist, so every access stays where a real thread's would) and adds nothing
        arr_value = params[_new_id(fn, out, arr)]
        q = [tid_of[d] if s[d] == 0 else b.sub(tid_of[d], b.const(s[d], T.int32)) for d in range(len(s))]
        cond = None
        for d, qd in enumerate(q):     # unshifted axes are inside: the array's shape is the launch grid
            if s[d] == 0:
                continue
            extent = b.emit(Op.SHAPE, [arr_value], [T.int32], {"axis": d}).result
            inside = b.prim("and", b.prim("ge", qd, b.const(0, T.int32)), b.prim("lt", qd, extent))
            cond = inside if cond is None else b.prim("and", cond, inside)
        # `guard`: the axes `cond` tests, so a backend that runs the threads away from the grid's edges
        # separately may take the replayed value there without selecting (backends/cpu: interior loops)
        guard = tuple(d for d in range(len(s)) if s[d])
        qc = [qd if qd is tid_of[d] else b.prim("where", cond, qd, tid_of[d], guard=guard)
              for d, qd in enumerate(q)]
        replay, part = _hoist(_replay(fn, old_params, {i: qc[axis] for i, axis in tid_ids.items()}, sites, s),
                              arrays, b)
        out.body.body.extend(replay)
        for key, vals in part.items():
            total = vals[0]
            for v in vals[1:]:
                total = b.add(total, v)
            sums.setdefault(key, []).append(b.prim("where", cond, total, b.zero(key[0].type.scalar), guard=guard))
    for (arr_v, comp), parts in sums.items():
        total = parts[0]
        for v in parts[1:]:
            total = b.add(total, v)
        b.atomic("add", arr_v, [tid_of[d] for d in range(len(tid_of))], total, comp=comp, exclusive=True)
    sources = []
    user = user_params(fn)
    n_fwd = len(fn.params) - len(fn.attrs.get("adj_of", ()))
    for arr in plan:
        k = next(i for i, p in enumerate(fn.params) if p.value.id == arr)
        lowered = fn.attrs["adj_of"][k - n_fwd] if k >= n_fwd else k
        sources.append(user[lowered])
    out.attrs["gather_sources"] = sorted(set(sources))
    # the gathered arrays' parameter positions (ad/fresh_store.py turns their adds into stores)
    out.attrs["gathered"] = tuple(sorted(next(i for i, p in enumerate(fn.params) if p.value.id == arr)
                                         for arr in plan))
    last = [sh[-1] for sh in shifts]       # threads this close to the last axis's ends replay past the edge
    out.attrs["gather_margin"] = (max(0, *last), max(0, *(-x for x in last)))
    return out


def _new_id(old: Function, new: Function, value_id: int) -> int:
    for p, q in zip(old.params, new.params):
        if p.value.id == value_id:
            return q.value.id
    raise KeyError(value_id)


def _matching(new: Function, old: Function, sites: dict) -> list[tuple[Instr, Instr]]:
    """(gathered atomic of `old`, its copy in `new`) pairs, `new` being a copy of `old` (same walk order)."""
    return [(o, n) for o, n in zip(old.walk(), new.walk()) if o in sites]


def _drop(region: Region, ids: set) -> None:
    region.body = [i for i in region.body if id(i) not in ids]
    for ins in region.body:
        for r in ins.regions:
            _drop(r, ids)


def _replay(fn: Function, params: dict, tid_values: dict, sites: dict, shift: tuple) -> list[Instr]:
    """The body of `fn` as thread tid - shift: the gathered adds at `shift` kept (to the element they hit,
    now the replaying thread's own: exclusive), every other write left out — or, where its result is used,
    replaced by a zero that only code left dead uses (`gather_plan` checks the kept adds do not) — thread ids
    read as the shifted ones."""
    mapping: dict[int, Value] = {**params, **tid_values}
    keep = {ins for ins, (_, s) in sites.items() if s == shift}

    def kept(ins: Instr) -> bool:
        return ins.op != Op.TID and (ins.op not in WRITES or ins in keep or bool(ins.results))

    def edit(old: Instr, new: Instr) -> None:
        if old in keep:
            new.attrs["exclusive"] = True
        elif old.op in WRITES:                     # not performed: its old value stands in as a zero
            new.op, new.args, new.attrs = Op.CONST, [], {"value": 0}
            new.result.const_value = 0

    return [copy_instr(ins, mapping, kept, edit) for ins in fn.body.body if kept(ins)]


def _hoist(body: list, arrays: set, b: Builder) -> tuple[list, dict]:
    """`body` without its adds into `arrays` (nested ones yielded out of their `if`s), and the values to add
    by (array, component). `b` only lends its location to the instructions made."""
    out, sums = [], {}
    scratch = Region([], [], [])
    for ins in body:
        if ins.op == Op.ATOMIC and ins.args[0].id in arrays:
            value = ins.args[-1]
            if ins.attrs["kind"] == "sub":
                tmp = b.at(scratch)
                value = tmp.neg(value)
                out.extend(scratch.body)
                scratch.body.clear()
            sums.setdefault((ins.args[0], ins.attrs["comp"]), []).append(value)
            continue
        if ins.op == Op.IF and any(i.op == Op.ATOMIC and i.args[0].id in arrays
                                   for r in ins.regions for i in r.walk()):
            branches = []
            for r in ins.regions:
                r.body, part = _hoist(r.body, arrays, b)
                branches.append(part)
            keys = list(dict.fromkeys(k for part in branches for k in part))
            for r, part in zip(ins.regions, branches):
                rb = b.at(r)
                for key in keys:
                    vals = part.get(key)
                    if vals is None:
                        r.yields.append(rb.zero(key[0].type.scalar))
                        continue
                    total = vals[0]
                    for v in vals[1:]:
                        total = rb.add(total, v)
                    r.yields.append(total)
            for key in keys:
                res = Value(key[0].type.scalar)
                ins.results.append(res)
                sums.setdefault(key, []).append(res)
        out.append(ins)
    return out, sums

