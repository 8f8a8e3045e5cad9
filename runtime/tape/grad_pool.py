"""Gradient buffers for intermediates nobody holds: a backward pass's pool (issue 43).

A tape keeps every array it recorded, so a time-stepped program's backward pass would otherwise accumulate
into one gradient buffer per step and zero them all: traffic through memory the size of the whole
trajectory, where JAX carries two buffers. Here an intermediate array that only the tape holds (no
variable, list, view or other tape refers to it, nor to its `.grad`; not `retain_grad()`-ed; not a seed;
written by a recorded launch) gets a buffer from the pool when the first adjoint in reverse order needs
its gradient, and gives it back after the last one (the adjoint of the launch that wrote it first), so
the next intermediate of the same shape and type reuses it while it is still in cache. Two gradients live
at the same time never share a buffer: buffers are assigned by live range, once per plan. A returned
buffer is zeroed only when it is taken again (lazy zeroing). Afterwards the array's gradient is marked
not kept (runtime/arrays/grad_state.py): reading it raises `GradientNotKeptError`, never a reused buffer.

"Held" is counted, not guessed: `sys.getrefcount` of the array and of its gradient, less the references
the tape's own structures hold (found by scanning them). Anything else holding one — a user variable, a
closure, another tape, a cache this module does not know — keeps the array out of the pool.
"""

from __future__ import annotations

import sys

from ..arrays import grad_state
from .tape_records import LaunchRecord

POOL_MIN_BYTES = 1 << 16    # smaller gradients stay in cache anyway: the bookkeeping would cost more


class GradPool:
    """The tape's pooled gradient arrays: per (shape, dtype, device) a list of slots, each an array and
    whether it is known to be zero. Kept across passes so the adjoints bound to them stay valid."""

    def __init__(self) -> None:
        self.slots: dict[tuple, list] = {}

    def take(self, key: tuple, slot: int, like):
        """Slot `slot`'s array for `key`, zeroed (made on first use: zero-filled already)."""
        from ..arrays.array import array
        slots = self.slots.setdefault(key, [])
        while len(slots) <= slot:
            slots.append([None, True])
        entry = slots[slot]           # [array, known to be zero]
        g = entry[0]
        if g is None:
            g = entry[0] = array._alloc(like.shape, like.dtype, like.device)
        elif not entry[1]:
            if g._host is not None:
                g._host.fill(0)
            elif g.nbytes:
                g.device.impl.fill_zero(g.device.info, g.buffer, g.nbytes)
            g._bump()
        entry[1] = False          # an adjoint writes it from now on
        return g

    def clear(self) -> None:
        self.slots.clear()


class PoolPlan:
    """Which pooled gradients the backward pass gives out before record i (`take[i]`: (array, key, slot))
    and takes back after it (`give[i]`: arrays), for the candidates of one set of records."""

    __slots__ = ("n", "last", "arrays", "take", "give")

    def __init__(self, records, arrays: dict) -> None:
        self.n, self.last = len(records), records[-1] if records else None
        self.arrays = arrays          # id -> array: the candidates (held or not, checked each pass)
        self.take: dict[int, list] = {}
        self.give: dict[int, list] = {}
        if not arrays:
            return
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, rec in enumerate(records):
            for x in rec.args:
                k = id(x)
                if k in arrays:
                    first.setdefault(k, i)
                    last[k] = i
        free: dict[tuple, list[int]] = {}
        count: dict[tuple, int] = {}
        order = sorted(arrays, key=lambda k: -last[k])
        starts: dict[int, list] = {}
        for k in order:
            starts.setdefault(last[k], []).append(k)
        for i in range(len(records) - 1, -1, -1):
            for k in starts.get(i, ()):
                a = arrays[k]
                key = (a.shape, a.dtype, a.device)
                pool = free.setdefault(key, [])
                if pool:
                    slot = pool.pop()
                else:
                    slot = count[key] = count.get(key, 0) + 1
                    slot -= 1
                self.take.setdefault(i, []).append((a, key, slot))
                self.give.setdefault(first[k], []).append((a, key, slot))
            for a, key, slot in self.give.get(i, ()):
                free[key].append(slot)

    def fits(self, records) -> bool:
        return self.n == len(records) and (not records or records[-1] is self.last)


def candidates(records, seeds: set) -> dict:
    """Arrays recorded launches write that could be pooled, by id: float arrays of at least POOL_MIN_BYTES
    without views, with a gradient (or one marked not kept / zero), not seeds, not retain_grad()-ed."""
    out: dict[int, object] = {}
    writes: dict[int, tuple] = {}
    for rec in records:
        kernel = rec.kernel_obj
        params = writes.get(id(kernel))
        if params is None:
            params = writes[id(kernel)] = kernel.facts().written
        args = rec.args
        for j in params:
            a = args[j]
            if a.nbytes >= POOL_MIN_BYTES and id(a) not in seeds and not a._retain and a._family is None \
                    and (a._gstate is not None or a._grad is not None):
                out[id(a)] = a
    return out


def _tape_refs(tape, arrays: dict) -> tuple[dict, dict]:
    """How many references the tape's own structures hold to each candidate array and to its gradient."""
    refs = dict.fromkeys(arrays, 0)
    grads = {id(a._grad): 0 for a in arrays.values() if a._grad is not None}
    lists = {}
    for rec in tape.records:
        for x in rec.args:
            k = id(x)
            if k in refs and x is arrays[k]:
                refs[k] += 1
        p = rec.prepared
        while p is not None:
            lists[id(p.call_args)] = p.call_args
            lists[id(p.sources)] = p.sources
            lists[id(p.grads)] = p.grads
            folded = p.folded
            p = folded[1] if folded is not None else None
    for seq in lists.values():
        for x in seq:
            k = id(x)
            if k in refs and x is arrays[k]:
                refs[k] += 1
            elif k in grads:
                grads[k] += 1
    for k, a in arrays.items():
        if tape._touched.get(k) is a:
            refs[k] += 1
    cache = tape.__dict__.get("_written_cache")
    if cache is not None:
        for k, a in arrays.items():
            if cache[3].get(k) is a:
                refs[k] += 1
    plan = tape.__dict__.get("_gradient_plan")
    held = [tape._released]
    if plan is not None:
        held.append(list(plan.arrays.values()))
        for entries in (*plan.take.values(), *plan.give.values()):
            held.append([a for a, _key, _slot in entries])     # each entry's tuple holds its array
    for seq in held:
        for x in seq:
            k = id(x)
            if k in refs and x is arrays[k]:
                refs[k] += 1
    for k, (a, g, _version) in tape._last_pass.items():
        if k in refs and a is arrays[k]:
            refs[k] += 1
        if g is not None and id(g) in grads and g is a._grad:
            grads[id(g)] += 1
    return refs, grads


def unheld(tape, arrays: dict) -> list:
    """The candidates nothing but the tape refers to (nor to their gradients), as a list of arrays."""
    refs, grads = _tape_refs(tape, arrays)
    out = []
    for k in list(arrays):       # not .items(): its iterator keeps the last (key, value) tuple alive
        a = arrays[k]
        # references here: the `arrays` dict's value, the local `a`, getrefcount's argument
        if sys.getrefcount(a) - 3 != refs[k]:
            continue
        g = a._grad
        # the array's `_grad` slot, the local `g`, getrefcount's argument; an exposed gradient (a NumPy
        # or DLPack view of its memory was handed out) is held through that view
        if g is not None and (g._exposed or g._family is not None or sys.getrefcount(g) - 3 != grads[id(g)]):
            continue
        out.append(a)
    return out


def plan_for(tape, seeds: set):
    """This pass's PoolPlan restricted to unheld arrays, or None when nothing is pooled (reusing the
    tape's plan while its records are the same)."""
    records = tape.records
    plan = tape.__dict__.get("_gradient_plan")
    if plan is None or not plan.fits(records):
        if any(rec.__class__ is not LaunchRecord for rec in records):
            return None
        plan = tape._gradient_plan = PoolPlan(records, candidates(records, seeds))
    if not plan.arrays:
        return None
    arrays = {k: a for k, a in plan.arrays.items() if k not in seeds and not a._retain}
    free = unheld(tape, arrays)
    if not free:
        return None
    if len(free) != len(plan.arrays):
        keep = {id(a) for a in free}
        plan = PoolPlan(records, {k: a for k, a in plan.arrays.items() if k in keep})
    return plan


def deferrable(tape) -> set:
    """Ids of the touched arrays whose gradient `tape.zero()` may zero lazily (grad_state.defer_zero): at least
    POOL_MIN_BYTES, no views, no NumPy view handed out, and nothing but its array and the tape's own
    structures refers to it, so nobody can read it before its array's `.grad` zeroes it."""
    arrays = {}
    for k, a in tape._touched.items():
        if getattr(a, "_gstate", True) is None and a._family is None:
            g = a._grad
            if g is not None and g.nbytes >= POOL_MIN_BYTES and not g._exposed and g._family is None:
                arrays[k] = a
    if not arrays:
        return set()
    _refs, grads = _tape_refs(tape, arrays)
    out = set()
    for k in list(arrays):
        g = arrays[k]._grad
        # references here: the array's `_grad` slot, the local `g`, getrefcount's argument
        if sys.getrefcount(g) - 3 == grads[id(g)]:
            out.add(k)
    return out


def release(arrays) -> None:
    """Mark the gradients given back to the pool as not kept (their buffers now belong to the pool)."""
    for a in arrays:
        a._grad, a._gstate = None, grad_state.DROPPED
