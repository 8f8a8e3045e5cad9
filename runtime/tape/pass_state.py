"""The checks and gradient bookkeeping around a backward pass (split out of tape.py): the seeds, the record
checks before anything is written, the restore point, zeroing the previous pass and the arrays the records write."""

from __future__ import annotations

import numpy as np

from ...core.config import config
from ...core import config as _config_module
from ..state import current as state
from .seeds import check_seed_arguments
from .tape_records import FuncRecord, LaunchRecord
from .tape_consume import mark
from ..arrays.grad_state import DROPPED, GradientNotKeptError, defer_zero, kept_grad, mark_zero
from . import grad_pool
from .version_check import check_unchanged


def _rules_generation() -> int:
    """Bumped when custom rules change what kernels write (core/config.py)."""
    return _config_module.rules_generation


def check_seeds(tape, loss, grads) -> None:
    """The seeds are usable, and there is one (ValueError naming what to pass otherwise)."""
    check_seed_arguments(loss, grads)
    if loss is None and not grads and not has_seed(tape):
        raise ValueError(
            "tape.backward(): nothing to differentiate from: no gradient is set on any array the tape "
            "wrote. Pass loss=<a one-element array> (its gradient becomes 1) or grads={array: gradient}, "
            "or set the outputs' .grad before calling backward().")


def has_seed(tape) -> bool:
    """Whether some array the tape wrote (or a Python record names) holds a nonzero gradient that this
    pass will not clear as the previous pass's."""
    stale = {id(grad) for a, grad, version in tape._last_pass.values() if kept_grad(a) is grad and
             grad.version == version}
    for a in with_python_records(tape, tape._written()).values():
        g = kept_grad(a)
        if g is not None and id(g) not in stale and g.size and np.any(g._read()):
            return True
    return False


def check_records(tape) -> bool:
    """Before anything is written: decide which adjoints consume (runtime/tape/tape_consume.py), build every
    adjoint (a kernel without one raises here) and check that the values they read are unchanged.
    Returns True when a later step may still raise midway (the caller keeps a restore point)."""
    records = tape.records
    if tape._marked < len(records):             # what the new records need is settled once
        if tape._marked == 0 and tape._prior is not None:
            tape._seen = tape._prior.copy()
        kernels = {id(r.kernel_obj): r.kernel_obj for r in records[tape._marked:] if r.kind == "launch"}
        for kernel in kernels.values():
            kernel._require_backward()
            # a value stack may overflow (StackOverflowError); Python code (a recompute, a user's
            # backward function) may raise anything
            tape._may_raise |= bool(kernel.lowered("adjoint").attrs.get("uses_stack"))
        tape._may_raise |= any(r.kind != "launch" for r in records[tape._marked:])
        mark(records, tape._marked, tape._seen)
        tape._marked = len(records)
    aliasing: dict = {}
    laters: dict = {}        # the version check's per-array summaries, for this pass (version_check.py)
    checked: dict = {}       # id(kernel) -> whether its adjoint reads recorded values (else nothing to check)
    for index, rec in enumerate(records):
        if rec.kind == "launch":
            kernel = rec.kernel_obj
            reads = checked.get(id(kernel))
            if reads is None:
                f = kernel.facts()
                reads = checked[id(kernel)] = bool(f.adjoint_reads or f.read_write_pairs or f.lost)
            if reads:
                check_unchanged(tape, index, rec, aliasing, laters)
    return tape._may_raise or bool(config.check_nan or state.forward_mode is not None or tape.snapshotting)


def with_python_records(tape, arrays: dict) -> dict:
    """`arrays` (by id) and the arrays the Python records name (their backward may write gradients)."""
    out = dict(arrays)
    for rec in tape.records:
        if not isinstance(rec, LaunchRecord):
            out.update((id(a), a) for a in rec.arrays if hasattr(a, "buffer"))
    return out


def restore_point(tape, loss, grads):
    """A function putting back every gradient this pass may write (data, and which array is `.grad`)."""
    arrays = with_python_records(tape, tape._touched)
    for a in [loss, *(grads or {})]:
        if a is not None:
            arrays[id(a)] = a
    kept = []
    for a in arrays.values():
        g = a._grad if a._family is None or getattr(a, "_gstate", None) is not None else a.grad
        dual = g.dual if g is not None else None
        kept.append((a, g, getattr(a, "_gstate", None), None if g is None else g._saved_copy(), dual,
                     None if dual is None else dual._saved_copy()))
    last_pass, history = dict(tape._last_pass), len(tape.loss_history)
    released = list(tape._released)

    def restore() -> None:
        for a, g, gstate, data, dual, dual_data in kept:
            a.grad = g
            if gstate is not None:
                a._gstate = gstate       # a gradient not kept (or a known zero) stays so
            for target, saved in ((g, data), (dual, dual_data)):
                if target is not None and target.nbytes:
                    target.device.impl.copy(target.device.info, target.buffer, saved.buffer, target.nbytes)
                    target._bump()
        tape._last_pass, tape._released = last_pass, released
        del tape.loss_history[history:]
    return restore


def zero_previous_pass(tape) -> None:
    """Zero the gradients the previous backward pass of this tape left in intermediates and outputs,
    where nobody changed them since (a changed one is a new seed)."""
    for a, grad, version in tape._last_pass.values():
        if getattr(a, "_gstate", None) is None and a.grad is grad and grad.version == version:
            grad.zero_()
    tape._last_pass = {}
    for a in tape._released:         # gradients a pooled pass did not keep: zero, without writing
        if a._gstate == DROPPED:
            mark_zero(a)
    tape._released = []


def written(tape) -> dict:
    """Arrays the recorded launches and host writes wrote, by id (extended from the previous answer
    while the records before are the same: a time-stepped tape's backward passes walk it once)."""
    records = tape.records
    cached = tape.__dict__.get("_written_cache")
    if cached is not None:
        n, last, generation, written = cached
        if generation == _rules_generation() and len(records) >= n and n and records[n - 1] is last:
            if len(records) > n:
                written = dict(written)
                written.update(written_from(records[n:]))
                tape._written_cache = (len(records), records[-1], generation, written)
            return written
    written = written_from(records)
    if records:
        tape._written_cache = (len(records), records[-1], _rules_generation(), written)
    return written


def written_from(records) -> dict:
    written, per_kernel = {}, {}
    for rec in records:
        if isinstance(rec, FuncRecord):
            written.update((id(a), a) for a in rec.writes)
            continue
        kernel = rec.kernel_obj
        params = per_kernel.get(id(kernel))
        if params is None:
            params = per_kernel[id(kernel)] = kernel.facts().written
        args = rec.args
        for j in params:
            written[id(args[j])] = args[j]
    return written


def zero_gradients(tape) -> None:
    """`Tape.zero`: zero every gradient the tape touched, leaving the large ones only their arrays hold to
    their first read (grad_pool.deferrable, grad_state.defer_zero)."""
    tape._storing.prune(tape.records)    # before counting references (runtime/tape/fresh.py)
    lazy = grad_pool.deferrable(tape)
    if lazy:        # a hint for the backward walk, kept: gradients deferred before may still be
        tape._deferred = True
    for k, a in tape._touched.items():
        if mark_zero(a):                # a gradient not kept becomes a zero unwritten
            continue
        if k in lazy:
            defer_zero(a)
        elif a.grad is not None:
            a.grad.zero_()
    for rec in tape.records:
        if isinstance(rec, FuncRecord):
            for a in rec.arrays:
                if mark_zero(a):
                    continue
                if getattr(a, "grad", None) is not None:
                    a.grad.zero_()


def require_kept(tape, what: str) -> None:
    """GradientNotKeptError when the last backward pass pooled gradients that `what` would show."""
    dropped = [a for a in tape._released if a._gstate == DROPPED]
    if dropped:
        raise GradientNotKeptError(
            f"{what}: the last backward pass did not keep the gradients of {len(dropped)} intermediate "
            "arrays that no variable held (they were computed in reused buffers: runtime/tape/grad_pool.py), "
            "so they cannot be shown. Record with gk.Tape(snapshots=True) (as `gradkit debug` does), or "
            "call retain_grad() on those arrays or keep references to them, and run backward again.")
