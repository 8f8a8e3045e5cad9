"""Backward's "modified after recording" check, as precise as what each adjoint reads.

A recorded launch's adjoint reads some arrays' forward values (`KernelFacts.adjoint_reads`), often only some rows
of them (`x[t - 1, i]`, see ad/accessed_rows.py). When such an array changed since the launch was
recorded, the change is fine if every write since is a later launch on the same tape that wrote other
rows; anything else — a write into a needed row, a host write, a write no tape saw (a launch outside
the tape, `a[i] = v`, a NumPy view) — raises `GradientRuleError` instead of a wrong gradient.
"""

from __future__ import annotations

import weakref

from ...backends.analysis import shares_memory
from ...core.errors import GradientRuleError
from ..state import current as state
from .tape_rules import check_aliasing, check_recoverable


def needed_rows(kernel, args, j: int) -> set[int] | None:
    """Rows of argument j the adjoint of a launch of `kernel` on `args` reads (None: possibly all)."""
    facts = kernel.facts()
    return facts.rows(facts.adjoint_load_rows, j, args, None)


def written_rows(kernel, args, j: int) -> set[int] | None:
    """Rows of argument j a launch of `kernel` on `args` writes (None: possibly all)."""
    facts = kernel.facts()
    return facts.rows(facts.written_rows, j, args, set())


def overlap(a: set[int] | None, b: set[int] | None) -> bool:
    return a is None or b is None or bool(a & b)


def copies_for_backward(kernel, args, pairs) -> dict | None:
    """Copies of the arrays this launch reads (as its adjoint needs them) and itself overwrites, taken before
    it runs (PyTorch's saved tensors): `y[i] *= x[i]`, Taichi's rule-1 programs, `y = x * x` into x. `pairs`
    are the kernel's (read parameter, written parameter) pairs; rows the launch does not write are not
    copied for (x[t, i] = f(x[t - 1, i]) reads and writes different rows of one array)."""
    saved = None
    for j, w in pairs:
        a = args[j]
        if args[w] is a and (saved is None or j not in saved) and \
                overlap(needed_rows(kernel, args, j), written_rows(kernel, args, w)):
            saved = saved or {}
            saved[j] = a._saved_copy()
            fmode = state.forward_mode
            if fmode is not None and a.dual is not None:   # forward-over-reverse: the tangent from before too
                fmode.adopt(saved[j], a.dual._saved_copy())
    return saved


def same_memory(x, a) -> bool:
    """True when argument `x` is array `a` or another array over (part of) its memory."""
    return x is a or (hasattr(x, "buffer") and shares_memory(x, a))


def _describe(rows: set[int] | None) -> str:
    return "all rows" if rows is None else "row" + ("s " if len(rows) > 1 else " ") + \
        ", ".join(map(str, sorted(rows)))


def check_unchanged(tape, index: int, rec, aliasing: dict | None = None, laters: dict | None = None) -> None:
    """Before record `index`'s adjoint runs: the arrays whose recorded values it reads are unchanged, or
    changed only where it does not read (off with gk.Tape(check_versions=False)). Untouched arrays, the
    common case, cost one version compare each. `aliasing`: one backward pass's memo of the argument
    lists already found free of aliasing (by kernel and array identities: valid while the records hold
    the arrays); `laters`: its memo of each array's `_Later` (id -> (array, _Later); the records and
    versions do not change while the pass checks them)."""
    if not tape.check_versions:
        return
    facts = rec.kernel_obj.facts()
    reads, pairs, lost = facts.adjoint_reads, facts.read_write_pairs, facts.lost
    if lost:
        check_recoverable(rec.kernel_obj)
    args, versions = rec.args, rec.versions
    if pairs:
        key = None
        if aliasing is not None:
            key = (id(rec.kernel_obj), *[id(args[k]) for k in rec.kernel_obj._array_args])
        if key is None or key not in aliasing:
            for j, w in pairs:
                if shares_memory(args[j], args[w]):
                    check_aliasing(rec.kernel_obj, args)
            if key is not None:
                aliasing[key] = True
    for j in reads:
        a = args[j]
        if a.version != versions[j] or a._crc is not None or rec.crcs:
            check_record(tape, index, rec, reads, laters)
            return


class _Later:
    """For one array and one tape: the records that touch its memory, in order, and per position whether
    everything after it is a consistent chain of tape launches (no host write, no write the tape did not
    see) and which rows those later launches write. Built once per array and backward (linear), it lets
    `check_record` accept a record without walking every later record (quadratic in time-stepped
    programs, which read and write one array at every step); any doubt falls back to the walk."""

    def __init__(self, tape, a, index: "_Index | None" = None):
        index = index or _Index(tape)
        self.n, self.version = len(tape.records), a.version
        records = tape.records
        recs, poss = index.touching(a)              # record indices, positions of a's memory there
        n = len(recs)
        self.pos, after = dict(zip(recs, range(n))), [None] * n     # version of a after each (None: host)
        for p in range(n):
            later = records[recs[p]]
            if getattr(later, "kind", "") == "launch":
                k = poss[p]
                after[p] = later.versions[k if k.__class__ is int else k[0]]
        self.after = after
        # rows written after position p: every row when p < none_after, else the rows r with last[r] > p
        # (one entry per row, not a set per position: a trajectory's rows would make that quadratic)
        self.ok, self.none_after, self.last = [False] * n, n, {}
        if n == 0 or after[-1] is None:
            return
        ok, none_after, last = not a.modified_since(after[-1]), -1, self.last
        facts_of: dict = {}         # id(kernel) -> its facts, once per kernel (not per record)
        for p in range(n - 1, -1, -1):
            self.ok[p] = ok
            if p == 0 or not ok or none_after >= p:
                break               # no position before p is a clean chain: nothing more to learn
            v, prev = after[p], after[p - 1]
            if v is None or prev is None:
                ok = False
                continue
            later, hit = records[recs[p]], poss[p]
            kernel = later.kernel_obj
            facts = facts_of.get(id(kernel))
            if facts is None:
                facts = facts_of[id(kernel)] = kernel.facts()
            wrote = [w for w in facts.written if (w == hit if hit.__class__ is int else w in hit)]
            ok = ok and v - len(wrote) == prev
            for w in wrote:
                r = facts.rows(facts.written_rows, w, later.args, set()) if later.args[w] is a else None
                if r is None:
                    none_after = max(none_after, p)
                else:
                    for row in r:
                        last.setdefault(row, p)
        self.none_after = none_after

    def fine(self, index: int, recorded: int, needed) -> bool:
        """Record `index` (which recorded version `recorded`) reads rows `needed`, and every later change is
        a tape launch writing other rows."""
        return self.chained(index, recorded) and self.clear(index, needed)

    def chained(self, index: int, recorded: int) -> bool:
        """Everything after record `index` is a consistent chain of tape launches, not all writing every row
        (what `fine` asks before the rows: no rows to work out when it fails)."""
        p = self.pos.get(index)
        return p is not None and self.after[p] == recorded and self.ok[p] and p >= self.none_after

    def clear(self, index: int, needed) -> bool:
        """No launch after record `index` writes a row in `needed` (after `chained` said yes)."""
        if needed is None:
            return False
        p, last = self.pos[index], self.last
        for row in needed:
            if last.get(row, -1) > p:
                return False
        return True


class _Index:
    """For one tape at one length: per buffer, the records that use it (launch arguments, host writes) and
    at which argument positions. Built in one pass over the records, so that each array's `_Later` visits
    only the records touching its memory (a tape of many arrays stays linear, not arrays x records); flat
    lists of ints, not an object per record (a pass over a long tape would otherwise feed the garbage
    collector tens of thousands of containers)."""

    def __init__(self, tape):
        self.n = len(tape.records)
        by_buffer: dict[int, tuple] = {}     # id(buffer) -> (an array over it, [record index], [position(s)])
        for i, rec in enumerate(tape.records):
            if getattr(rec, "kind", "") == "launch":
                xs = rec.args
                # the array parameters' positions: no hasattr on the scalars (each raises and catches inside)
                at = getattr(rec.kernel_obj, "_array_args", None)
                if at is None or len(at) == len(xs):
                    at = range(len(xs))
            else:
                xs = getattr(rec, "writes", ())
                at = range(len(xs))
            for k in at:
                x = xs[k]
                if not hasattr(x, "buffer"):
                    continue
                entry = by_buffer.get(id(x.buffer))
                if entry is None:
                    entry = by_buffer[id(x.buffer)] = (x, [], [])
                recs, poss = entry[1], entry[2]
                if recs and recs[-1] == i:          # the same memory at several positions: a tuple of them
                    last = poss[-1]
                    poss[-1] = (last, k) if last.__class__ is int else last + (k,)
                else:
                    recs.append(i)
                    poss.append(k)
        self.by_buffer = by_buffer

    def touching(self, a) -> tuple[list[int], list]:
        """(record indices, per record the position or tuple of positions of its arguments or host writes
        that are `same_memory` as a), in record order, for every record that has one (shares_memory
        depends on the buffers only)."""
        hits = [(recs, poss) for rep, recs, poss in self.by_buffer.values() if same_memory(rep, a)]
        if len(hits) == 1:
            return hits[0]
        merged: dict[int, tuple] = {}
        for recs, poss in hits:
            for i, k in zip(recs, poss):
                merged[i] = merged.get(i, ()) + ((k,) if k.__class__ is int else k)
        order = sorted(merged)
        return order, [tuple(sorted(merged[i])) for i in order]


_LATER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _later(tape, a) -> _Later:
    # kept on the tape itself (a pass asks thousands of times; a WeakKeyDictionary lookup makes a ref
    # each time), else in _LATER for a tape object that takes no attribute
    cache = getattr(tape, "_later_cache", None)
    if cache is None:
        try:
            cache = _LATER.get(tape)
        except TypeError:                             # a tape that takes no weak reference: no cache
            return _Later(tape, a)
    if cache is None or cache[0].n != len(tape.records):
        cache = (_Index(tape), {})
        try:
            tape._later_cache = cache
        except AttributeError:
            _LATER[tape] = cache
    index, arrays = cache
    got = arrays.get(id(a))
    if got is None or got[0] is not a or got[1].version != a.version:
        got = arrays[id(a)] = (a, _Later(tape, a, index))
    return got[1]


def check_record(tape, index: int, rec, reads: list[int], laters: dict | None = None) -> None:
    """Raise if an array whose recorded values `rec`'s adjoint reads was changed where it matters
    (`laters`: see `check_unchanged`)."""
    for j in reads:
        if rec.saved is not None and j in rec.saved:
            continue                                  # the adjoint reads the copy taken before the launch
        a = rec.args[j]
        recorded = rec.versions[j]
        crc = rec.crcs.get(id(a)) if rec.crcs else None
        if not a.modified_since(recorded, crc):
            continue
        if crc is None:
            if laters is None:
                later = _later(tape, a)
            else:
                got = laters.get(id(a))
                if got is None or got[0] is not a:
                    got = laters[id(a)] = (a, _later(tape, a))
                later = got[1]
            if later.chained(index, recorded):
                facts = rec.kernel_obj.facts()
                if later.clear(index, facts.rows(facts.adjoint_load_rows, j, rec.args, None)):
                    continue                          # only later tape launches wrote it, other rows
        needed = needed_rows(rec.kernel_obj, rec.args, j)
        names = [n for n, _ in rec.kernel_obj.params]
        label = getattr(a, "label", None) or names[j]
        where = f"array '{label}' (parameter '{names[j]}' of kernel '{rec.kernel}')"
        cur = recorded
        for later in tape.records[index + 1:]:
            if getattr(later, "kind", "") != "launch":
                if any(same_memory(w, a) for w in getattr(later, "writes", ())):
                    raise GradientRuleError(
                        f"{where} was overwritten by a host write ({later.name}) after it was recorded; the "
                        f"backward pass of '{rec.kernel}' needs its recorded values ({_describe(needed)}). "
                        "Write the new values into a fresh array instead of overwriting it in place.")
                continue
            if not any(same_memory(x, a) for x in later.args):
                continue
            wrote = [w for w in later.kernel_obj.facts().written if same_memory(later.args[w], a)]
            after = next(v for x, v in zip(later.args, later.versions) if same_memory(x, a))
            if after - len(wrote) != cur:
                break                                         # changed by something the tape did not see
            for w in wrote:
                # rows of another view of the memory are not rows of this one: all of them may be hit
                rows = written_rows(later.kernel_obj, later.args, w) if later.args[w] is a else None
                if overlap(rows, needed):
                    later_names = [n for n, _ in later.kernel_obj.params]
                    raise GradientRuleError(
                        f"{where} was modified after it was recorded on the tape: the later launch of "
                        f"'{later.kernel}' writes {_describe(rows)} (parameter '{later_names[w]}'), and the "
                        f"backward pass of '{rec.kernel}' needs {_describe(needed)} as recorded. Write the new "
                        "values into a fresh array (or another row) instead of overwriting them in place.")
            cur = after
        else:
            if not a.modified_since(cur, crc if cur == recorded else None):
                continue
        raise GradientRuleError(
            f"{where} was modified after it was recorded on the tape, but the backward pass of "
            f"'{rec.kernel}' needs its recorded values ({_describe(needed)}). Write the new values into a "
            "fresh array instead of overwriting it in place (gk.Tape(check_versions=False) turns this "
            "check off, for experts who know the values are unchanged).")
