"""Gradient buffers for intermediates nobody holds: a backward pass's pool (issue 43).

A tape keeps every array it recorded, so a time-stepped program's backward pass would otherwise accumulate
into one gradient buffer per step and zero them all: traffic through memory the size of the whole
trajectory, where JAX carries two buffers. Here an intermediate array that only the tape holds (no
variable, list, view or other tape refers to it, nor to its `.grad`; not `retain_grad()`-ed; not a seed;
written by a recorded launch) gets a buffer from the pool when the first adjoint in reverse order needs
its gradient, and gives it back after the last one (the adjoint of the launch that wrote it first), so
the next intermediate of the same shape and type reuses it while it is still in cache. Two gradients live
at the same time never share a buffer: buffers are assigned by live range, once per plan. A returned
buffer is zeroed only when it is taken again (lazy zeroing), and not at all when the adjoint that takes it
stores every element (runtime/tape/fresh.py). Afterwards the array's gradient is marked
not kept (runtime/arrays/grad_state.py): reading it raises `GradientNotKeptError`, never a reused buffer.

"Held" is counted, not guessed: `sys.getrefcount` of the array and of its gradient, less the references
the tape's own structures hold (found by scanning them). Anything else holding one — a user variable, a
closure, another tape, a cache this module does not know — keeps the array out of the pool.
"""

from __future__ import annotations

import sys
from collections import Counter

from ..arrays import grad_state
from .tape_records import LaunchRecord

POOL_MIN_BYTES = 1 << 16    # per array: smaller gradients are not worth their bookkeeping
POOL_MIN_TOTAL = 1 << 23    # all candidates' gradients together: below 8 MiB they stay in cache anyway
# The counting below is exact on CPython 3.10-3.13 with the GIL (the whole pool tested on 3.11, its counting
# pattern on 3.10-3.13); 3.14's borrowed stack references and free-threaded builds' split reference counts
# make sys.getrefcount approximate: no pool there.
COUNTED = (sys.implementation.name == "cpython" and sys.version_info[:2] < (3, 14)
           and getattr(sys, "_is_gil_enabled", lambda: True)())


class GradPool:
    """The tape's pooled gradient arrays: per (shape, dtype, device) a list of slots, each an array and
    whether it is known to be zero. Kept across passes so the adjoints bound to them stay valid."""

    def __init__(self) -> None:
        self.slots: dict[tuple, list] = {}

    def take_unzeroed(self, key: tuple, slot: int, like) -> tuple:
        """(slot `slot`'s array for `key`, whether it still needs zeroing): the caller zeroes it or has an
        adjoint store every element first (runtime/tape/fresh.py)."""
        from ..arrays.array import array
        slots = self.slots.setdefault(key, [])
        while len(slots) <= slot:
            slots.append([None, True])
        entry = slots[slot]
        g = entry[0]
        if g is None:
            g = entry[0] = array._alloc(like.shape, like.dtype, like.device)
        dirty = not entry[1]
        entry[1] = False
        return g, dirty

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


def _tape_refs(tape) -> Counter:
    """How many references the tape's own structures hold to each object, by id: the records' arguments
    (a Python record's arrays), the adjoints bound to them, the touched and written arrays, the last pass's
    gradients, the pool plan and the arrays it released. Objects alive now have distinct ids, so a count
    by id is a count by identity."""
    ids = []
    seen = set()
    for rec in tape.records:
        args = getattr(rec, "args", None)
        if args is None:                    # a FuncRecord (its callable's closure is not counted: held)
            ids.extend(map(id, rec.arrays))
            ids.extend(map(id, rec.writes))
            continue
        if id(args) not in seen:            # each container once, however many hold it
            seen.add(id(args))
            ids.extend(map(id, args))
        p = rec.prepared
        while p is not None:
            for seq in (p.call_args, p.sources, p.grads):      # a folded adjoint shares sources and grads
                if id(seq) not in seen:
                    seen.add(id(seq))
                    ids.extend(map(id, seq))
            folded = p.folded
            p = folded[1] if folded is not None else None
    ids.extend(map(id, tape._touched.values()))
    cache = tape.__dict__.get("_written_cache")
    if cache is not None:
        ids.extend(map(id, cache[3].values()))
    for a, g, _version in tape._last_pass.values():
        ids.append(id(a))
        ids.append(id(g))
    ids.extend(map(id, tape._released))
    plan = tape.__dict__.get("_gradient_plan")
    if plan is not None:
        ids.extend(map(id, plan.arrays.values()))
        for entries in (*plan.take.values(), *plan.give.values()):
            ids.extend([id(a) for a, _key, _slot in entries])    # each entry's tuple holds its array
    return Counter(ids)


def unheld(tape, arrays: dict) -> list:
    """The candidates nothing but the tape refers to (nor to their gradients), as a list of arrays."""
    refs = _tape_refs(tape)
    out = []
    for k in list(arrays):       # not .items(): its iterator keeps the last (key, value) tuple alive
        a = arrays[k]
        # references here: the `arrays` dict's value, the local `a`, getrefcount's argument
        if sys.getrefcount(a) - 3 != refs[k]:
            continue
        g = a._grad
        # the array's `_grad` slot, the local `g`, getrefcount's argument; an exposed gradient (a NumPy
        # or DLPack view of its memory was handed out) is held through that view
        if g is not None and (g._exposed or g._retain or g._family is not None or id(g) in tape._touched
                              or sys.getrefcount(g) - 3 != refs[id(g)]):
            continue            # (a gradient array the tape recorded as an argument counts as held, one
                                # over memory adopted from NumPy/DLPack/torch too)
        out.append(a)
    return out


def plan_for(tape, seeds: set):
    """This pass's PoolPlan restricted to unheld arrays, or None when nothing is pooled (reusing the
    tape's plan while its records are the same); none while the candidates' gradients add up to less
    than POOL_MIN_TOTAL."""
    if not COUNTED:
        return None
    records = tape.records
    plan = tape.__dict__.get("_gradient_plan")
    if plan is None or not plan.fits(records):
        if any(rec.__class__ is not LaunchRecord for rec in records):
            return None
        plan = tape._gradient_plan = PoolPlan(records, candidates(records, seeds))
    if not plan.arrays or sum(a.nbytes for a in plan.arrays.values()) < POOL_MIN_TOTAL:
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
    POOL_MIN_BYTES (and POOL_MIN_TOTAL together), no views, no NumPy view handed out, and nothing but its
    array and the tape's own structures refers to it, so nobody can read it before its array's `.grad`
    zeroes it."""
    if not COUNTED:
        return set()
    arrays = {}
    for k, a in tape._touched.items():
        if getattr(a, "_gstate", True) is None and a._family is None:
            g = a._grad
            if g is not None and g.nbytes >= POOL_MIN_BYTES and not g._exposed and not g._retain \
                    and g._family is None:
                arrays[k] = a
    if not arrays or sum(a.nbytes for a in arrays.values()) < POOL_MIN_TOTAL:
        return set()
    refs = _tape_refs(tape)
    out = set()
    for k in list(arrays):
        g = arrays[k]._grad
        # references here: the array's `_grad` slot, the local `g`, getrefcount's argument
        if id(g) not in tape._touched and sys.getrefcount(g) - 3 == refs[id(g)]:
            out.add(k)
    return out


def release(arrays) -> None:
    """Mark the gradients given back to the pool as not kept (their buffers now belong to the pool)."""
    for a in arrays:
        a._grad, a._gstate = None, grad_state.DROPPED
