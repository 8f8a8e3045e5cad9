"""The tape's one rule for arrays that several launches write: an overwriting store consumes the gradient
of what it overwrote; `+=` and atomic adds pass it through.

Reverse mode already resets the gradient after every overwriting store but one kind: a kernel that writes
an array once per thread at its own index and never reads it leaves the gradient in place (ad/reverse.py),
so that an array written once keeps the gradient that reached it (Taichi's behaviour, Warp's
`retain_grad`) and the adjoint saves a store per element. That shortcut is right for the whole tape only
when nothing earlier on the tape — a launch that read or wrote it, a host write, a checkpoint block — used
that memory: then no earlier adjoint reads the gradient it leaves. This module decides, per recorded launch,
whether the shortcut holds; where it does not, the tape runs the consuming adjoint (ad/consume.py).
Memory is compared, not array objects: views (`reshape`, `flatten`, `view`) and arrays adopted from
overlapping host memory count as one array.
"""

from __future__ import annotations

import contextlib

from ...backends.analysis import shares_memory


class MemorySeen:
    """The memory a tape's records used so far: buffers by identity, host buffers also by address range."""

    __slots__ = ("buffers", "ranges")

    def __init__(self) -> None:
        self.buffers: dict[int, object] = {}      # id(buffer) -> buffer (kept alive: ids stay unique)
        self.ranges: list[tuple[int, int]] = []   # [start, end) of host buffers with an address

    def add(self, a) -> None:
        buf = a.buffer
        if id(buf) in self.buffers:
            return
        self.buffers[id(buf)] = buf
        ptr = getattr(buf, "ptr", None)
        if type(ptr) is int and a.nbytes:
            self.ranges.append((ptr, ptr + buf.nbytes))

    def touches(self, a) -> bool:
        buf = a.buffer
        if id(buf) in self.buffers:
            return True
        ptr = getattr(buf, "ptr", None)
        if type(ptr) is int and a.nbytes:
            end = ptr + buf.nbytes
            return any(s < end and ptr < e for s, e in self.ranges)
        return False

    def copy(self) -> "MemorySeen":
        out = MemorySeen()
        out.buffers, out.ranges = dict(self.buffers), list(self.ranges)
        return out


def _arrays(values) -> list:
    return [v for v in values if hasattr(v, "buffer")]


def record_arrays(rec) -> list:
    """The arrays a record uses (a launch's array arguments; a Python record's arrays and writes)."""
    if rec.kind == "launch":
        return [rec.args[j] for j in rec.kernel_obj._array_args]
    return _arrays([*rec.arrays, *getattr(rec, "writes", ())])


def consumable(kernel) -> tuple:
    """The kernel's parameters whose overwriting stores leave the gradient in place (none without an adjoint)."""
    try:
        return kernel.consumable()
    except Exception:             # no adjoint (enable_backward=False, native code without one): backward says so
        return ()


def must_consume(rec, seen: MemorySeen) -> bool:
    """True when launch record `rec`'s adjoint must reset what its one-per-thread stores overwrote: earlier
    records used that memory, or another argument of the same launch shares it."""
    params = consumable(rec.kernel_obj)
    if not params:
        return False
    args, arrays = rec.args, rec.kernel_obj._array_args
    for w in params:
        a = args[w]
        if seen.touches(a) or any(j != w and shares_memory(a, args[j]) for j in arrays):
            return True
    return False


def mark(records, start: int, seen: MemorySeen) -> None:
    """Set `consume` on the launch records from `start` on, adding what each uses to `seen` after it; a
    Python record (a @gk.grad_for function, a checkpoint) keeps what was used before it (`seen_before`)."""
    for rec in records[start:]:
        if rec.kind == "launch":
            rec.consume = must_consume(rec, seen)
        elif rec.kind == "func":
            rec.seen_before = seen.copy()
        for a in record_arrays(rec):
            seen.add(a)


def consumes_in_context(kernel, bound) -> bool:
    """For an adjoint launch made by a Python record during a backward pass (`kernel.grad()` in a
    @gk.grad_for function): whether it overwrites memory the tape used before that record."""
    from ..state import current
    seen = current.consume_seen
    if seen is None:
        return False
    return any(seen.touches(bound[w]) for w in consumable(kernel))


@contextlib.contextmanager
def consuming_after(seen: MemorySeen | None):
    """Run a Python record's backward with `seen` as the memory used before it (see consumes_in_context)."""
    from ..state import current
    old, current.consume_seen = current.consume_seen, seen
    try:
        yield
    finally:
        current.consume_seen = old


def memory_before(records, index: int, prior: MemorySeen | None = None) -> MemorySeen:
    """The memory used by `records[:index]` (and by `prior`, what came before those records)."""
    seen = prior.copy() if prior is not None else MemorySeen()
    for rec in records[:index]:
        for a in record_arrays(rec):
            seen.add(a)
    return seen
