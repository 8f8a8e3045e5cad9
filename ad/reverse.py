"""Reverse mode as an IR pass: lowered forward IR → adjoint IR.

The adjoint kernel takes the forward parameters followed by one adjoint array
per float array parameter (`adj_<name>`). Its body replays the forward
computation (without stores), then walks instructions backwards applying each
builtin's VJP rule. Array loads become atomic adds into the adjoint array
(plain read-modify-writes where the element is the thread's own: ad/owned.py,
`x[tid]`, `x[t, tid]` with `t` an argument, ...); stores read the adjoint of
the stored element and zero it.

Structured control flow:
  * `if`: the reverse is an `if` on the same condition whose branches replay the
    branch and then reverse it; adjoints of outer values are yielded out.
  * `for` / `while` with carried values: the replay pushes each iteration's
    carried values on a per-thread value stack; the reverse loop runs the
    iterations backwards, pops them, replays the body and reverses it, carrying
    the adjoints of the carried values and of every outer value the body uses.
    Only the loop being reversed pushes (nested loops push when their own
    enclosing body is replayed), so pushes and pops nest as a stack.
Unneeded replay work and pushes whose pops are unused are removed afterwards.
"""

from __future__ import annotations

import itertools

from ..core import types as T
from ..core.builtins import BUILTINS
from ..core.errors import CompileError
from ..core.ir import Builder, Function, Instr, Region, Value, copy_instr, local_ids, used_ids
from ..core.ops import LOOPS, STACK, WRITES, Op
from ..core.passes import inline_kept_calls, lower
from ..core.passes.simplify import simplify
from .derived import Derived, derived_kernel
from .owned import Owners, consistent_arrays
from .reverse_facts import free_floats, sole_writes, unused_atomics


def _is_float(v: Value) -> bool:
    return v.type.is_scalar and v.type.is_float


class Reverse:
    """One adjoint under construction: the maps from forward values to primal and adjoint values, and the
    notes its phases leave one another about forward instructions (side tables keyed by the instruction:
    the forward copy and the regions made from it live as long as this object)."""

    def __init__(self, d: Derived, consume: bool = False):
        fwd = d.fwd
        self.fwd, self.fn = fwd, d.fn
        self.adj_arrays = d.extra           # forward array param id -> adjoint array Value
        tids = sorted((i for i in fwd.body.body if i.op == Op.TID), key=lambda i: i.attrs["axis"])
        ndim = fwd.attrs.get("tid_ndim", 1)
        # the tid values' ids in axis order, for stores at [tid] ([-1]: the kernel does not read every axis)
        self.tid_ids = [i.result.id for i in tids] if len(tids) == ndim else [-1]
        self.owners = Owners(fwd)           # which forward index tuples name a thread-owned element
        self.primal: dict[int, Value] = dict(d.primal)  # forward value id -> value in the adjoint function
        self.adj: dict[int, Value] = {}     # forward value id -> accumulated adjoint
        self.sites = itertools.count()
        self.pairs = itertools.count()
        d.fn.attrs["stack_sites"] = {}
        # arrays whose adjoint need not be zeroed after a store (none when the adjoint consumes)
        self.sole_writes = set() if consume else sole_writes(fwd)
        self.kept: set[int] = set()          # those whose zeroing was left out
        self.unused_atomics = unused_atomics(fwd)   # result ids of atomics whose old value nobody reads
        self.virtuals: dict[Instr, Region] = {}     # call -> its callee's body in forward terms
        self.stacks: dict[Instr, tuple[int, list[int]]] = {}  # loop -> (stack site, push/pop pair per carried)
        self.trips: dict[Instr, Value] = {}          # while loop -> its replay's trip count

    # ------------------------------------------------------------------ helpers
    def p(self, v: Value) -> Value:
        return self.primal.get(v.id, v)

    def add_adj(self, b: Builder, v: Value, a: Value | None) -> None:
        if a is None or not _is_float(v):
            return
        if a.type is not v.type:
            a = b.cast(a, v.type)
        old = self.adj.get(v.id)
        self.adj[v.id] = a if old is None else b.add(old, a)

    def zero(self, b: Builder, t) -> Value:
        return b.const(0.0, t)

    # ------------------------------------------------------------------ replay
    def replay_region(self, region: Region, b: Builder, push: bool) -> None:
        for ins in region.body:
            self.replay(ins, b, push)

    def replay(self, ins: Instr, b: Builder, push: bool) -> None:
        b.loc = ins.loc
        op = ins.op
        if op == Op.STORE:
            return
        if op == Op.ATOMIC and ins.result.id in self.unused_atomics:
            return
        if op == Op.IF:
            regions = []
            for r in ins.regions:
                nr = Region()
                rb = b.at(nr)
                self.replay_region(r, rb, False)
                nr.yields = [self.p(y) for y in r.yields]
                regions.append(nr)
            new = b.emit(Op.IF, [self.p(ins.args[0])], [r.type for r in ins.results], regions=regions)
            self.map_results(ins, new)
            return
        if op == Op.FOR:
            self.replay_for(ins, b, push)
            return
        if op == Op.WHILE:
            self.replay_while(ins, b, push)
            return
        if op == Op.CALL:
            custom = ins.attrs["callee"].custom_grad is not None
            region = self.virtual(ins)
            self.replay_region(region, b, push and not custom)   # a custom gradient pops nothing
            for r, y in zip(ins.results, region.yields):
                self.primal[r.id] = self.p(y)
            return
        attrs = dict(ins.attrs)
        if op == Op.NATIVE:
            attrs["variant"] = "replay"
        new = b.emit(op, [self.p(a) for a in ins.args], [r.type for r in ins.results], attrs)
        for r, n in zip(ins.results, new.results):
            n.const_value, n.hint = r.const_value, r.hint
        self.map_results(ins, new)

    def virtual(self, ins: Instr) -> Region:
        """The callee's body (its replay function's, if it has one) inlined in forward terms, once per call."""
        region = self.virtuals.get(ins)
        if region is None:
            callee = ins.attrs["callee"]
            src = lower((callee.custom_replay or callee).ir_function())
            mapping = {p.value.id: a for p, a in zip(src.params, ins.args)}
            region = Region([], [copy_instr(sub, mapping) for sub in src.body.body],
                            [mapping.get(y.id, y) for y in src.body.yields])
            if callee.custom_replay is not None:
                for sub in region.walk():       # a replay reads what the forward left (Warp's idiom)
                    if sub.op == Op.LOAD:
                        sub.attrs["final"] = True
            self.virtuals[ins] = region
        return region

    def reverse_call(self, ins: Instr, b: Builder) -> None:
        callee = ins.attrs["callee"]
        if callee.custom_grad is None:
            region = self.virtual(ins)
            for r, y in zip(ins.results, region.yields):
                if r.id in self.adj:
                    self.add_adj(b, y, self.adj[r.id])
            self.reverse_region(region, b)
            return
        # a custom adjoint is run, not differentiated: custom-rule calls inside it are plain calls
        grad = inline_kept_calls(lower(callee.custom_grad.ir_function()))
        adjs = [self.adj.get(r.id) or self.zero(b, r.type) for r in ins.results]
        mapping = {p.value.id: v for p, v in zip(grad.params, [self.p(a) for a in ins.args] + adjs)}
        for sub in grad.body.body:
            b.region.body.append(copy_instr(sub, mapping))
        outs = [mapping.get(y.id, y) for y in grad.body.yields]
        for a, g in zip([a for a in ins.args if _is_float(a)], outs):
            self.add_adj(b, a, g)

    def map_results(self, ins: Instr, new: Instr) -> None:
        for r, n in zip(ins.results, new.results):
            self.primal[r.id] = n
            n.hint = n.hint or r.hint

    def push_carried(self, ins: Instr, b: Builder, carried: list[Value]) -> None:
        """At the top of each replayed iteration, push the loop's carried values (one stack site per loop)."""
        site = next(self.sites)
        self.fn.attrs["stack_sites"][site] = ins.loc
        pairs = []
        for p in carried:
            pair = next(self.pairs)
            b.emit(Op.PUSH, [p], [], {"stack": site, "pair": pair})
            pairs.append(pair)
        self.stacks[ins] = (site, pairs)

    def replay_for(self, ins: Instr, b: Builder, push: bool) -> None:
        (body,) = ins.regions
        nb = Region(params=[Value(p.type, p.hint) for p in body.params])
        for old, new in zip(body.params, nb.params):
            self.primal[old.id] = new
        bb = b.at(nb)
        if push:
            self.push_carried(ins, bb, nb.params[1:])
        self.replay_region(body, bb, False)
        nb.yields = [self.p(y) for y in body.yields]
        new = b.emit(Op.FOR, [self.p(a) for a in ins.args], [r.type for r in ins.results], regions=[nb])
        self.map_results(ins, new)

    def replay_while(self, ins: Instr, b: Builder, push: bool) -> None:
        cond, body = ins.regions
        extra = [b.const(0, T.int32)] if push else []
        ncond = Region(params=[Value(p.type, p.hint) for p in cond.params] + [Value(T.int32, "trips")] * bool(push))
        for old, new in zip(cond.params, ncond.params):
            self.primal[old.id] = new
        self.replay_region(cond, b.at(ncond), False)
        ncond.yields = [self.p(cond.yields[0])]
        nbody = Region(params=[Value(p.type, p.hint) for p in body.params] + [Value(T.int32, "trips")] * bool(push))
        for old, new in zip(body.params, nbody.params):
            self.primal[old.id] = new
        bb = b.at(nbody)
        if push:
            self.push_carried(ins, bb, nbody.params[:-1])
        self.replay_region(body, bb, False)
        nbody.yields = [self.p(y) for y in body.yields]
        if push:
            nbody.yields.append(bb.add(nbody.params[-1], bb.const(1, T.int32)))
        types = [r.type for r in ins.results] + [T.int32] * bool(push)
        new = b.emit(Op.WHILE, [self.p(a) for a in ins.args] + extra, types, regions=[ncond, nbody])
        self.map_results(ins, new)
        if push:
            self.trips[ins] = new.results[-1]

    # ------------------------------------------------------------------ reverse
    def reverse_region(self, region: Region, b: Builder) -> None:
        for ins in reversed(region.body):
            b.loc = ins.loc
            self.reverse(ins, b)

    def reverse(self, ins: Instr, b: Builder) -> None:
        op = ins.op
        if op == Op.PRIM:
            adj = self.adj.get(ins.result.id)
            if adj is None or not _is_float(ins.result):
                return
            entry = BUILTINS[ins.attrs["name"]]
            attrs = {k: v for k, v in ins.attrs.items() if k != "name"}
            grads = entry.apply_vjp(b, [self.p(a) for a in ins.args], self.p(ins.result), adj, attrs)
            for a, g in zip(ins.args, grads):
                self.add_adj(b, a, g)
        elif op == Op.LOAD:
            adj = self.adj.get(ins.result.id)
            arr = self.adj_arrays.get(ins.args[0].id)
            if adj is not None and arr is not None:
                idx = [self.p(a) for a in ins.args[1:]]
                b.atomic("add", arr, idx, adj, comp=ins.attrs["comp"], exclusive=self.exclusive(ins.args[1:]))
        elif op == Op.STORE:
            arr = self.adj_arrays.get(ins.args[0].id)
            value = ins.args[-1]
            if arr is not None:
                idx = [self.p(a) for a in ins.args[1:-1]]
                comp = ins.attrs["comp"]
                g = b.load(arr, idx, comp=comp)
                if ins.args[0].id not in self.sole_writes or not self.at_tid(ins.args[1:-1]):
                    # the element's earlier value (or another write) may take gradient too: what this
                    # store overwrote gets none
                    b.store(arr, idx, self.zero(b, arr.type.scalar), comp=comp)
                else:
                    # nothing else in this kernel takes gradient from the element: whether its earlier
                    # value (written or read by an earlier launch) needs the reset is the tape's call
                    # (runtime/tape/tape_consume.py launches the consuming adjoint then)
                    self.kept.add(ins.args[0].id)
                self.add_adj(b, value, g)
        elif op == Op.ATOMIC:
            arr = self.adj_arrays.get(ins.args[0].id)
            if arr is None:
                return
            idx = [self.p(a) for a in ins.args[1:-1]]
            value, comp, kind = ins.args[-1], ins.attrs["comp"], ins.attrs["kind"]
            if kind in ("min", "max"):
                self.add_adj(b, value, self.take_if_winner(b, ins, arr, idx, comp))
                return
            g = b.load(arr, idx, comp=comp)
            if kind == "sub":
                g = b.neg(g)
            self.add_adj(b, value, g)
        elif op == Op.IF:
            self.reverse_if(ins, b)
        elif op in LOOPS:
            self.reverse_loop(ins, b)
        elif op == Op.CALL:
            self.reverse_call(ins, b)
        elif op == Op.NATIVE:
            self.reverse_native(ins, b)
        elif op not in (Op.CONST, Op.TID, Op.SHAPE):     # these take no float operand: nothing flows back
            raise CompileError(f"reverse mode has no rule for the '{op}' op (ad/reverse.py Reverse.reverse)")

    def take_if_winner(self, b: Builder, ins: Instr, arr: Value, idx: list[Value], comp) -> Value:
        """Adjoint of atomic_min/max for this thread: the element's whole adjoint if the thread's value is
        the element's final value, else 0. Among threads that tie, the first to exchange the adjoint with 0
        takes it, so it is counted once (a select on equality alone gives it to every tying thread)."""
        cur = b.emit(Op.LOAD, [self.p(ins.args[0]), *idx], [arr.type.scalar], {"comp": comp, "final": True}).result
        win = b.prim("eq", cur, self.p(ins.args[-1]))
        zero = self.zero(b, arr.type.scalar)
        taken = Region()
        tb = b.at(taken)
        taken.yields = [tb.atomic("xchg", arr, idx, tb.const(0.0, arr.type.scalar), comp=comp,
                                  exclusive=self.exclusive(ins.args[1:-1]))]
        other = Region(yields=[zero])
        return b.emit(Op.IF, [win], [arr.type.scalar], regions=[taken, other]).result

    def reverse_native(self, ins: Instr, b: Builder) -> None:
        """The adjoint snippet: primal arguments, the return value's adjoint and the adjoint arrays in; one
        contribution per float scalar parameter out."""
        spec = ins.attrs["native"]
        if not spec.has("adjoint"):
            raise CompileError(f"@gk.func_native '{spec.name}' (called at {ins.loc}) has no adj_snippets, so "
                               "gradients through it are unknown; give it adj_snippets or launch without "
                               "differentiating through it")
        args = [self.p(a) for a in ins.args]
        adj_ret = [self.adj.get(r.id) or self.zero(b, r.type) for r in ins.results]
        adj_arrays = [self.adj_arrays[ins.args[k].id] for k in spec.float_arrays()]
        scalars = spec.float_scalars()
        new = b.emit(Op.NATIVE, args + adj_ret + adj_arrays, [ins.args[k].type for k in scalars],
                     {"native": spec, "variant": "adjoint"})
        for k, g in zip(scalars, new.results):
            self.add_adj(b, ins.args[k], g)

    def exclusive(self, idx: list[Value]) -> bool:
        """True when the forward index names an element only this thread touches (ad/owned.py); whether
        every access to the adjoint array agrees is `_settle_exclusive`'s to check."""
        return self.owners.signature(idx) is not None

    def at_tid(self, idx: list[Value]) -> bool:
        """True when the index is exactly the thread's own coordinates (one thread per element)."""
        return len(idx) == len(self.tid_ids) and all(v.id == t for v, t in zip(idx, self.tid_ids))

    def reverse_if(self, ins: Instr, b: Builder) -> None:
        seeds = [(r, self.adj.get(r.id)) for r in ins.results]
        if all(a is None for _, a in seeds):
            if not any(i.op in WRITES for r in ins.regions for i in r.walk()):
                return
        before = dict(self.adj)
        branches = []
        for region in ins.regions:
            self.adj = dict(before)
            nr = Region()
            rb = b.at(nr)
            self.replay_region(region, rb, True)
            for (r, a), y in zip(seeds, region.yields):
                if a is not None:
                    self.add_adj(rb, y, a)
            self.reverse_region(region, rb)
            branches.append((nr, rb, self.adj))
        local = local_ids(ins)
        changed = [k for k in dict.fromkeys(k for _, _, adj in branches for k in adj)
                   if k not in local and any(adj.get(k) is not before.get(k) for _, _, adj in branches)]
        self.adj = before
        types = []
        for k in changed:
            t = next(adj[k].type for _, _, adj in branches if k in adj)
            types.append(t)
        for (nr, rb, adj), _ in zip(branches, ins.regions):
            nr.yields = [adj[k] if k in adj else (before[k] if k in before else self.zero(rb, t))
                         for k, t in zip(changed, types)]
        new = b.emit(Op.IF, [self.p(ins.args[0])], types, regions=[nr for nr, _, _ in branches])
        for k, r in zip(changed, new.results):
            self.adj[k] = r

    def reverse_loop(self, ins: Instr, b: Builder) -> None:
        is_for = ins.op == Op.FOR
        body = ins.regions[-1]
        carried = body.params[1:] if is_for else body.params
        inits = ins.args[3:] if is_for else ins.args
        local = local_ids(ins)
        free = [v for v in free_floats(ins) if v.id not in local]
        # Trip count and index reconstruction.
        if is_for:
            start, stop, step = (self.p(a) for a in ins.args[:3])
            trips = _trip_count(b, start, stop, step)
        else:
            trips = self.trips[ins]
        seeds = [self.adj.get(r.id) or self.zero(b, r.type) if _is_float(r) else None for r in ins.results]
        fl = [k for k, c in enumerate(carried) if _is_float(c)]
        init_adj = [seeds[k] for k in fl] + [self.adj.get(v.id) or self.zero(b, v.type) for v in free]
        rbody = Region(params=[Value(T.int32, "rk")] + [Value(x.type, "adj") for x in init_adj])
        rb = b.at(rbody)
        saved_adj, saved_primal = self.adj, dict(self.primal)
        self.adj = {}
        # Pop this iteration's carried values (pushed in order, popped in reverse).
        site, pairs = self.stacks.get(ins, (0, []))
        popped = [None] * len(carried)
        for k in reversed(range(len(carried))):
            popped[k] = rb.emit(Op.POP, [], [carried[k].type], {"stack": site, "pair": pairs[k]}, hint="pop").result
        for c, v in zip(carried, popped):
            self.primal[c.id] = v
        if is_for:
            k = rbody.params[0]
            last = rb.sub(trips, rb.const(1, T.int32))
            iv = rb.add(start, rb.mul(rb.sub(last, k), step))
            self.primal[body.params[0].id] = iv
        self.replay_region(body, rb, True)
        for j, v in enumerate(free):
            self.adj[v.id] = rbody.params[1 + len(fl) + j]
        for j, k in enumerate(fl):
            self.add_adj(rb, body.yields[k], rbody.params[1 + j])
        self.reverse_region(body, rb)
        rbody.yields = [self.adj.get(carried[k].id) or self.zero(rb, carried[k].type) for k in fl] + \
                       [self.adj.get(v.id) for v in free]
        self.adj, self.primal = saved_adj, saved_primal
        zero_i = b.const(0, T.int32)
        one_i = b.const(1, T.int32)
        new = b.emit(Op.FOR, [zero_i, trips, one_i, *init_adj], [x.type for x in init_adj], regions=[rbody])
        res = new.results
        for j, v in enumerate(free):          # first: an init value may also be used inside the loop
            self.adj[v.id] = res[len(fl) + j]
        for j, k in enumerate(fl):
            self.add_adj(b, inits[k], res[j])


def _trip_count(b: Builder, start: Value, stop: Value, step: Value) -> Value:
    one = b.const(1, T.int32)
    zero = b.const(0, T.int32)
    up = b.prim("floordiv", b.add(b.sub(stop, start), b.sub(step, one)), step)
    down = b.prim("floordiv", b.sub(b.sub(start, stop), b.add(step, one)), b.neg(step))
    n = b.select(b.prim("gt", step, zero), up, down) if step.const_value is None else (
        up if step.const_value > 0 else down)
    return b.prim("max", n, zero)


def _prune_stack(fn: Function) -> None:
    """Drop push/pop pairs whose popped value is never used (repeat until stable)."""
    from ..core.passes.simplify import dce
    while True:
        used = used_ids(fn)
        dead = {ins.attrs["pair"] for ins in fn.walk() if ins.op == Op.POP and ins.result.id not in used}
        if not dead:
            return
        _drop(fn.body, dead)
        dce(fn.body, set())


def _drop(region: Region, pairs: set[int]) -> None:
    region.body = [i for i in region.body if not (i.op in STACK and i.attrs.get("pair") in pairs)]
    for ins in region.body:
        for r in ins.regions:
            _drop(r, pairs)


def _settle_exclusive(fn: Function) -> None:
    """Keep `exclusive` (plain read-modify-write) on an adjoint atomic only when every access to that array
    in the kernel is thread-owned with one signature (ad/owned.py): a thread adding into its own element
    while neighbours add into the same element atomically (a stencil's adjoint), or `x[i, 0]` beside
    `x[1, i]`, would otherwise lose updates. A load and reset of the thread's own element (the adjoint of
    `x[t + 1, i] = ...` beside `... = x[t, i]`) is no other thread's."""
    marked = {ins.args[0].id for ins in fn.walk() if ins.op == Op.ATOMIC and ins.attrs.get("exclusive")}
    if not marked:
        return
    owned = consistent_arrays(fn, marked)
    for ins in fn.walk():
        if ins.op == Op.ATOMIC and ins.attrs.get("exclusive") and ins.args[0].id not in owned:
            ins.attrs["exclusive"] = False


def adjoint_function(fwd: Function, consume: bool = False) -> Function:
    """The adjoint of a lowered kernel: forward params + one `adj_<name>` array per float array param.
    `consume`: every overwriting store resets the gradient it read, also where only an earlier launch could
    take it (attrs["consumable"] lists the parameters whose resets the plain adjoint leaves out)."""
    rev = Reverse(derived_kernel(fwd, "adjoint", "adj_", "adj_of"), consume)
    fn = rev.fn
    b = Builder(fn.body)
    rev.replay_region(rev.fwd.body, b, True)
    rev.reverse_region(rev.fwd.body, b)
    simplify(fn)
    _prune_stack(fn)
    _settle_exclusive(fn)
    fn.attrs["uses_stack"] = any(i.op == Op.PUSH for i in fn.walk())
    fn.attrs["consumable"] = [k for k, p in enumerate(rev.fwd.params) if p.value.id in rev.kept]
    return fn
