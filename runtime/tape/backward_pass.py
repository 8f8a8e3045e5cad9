"""The tape's reverse walk (split out of tape.py): runs every recorded adjoint in reverse order, with the pooled
gradients of intermediates (grad_pool.py) and the deferred zeroing of fresh gradients (fresh.py)."""

from __future__ import annotations

import functools

from ...core.config import config
from . import snapshots as snapshot
from ..state import current as state, process
from .seeds import Folds
from .tape_records import FuncRecord, LaunchRecord
from .tape_consume import consuming_after
from . import fresh as fresh_mod
from . import grad_pool
from ..arrays.grad_state import DROPPED


def run_adjoints(tape, checked: bool = False, folds: Folds | None = None, seeds: set | None = None) -> None:
    tape._adjoints_running += 1
    try:
        adjoints(tape, checked, folds, seeds)
    finally:
        tape._adjoints_running -= 1


def pool_plan(tape, fast: bool, seeds: set | None):
    """This pass's gradient pool plan (runtime/tape/grad_pool.py), or None where nothing is pooled: only
    `backward` pools (`seeds` given), on the fast path, without snapshots, a debugger capture or a
    restore point (a pass that may raise midway)."""
    if seeds is None or not fast or tape.snapshotting or process.capture is not None or tape._may_raise:
        return None
    return grad_pool.plan_for(tape, seeds)


def adjoints(tape, checked: bool, folds: Folds | None = None, seeds: set | None = None) -> None:
    """Run every recorded adjoint in reverse order, accumulating into the arrays' current `.grad`
    (`checked`: `_check_records` already ran for this pass; `folds`: the gradients seeded with a
    constant, which adjoints reading them take as a number: runtime/tape/seeds.py; `seeds`: the seeded
    arrays' ids, from `backward`, which pools the gradients of intermediates nobody holds)."""
    if not checked:
        tape._check_records()
    tape.backward_records.clear()
    fast = not config.check_nan and state.forward_mode is None   # else every adjoint takes `launch`
    tape._storing.prune(tape.records)    # stale storing forms would hold arrays the pool counts
    plan = pool_plan(tape, fast, seeds)
    if plan is None:
        walk(tape, fast, folds, None)
        return
    pooled = [a for entries in plan.give.values() for a, _key, _slot in entries]
    try:
        walk(tape, fast, folds, plan)
    finally:        # done or not, the pool owns those buffers now: their arrays' gradients are not kept
        grad_pool.release(pooled)
        tape._released = pooled


def walk(tape, fast: bool, folds: Folds | None, plan) -> None:
    """The reverse walk over the records (`plan`: the pooled gradients to hand out and take back)."""
    take = give = None
    if plan is not None:
        take, give = plan.take, plan.give
    # gradients known zero but not written yet, settled at their first record: stored by a gathering
    # adjoint or zeroed right before it (runtime/tape/fresh.py)
    deferred = fast and tape._deferred and not tape.snapshotting
    storing = tape._storing
    fresh: list = []
    records = tape.records
    try:
        walk_records(tape, records, fast, folds, take, give, deferred, storing, fresh)
    except BaseException:
        storing.settle(None, None, fresh)    # no gradient left fresh (unzeroed) by a pass that raised
        raise


def walk_records(tape, records, fast, folds, take, give, deferred, storing, fresh) -> None:
    """`_walk`'s loop (`fresh` holds the gradients not yet settled, for `_walk` if this raises)."""
    from ..launch.adjoint_reuse import adjoint_for
    from ..launch.launch import launch
    shared: dict = {}
    pool = tape._pool
    # the binding the previous record ran: still valid for the next record sharing it, as only Python
    # code (a FuncRecord) can change settings or which array is a .grad in the middle of a pass
    last = None
    for index in range(len(records) - 1, -1, -1):
        rec = records[index]
        if take is not None and index in take:
            for a, key, slot in take[index]:
                g, dirty = pool.take_unzeroed(key, slot, a)
                a._grad, a._gstate = g, None
                fresh.append((g, dirty))
        if deferred and rec.__class__ is LaunchRecord and rec.prepared is not None:
            fresh_mod.deferred_sources(rec.prepared, fresh)
        if fresh and (rec.__class__ is not LaunchRecord or tape.snapshotting):
            storing.settle(None, None, fresh)
        if rec.__class__ is not LaunchRecord and isinstance(rec, FuncRecord):
            with consuming_after(rec.seen_before):
                rec.backward()
            folds = last = None         # Python code may write any gradient (through a view, too)
            continue
        if tape.snapshotting:
            snapshot.around_adjoint(index, rec, functools.partial(launch_adjoint, rec, launch),
                                    tape.backward_records)
            continue
        prepared = rec.prepared
        ready = prepared is not None and (prepared is last or prepared.valid())
        if not ready and fast:
            # records of the same kernel on the same arrays and values share one binding, kept for
            # later tapes too (runtime/launch/adjoint_reuse.py); what it returns is valid now
            ins, outs = rec.adjoint_arguments()
            prepared = rec.prepared = adjoint_for(rec, ins, outs, shared)
            ready = prepared is not None
        if ready:
            last = prepared
            if folds is not None:
                if folds.grads:
                    prepared = folds.fold(prepared, rec.kernel_obj) or prepared
                else:
                    folds = None        # every seeded gradient was written since: nothing folds
            if fresh:
                prepared = storing.settle(prepared, rec.kernel_obj, fresh)
            prepared.run()
            fresh.clear()       # the gradients it stored are written now
            rec.adjoint_variant = prepared.spec.variant.name
        else:       # scratch adjoints or NaN checks: the full launch path
            if fresh:
                storing.settle(None, None, fresh)
            launch_adjoint(rec, launch)
        if give is not None and index in give:
            for a, _key, _slot in give[index]:
                a._grad, a._gstate = None, DROPPED


def launch_adjoint(rec: LaunchRecord, launch) -> None:
    ins, outs = rec.adjoint_arguments()
    adj_ins, adj_outs = rec.adjoint_grads()
    state.adjoint_variant = None
    launch(rec.kernel_obj, rec.dim, ins, outs, device=rec.device, adjoint=True, adj_inputs=adj_ins,
           adj_outputs=adj_outs, record_tape=False, consume=rec.consume)
    if state.adjoint_variant is not None:
        rec.adjoint_variant = state.adjoint_variant.name
