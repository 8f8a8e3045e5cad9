"""Backward's "modified after recording" check, as precise as what each adjoint reads.

A recorded launch's adjoint reads some arrays' forward values (`KernelFacts.adjoint_reads`), often only some rows
of them (`x[t - 1, i]`, see ad/accessed_rows.py). When such an array changed since the launch was
recorded, the change is fine if every write since is a later launch on the same tape that wrote other
rows; anything else — a write into a needed row, a host write, a write no tape saw (a launch outside
the tape, `a[i] = v`, a NumPy view) — raises `GradientRuleError` instead of a wrong gradient.
"""

from __future__ import annotations

import weakref

from ...ad.accessed_rows import evaluate, leading_rows
from ...backends.analysis import shares_memory
from ...core.errors import GradientRuleError
from ...core.ops import WRITES
from ...core.passes.scalarize import user_params
from ..state import current as state
from .tape_rules import check_aliasing, check_recoverable


def _lowered_params(kernel) -> int:
    return len(user_params(kernel.lowered("forward")))


def needed_rows(kernel, args, j: int) -> set[int] | None:
    """Rows of argument j the adjoint of a launch of `kernel` on `args` reads (None: possibly all)."""
    adj = kernel.lowered("adjoint")
    exprs = leading_rows(adj, ("load",), range(_lowered_params(kernel))).get(j)
    return None if exprs is None else evaluate(exprs, args)


def written_rows(kernel, args, j: int) -> set[int] | None:
    """Rows of argument j a launch of `kernel` on `args` writes (None: possibly all)."""
    exprs = leading_rows(kernel.lowered("forward"), WRITES).get(j)
    return set() if exprs is None else evaluate(exprs, args)


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


def check_unchanged(tape, index: int, rec) -> None:
    """Before record `index`'s adjoint runs: the arrays whose recorded values it reads are unchanged, or
    changed only where it does not read (off with gk.Tape(check_versions=False)). Untouched arrays, the
    common case, cost one version compare each."""
    if not tape.check_versions:
        return
    facts = rec.kernel_obj.facts()
    reads, pairs, lost = facts.adjoint_reads, facts.read_write_pairs, facts.lost
    if lost:
        check_recoverable(rec.kernel_obj)
    args, versions = rec.args, rec.versions
    for j, w in pairs:
        if shares_memory(args[j], args[w]):
            check_aliasing(rec.kernel_obj, args)
    for j in reads:
        a = args[j]
        if a.version != versions[j] or a._crc is not None or rec.crcs:
            check_record(tape, index, rec, reads)
            return


class _Later:
    """For one array and one tape: the records that touch its memory, in order, and per position whether
    everything after it is a consistent chain of tape launches (no host write, no write the tape did not
    see) and which rows those later launches write. Built once per array and backward (linear), it lets
    `check_record` accept a record without walking every later record (quadratic in time-stepped
    programs, which read and write one array at every step); any doubt falls back to the walk."""

    def __init__(self, tape, a):
        self.n, self.version = len(tape.records), a.version
        touch = []                                  # (record index, version of a there or None: host write)
        for i, later in enumerate(tape.records):
            if getattr(later, "kind", "") != "launch":
                if any(same_memory(w, a) for w in getattr(later, "writes", ())):
                    touch.append((i, None, None))
                continue
            hit = [k for k, x in enumerate(later.args) if same_memory(x, a)]
            if hit:
                touch.append((i, later.versions[hit[0]], later))
        self.pos = {i: p for p, (i, _, _) in enumerate(touch)}
        self.after = [v for _, v, _ in touch]
        n = len(touch)
        self.ok, self.rows = [False] * n, [None] * n
        if n == 0 or touch[-1][1] is None:
            return
        ok, rows = not a.modified_since(touch[-1][1]), set()
        for p in range(n - 1, -1, -1):
            self.ok[p], self.rows[p] = ok, rows
            if p == 0:
                break
            v, later = touch[p][1], touch[p][2]
            prev = touch[p - 1][1]
            if v is None or prev is None:
                ok = False
                continue
            wrote = [w for w in later.kernel_obj.facts().written if same_memory(later.args[w], a)]
            ok = ok and v - len(wrote) == prev
            for w in wrote:
                r = written_rows(later.kernel_obj, later.args, w) if later.args[w] is a else None
                rows = None if rows is None or r is None else rows | r

    def fine(self, index: int, recorded: int, needed) -> bool:
        p = self.pos.get(index)
        return p is not None and self.after[p] == recorded and self.ok[p] and not overlap(self.rows[p], needed)


_LATER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _later(tape, a) -> _Later:
    try:
        cache = _LATER.setdefault(tape, {})
    except TypeError:                                 # a tape that takes no weak reference: no cache
        return _Later(tape, a)
    got = cache.get(id(a))
    if got is None or got[0] is not a or got[1].n != len(tape.records) or got[1].version != a.version:
        if got is not None and got[1].n != len(tape.records):
            cache.clear()
        got = cache[id(a)] = (a, _Later(tape, a))
    return got[1]


def check_record(tape, index: int, rec, reads: list[int]) -> None:
    """Raise if an array whose recorded values `rec`'s adjoint reads was changed where it matters."""
    names = [n for n, _ in rec.kernel_obj.params]
    for j in reads:
        if rec.saved is not None and j in rec.saved:
            continue                                  # the adjoint reads the copy taken before the launch
        a = rec.args[j]
        recorded = rec.versions[j]
        crc = rec.crcs.get(id(a)) if rec.crcs else None
        if not a.modified_since(recorded, crc):
            continue
        if crc is None and _later(tape, a).fine(index, recorded, needed_rows(rec.kernel_obj, rec.args, j)):
            continue                                  # only later tape launches wrote it, other rows
        label = getattr(a, "label", None) or names[j]
        needed = needed_rows(rec.kernel_obj, rec.args, j)
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
