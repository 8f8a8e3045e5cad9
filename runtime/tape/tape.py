"""`gk.Tape`: records launches and runs their adjoints in reverse (Warp's Tape, Taichi's `Tape(loss)`)."""

from __future__ import annotations

import contextlib

from ...core.config import config
from ...ad.variants import FORWARD
from . import snapshots as snapshot
from ..call_site import name_arrays, user_site
from ..state import current as state, process
from ..tools.grad_check import GradCheck
from .hazards import find_hazards, warn_hazards
from .seeds import Folds, constant_value
from .tape_records import FuncRecord, LaunchRecord
from .tape_consume import MemorySeen, memory_before
from .tape_rules import check_launch
from . import fresh as fresh_mod
from . import grad_pool
from . import gc_relax
from . import backward_pass, pass_state
from ..arrays.grad_state import DROPPED, kept_grad, mark_zero
from .version_check import copies_for_backward


class Tape:
    """Records launches inside `with tape:`; `backward()` runs their adjoints in reverse order.

    Args:
        loss: Taichi style: a one-element array that entering the `with` block zeroes (with its `.grad`),
            and whose `backward(loss=loss)` leaving the block runs. None (Warp style): call `backward` yourself.
        clear_gradients: with `loss`, also zero on entry every gradient the tape touches.
        check: run the gradient rule checks (Taichi's global data access rules, Warp's overwrite hazard) on
            this tape's launches and raise `gk.GradientRuleError` before a launch that breaks them; None
            follows `gk.config.check_ad`.
        snapshots: keep a copy of every array each launch touched, for debug bundles (`save`); None follows
            `gk.config.snapshot_launches`.
        check_versions: at `backward`, raise when an array an adjoint reads was modified after it was
            recorded (False: you vouch that recorded inputs are unchanged).
        validation: Taichi's spelling of `check`.
        grad_check: Taichi's: arrays whose gradients `backward` (with `loss`) compares with central
            differences afterwards.
        params: the arrays being trained, which the debugger leads with (else it infers them: arrays with
            `requires_grad` that no recorded launch writes).

    Gradients of intermediates (runtime/tape/grad_pool.py): during `backward`, an array that recorded launches
    write, of at least 64 KiB (where such arrays add up to 8 MiB or more), that nothing but the tape refers
    to (no variable, container, closure, view or other tape holds it or its `.grad`, and no NumPy view or
    adopted tensor shares its gradient's memory), that is not a seed (`loss=`, `grads=`) and not
    `a.retain_grad()`-ed, has its gradient computed in a pooled buffer reused by the next such array of its
    shape and type, and not kept: reading its `.grad` afterwards (after finding it through `tape.launches`,
    say) raises `GradientNotKeptError`. Arrays you hold keep their gradients as before. Nothing is pooled
    while the tape snapshots, under `gradkit debug`, with NaN checks, in forward mode, or when the tape holds
    Python records (`record_func`, host writes, checkpoints) or kernels whose adjoints may raise midway, nor
    where reference counts are not exact (grad_pool.COUNTED: CPython 3.10-3.13 with the GIL).
    `zero()` leaves such a large gradient that only its array refers to for its first read to zero."""

    def __init__(self, loss=None, clear_gradients: bool = True, check: bool | None = None,
                 snapshots: bool | None = None, check_versions: bool = True, validation: bool | None = None,
                 grad_check=None, params=None):
        """Taichi's spellings: `validation=True` is `check=True`; `grad_check=[x, ...]` (with `loss`)
        compares each array's gradient with central differences after the backward pass (runtime/tools/grad_check.py).
        `params`: the arrays being trained, which the debugger leads with (else it infers them: arrays with
        requires_grad that no recorded launch writes)."""
        self.loss, self.clear_gradients = loss, clear_gradients
        self.params = list(params) if params is not None else []
        self.check = check if validation is None else bool(validation)
        self.grad_check = None
        if grad_check:
            if loss is None:
                raise ValueError("grad_check needs the tape's loss: gk.Tape(loss=l, grad_check=[x])")
            self.grad_check = GradCheck(grad_check)
        self.check_versions = bool(check_versions)   # False: experts vouch that recorded inputs are unchanged
        self._last_pass: dict[int, tuple] = {}       # id -> (array, grad, grad version) after the last backward
        self.snapshotting = config.snapshot_launches if snapshots is None else bool(snapshots)
        self.records: list = []
        self.backward_records: list = []      # BackwardRecord per adjoint launch, when snapshotting
        self.loss_history: list[float] = []   # loss value at each backward(loss=...)
        self._scopes: list[str] = []
        self._touched: dict[int, object] = {}
        self.scope_events: list[tuple] = []   # (record index, "begin"/"end", name) for viz
        self._prior: MemorySeen | None = None  # memory used before this tape's records (a checkpoint's block)
        self._seen = MemorySeen()             # memory used by records[:_marked] (runtime/tape/tape_consume.py)
        self._marked = 0
        self._may_raise = False               # records[:_marked] hold something that may raise midway
        self._adjoints_running = 0            # _run_adjoints in progress (reset() refuses meanwhile)
        self._pool = grad_pool.GradPool()     # gradient buffers of intermediates nobody holds (grad_pool.py)
        self._released: list = []            # arrays whose gradient the last pass did not keep
        self._deferred = False                # zero() has left gradients to zero lazily (runtime/tape/fresh.py)
        self._storing = fresh_mod.Storing()   # storing forms of the bound adjoints (runtime/tape/fresh.py)
        self._relaxed = False                 # this tape raised the collector's threshold (gc_relax.py)

    # Recording -----------------------------------------------------------------
    def __enter__(self) -> "Tape":
        if state.tape is not None:
            raise RuntimeError("a gk.Tape is already recording: tapes do not nest (as in Warp); record on the "
                               "outer tape, or use gk.checkpoint / tape.record_func for nested work")
        if self.loss is not None:
            self.loss.zero_()
            if self.loss.grad is not None:
                self.loss.grad.zero_()
        state.tape = self
        if not self._relaxed:
            gc_relax.start()          # rarer collector passes while recording (runtime/tape/gc_relax.py)
            self._relaxed = True
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        state.tape = None
        try:
            if exc_type is None and self.loss is not None:
                self.backward(loss=self.loss)
                if self.grad_check is not None:
                    self.grad_check.run(self, self.loss)
        finally:
            if self._relaxed:
                self._relaxed = False
                gc_relax.stop()

    def _touch(self, a) -> None:
        if id(a) not in self._touched:
            self._touched[id(a)] = a
            if self.loss is not None and self.clear_gradients and a is not self.loss and not mark_zero(a) \
                    and a.grad is not None:
                a.grad.zero_()

    def _checking(self) -> bool:
        return config.check_ad if self.check is None else bool(self.check)

    def before_launch(self, kernel, bound) -> tuple:
        """The recording hook `gk.launch` calls before a launch it will record: checks the gradient rules (with
        checks on; nothing is overwritten when they fail), copies the arrays the backward pass needs from
        before the launch and snapshots the arguments (when snapshotting). Returns what `record_launch` needs:
        the snapshots, the copies and the parameters whose recorded values the adjoint reads; or, when there
        is nothing to copy, check or snapshot (the common case: no tuple to build), the kernel's facts."""
        facts = kernel.facts()
        if not (facts.copies or self.snapshotting or self.grad_check is not None or
                (config.check_ad if self.check is None else self.check)):
            return facts
        if config.check_ad if self.check is None else self.check:
            check_launch(self.launches, kernel, bound)
        if self.grad_check is not None:
            self.grad_check.before_launch(bound)
        saved = copies_for_backward(kernel, bound, facts.copies) if facts.copies else None
        snaps = snapshot.before_launch(kernel, bound) if self.snapshotting else None
        return snaps, saved, facts.adjoint_reads

    def record_launch(self, kernel, dims, device, bound, n_inputs, variant, ms, prepared) -> None:
        """The recording hook `gk.launch` calls after the launch: one LaunchRecord (`prepared` is what
        `before_launch` returned)."""
        if prepared.__class__ is not tuple:          # before_launch had nothing to copy, check or snapshot
            if variant is FORWARD and not self._scopes and process.capture is None and kernel.rules_warned:
                # The common case (W5, every step of a time-stepped program after the first): arrays this tape
                # recorded before (touched, `_held` set), none whose recorded values the adjoint reads with a
                # NumPy view out (a view of any other, e.g. an output printed once, changes nothing here):
                # only their versions to read.
                touched = self._touched
                arrays = kernel._array_args
                known, exposed = True, False
                if len(arrays) == len(bound):               # arrays only
                    versions = []
                    for a in bound:
                        if not a._held or id(a) not in touched:
                            known = False
                            break
                        if a._exposed:
                            exposed = True
                        versions.append(a.version)
                else:
                    versions = [None] * len(bound)          # scalars (every other parameter) have none
                    for j in arrays:
                        a = bound[j]
                        if not a._held or id(a) not in touched:
                            known = False
                            break
                        if a._exposed:
                            exposed = True
                        versions[j] = a.version
                if known:
                    if exposed:                             # is one of them read by the adjoint?
                        for j in prepared.adjoint_reads:
                            if bound[j]._exposed:
                                break
                        else:
                            exposed = False
                    if not exposed:
                        self.records.append(LaunchRecord(kernel.key, dims, device.name, bound, n_inputs, (), ms,
                                                         kernel, tuple(versions)))
                        return
            prepared = (None, None, prepared.adjoint_reads)
        snaps, saved, reads = prepared
        touched = self._touched
        exposed = fresh = False
        arrays = kernel._array_args              # the array parameters' positions (the rest are scalars)
        if len(arrays) == len(bound):            # arrays only: their versions in the same walk
            versions = []
            for a in bound:
                a._held = True
                exposed |= a._exposed
                if id(a) not in touched:
                    self._touch(a)
                    fresh = True
                versions.append(a.version)
            if fresh:           # a first touch zeroes gradients, which may be arguments too: versions after it
                versions = [a.version for a in bound]
            versions = tuple(versions)
        else:
            for j in arrays:
                a = bound[j]
                a._held = True
                exposed |= a._exposed
                if id(a) not in touched:
                    self._touch(a)      # zeroes gradients, which may be arguments too: versions after this
            versions = tuple([a.version if hasattr(a, "buffer") else None for a in bound])   # scalars have none
        crcs = None
        if exposed:       # a NumPy view of an input is out: checksum the values recorded now, not at handout
            crcs = {}
            moved = False
            for j in reads:
                a = bound[j]
                if a._exposed:
                    held = a._crc
                    crcs[id(a)] = crc = a._fingerprint(now=True)
                    if held is not None and held[0] == a.version and held[1] != crc:
                        # written through the view since it was handed out at this version: a write, so
                        # earlier records whose adjoints read it see a new version (this checksum would hide it)
                        a._bump()
                        a._crc = (a.version, crc)
                        moved = True
            if moved:
                versions = tuple([a.version if hasattr(a, "buffer") else None for a in bound])
        if snaps is not None:
            snapshot.after_launch(snaps, kernel, bound)
        if not kernel.rules_warned:
            kernel.warn_rules()
        # the fields every record has, by position (keywords cost ~0.3 µs a record here, W5 taped); fields
        # that keep their default in the common case are set only when they do not
        rec = LaunchRecord(kernel.key, dims, device.name, bound, n_inputs, (), ms, kernel, versions)
        if self._scopes:
            rec.scope = tuple(self._scopes)
        if variant is not FORWARD:
            rec.variant = variant.name
        if snaps is not None:
            rec.snapshots, rec.site = snaps, user_site(2)
        if saved is not None:
            rec.saved = saved
        if crcs is not None:
            rec.crcs = crcs
        self.records.append(rec)
        if process.capture is not None:
            name_arrays([bound[j] for j in arrays], 2)          # the debugger names arrays as the user does
            process.capture.recorded(self)

    def record_func(self, backward, arrays) -> None:
        """Record `backward()` to run at this point of the backward pass; `arrays` are zeroed by `zero()`.

        Args:
            backward: a callable with no arguments that propagates gradients by hand (adjoint launches,
                host arithmetic on `.grad` arrays).
            arrays: the arrays it reads or writes gradients of, so the tape's `zero()` and `reset()` clear them."""
        arrays = list(arrays)
        for a in arrays:
            self._touch(a)
        self.records.append(FuncRecord(backward, arrays, tuple(self._scopes)))

    def record_host_write(self, name: str, backward, dst, src=None, whole: bool = True) -> None:
        """Record a host-side write into `dst` (`assign`, `copy`, `fill_`, ...; see runtime/arrays/host_ops.py);
        `whole`: it overwrites all of dst."""
        arrays = [dst] if src is None else [dst, src]
        for a in arrays:
            self._touch(a)
        self.records.append(FuncRecord(backward, arrays, tuple(self._scopes), "host", name, [dst],
                                       user_site(2), whole))

    def record_scope_begin(self, name: str) -> None:
        """Open a named group of the launches recorded next (closed by `record_scope_end`); the debugger
        and `visualize` draw it as a cluster.

        Args:
            name: the scope's label; scopes nest."""
        self._scopes.append(str(name))
        self.scope_events.append((len(self.records), "begin", str(name)))

    def record_scope_end(self) -> None:
        """Close the scope the last `record_scope_begin` opened (RuntimeError when none is open)."""
        if not self._scopes:
            raise RuntimeError("record_scope_end() without a matching record_scope_begin()")
        name = self._scopes.pop()
        self.scope_events.append((len(self.records), "end", name))

    @contextlib.contextmanager
    def scope(self, name: str):
        """`with tape.scope(name):` groups the launches recorded inside (`record_scope_begin` / `record_scope_end`).

        Args:
            name: the scope's label; scopes nest."""
        self.record_scope_begin(name)
        try:
            yield self
        finally:
            self.record_scope_end()

    # Backward ------------------------------------------------------------------
    def backward(self, loss=None, grads: dict | None = None) -> None:
        """Run every recorded adjoint in reverse, from the gradients set on the outputs (Warp's semantics).

        `loss=l` sets `l.grad = 1`; `grads={y: g}` sets `y.grad = g` (an array without `requires_grad` gets a
        `.grad` first, as in Warp); with neither, the gradients already on the outputs are the seeds
        (written by the user or by adjoint launches, e.g. a later checkpoint segment), and a tape with no
        gradient set anywhere raises instead of giving zeros. Gradients accumulate (`+=`); `zero()` clears
        them. Running `backward` on the same tape again first zeroes the intermediate gradients its previous
        pass left (unless changed since), so every pass is fresh while inputs keep accumulating.

        A backward pass that raises leaves every gradient as it was before the call: what can be checked
        (seeds, recorded values changed since, adjoints that cannot be built) is checked before anything is
        written, and gradients are copied first when a later step may still raise (NaN checks, Python
        records, checkpoint recomputes, value stacks, forward-over-reverse, snapshots).

        Args:
            loss: a one-element float array with `requires_grad=True`; its gradient is seeded with 1.
            grads: {output array: seed gradient} (arrays, NumPy arrays or lists of the output's shape):
                rows of a Jacobian, or the incoming gradient of an outer framework."""
        self._check_seeds(loss, grads)
        risky = self._check_records()
        if self._checking():
            warn_hazards(self)
        restore = self._restore_point(loss, grads) if risky else None
        try:
            self._backward(loss, grads)
        except BaseException:
            if restore is not None:
                if process.capture is not None:
                    process.capture.backward_stopped(self)     # the debugger shows where the pass stopped
                restore()
            raise

    def _backward(self, loss, grads) -> None:
        self._zero_previous_pass()
        seeds = set()
        folds = Folds()
        if loss is not None:
            folds.set(loss.grad, 1.0)
            seeds.add(id(loss))
        for arr, seed in (grads or {}).items():
            if arr.grad is None:
                from ..arrays.creation import zeros_like
                arr.grad = zeros_like(arr, requires_grad=False)
            if seed is not arr.grad:
                value = constant_value(seed) if arr.dtype.is_scalar and arr.dtype.is_float else None
                if value is not None:     # a constant: the adjoints reading it fold it (runtime/tape/seeds.py)
                    folds.set(arr.grad, value)
                else:
                    arr.grad.assign(seed)
            seeds.add(id(arr))
        if loss is not None:
            self.loss_history.append(float(loss._read().reshape(-1)[0]))
        if process.capture is not None:
            process.capture.recorded(self)
            if loss is not None:
                process.capture.backward_started(self.loss_history[-1])
        self._run_adjoints(checked=True, folds=folds if folds.grads else None, seeds=seeds)
        self._last_pass = {k: (a, g, g.version) for k, a in self._written().items()
                           if k not in seeds and (g := kept_grad(a)) is not None}
        if process.capture is not None:
            process.capture.backward_finished(self)

    # the checks and bookkeeping around a pass (runtime/tape/pass_state.py), the walk (runtime/tape/backward_pass.py)
    def _check_seeds(self, loss, grads) -> None:
        pass_state.check_seeds(self, loss, grads)

    def _check_records(self) -> bool:
        return pass_state.check_records(self)

    def _restore_point(self, loss, grads):
        return pass_state.restore_point(self, loss, grads)

    def _zero_previous_pass(self) -> None:
        pass_state.zero_previous_pass(self)

    def _written(self) -> dict:
        return pass_state.written(self)

    def _run_adjoints(self, checked: bool = False, folds: Folds | None = None, seeds: set | None = None) -> None:
        backward_pass.run_adjoints(self, checked, folds, seeds)

    # Housekeeping --------------------------------------------------------------
    def zero(self) -> None:
        """Zero the gradients of every array the tape touched (the record is kept). A large gradient that only
        its array refers to is zeroed when next read (by the backward pass: right before the adjoint that
        first accumulates into it, while it is in cache; runtime/arrays/grad_state.py)."""
        pass_state.zero_gradients(self)

    def reset(self) -> None:
        """Forget every record and zero the gradients (not while the backward pass runs: RuntimeError)."""
        if self._adjoints_running:
            raise RuntimeError("the tape cannot be reset while its backward pass runs (a record_func callback "
                               "called tape.reset()); reset it after backward() returns")
        self.zero()
        self.records.clear()
        self._storing.cache.clear()
        self.__dict__.pop("_later_cache", None)        # runtime/tape/version_check.py's index of the records
        self.__dict__.pop("_written_cache", None)
        self._last_pass, self._released = {}, []
        self.__dict__.pop("_gradient_plan", None)
        self.backward_records.clear()
        self._touched.clear()
        self._seen, self._marked, self._may_raise = MemorySeen(), 0, False
        self.scope_events.clear()
        self._scopes.clear()

    def hazards(self) -> list:
        """Steps whose gradient is zero by construction (runtime/tape/hazards.py): a write overwritten before
        anything read it, a parameter used only through int(), comparisons or stop_gradient."""
        return find_hazards(self)

    def memory_before(self, index: int) -> MemorySeen:
        """The memory records[:index] used (what a checkpoint block's recompute must not hand gradient to)."""
        return memory_before(self.records, index, self._prior)

    @property
    def gradients(self) -> dict:
        # a gradient the last pass did not keep is left out (reading it raises GradientNotKeptError)
        return {a: a.grad for a in self._touched.values() if getattr(a, "_gstate", None) != DROPPED
                and a.grad is not None}

    @property
    def launches(self) -> list[LaunchRecord]:
        return [r for r in self.records if isinstance(r, LaunchRecord)]

    def visualize(self, filename=None, array_labels=None, graph_direction: str = "LR",
                  hide_readonly_arrays: bool = False, show_gradients: bool = False,
                  simplify_graph: bool | None = None) -> str:
        """GraphViz dot source of the recorded launches (viz/tape_graph.py), as a str that Jupyter draws
        inline.

        Args:
            filename: also write it there: `.dot`/`.gv` as text, `.svg`/`.png`/`.pdf` rendered by GraphViz's
                `dot` (the `graphviz` package).
            array_labels: {array: name} for arrays without a `label` (default names come from the launches'
                parameter names).
            graph_direction: GraphViz's rankdir: "LR" (left to right) or "TB" (top to bottom).
            hide_readonly_arrays: leave out arrays no launch writes (constants, data).
            show_gradients: label each array with the magnitude of its gradient.
            simplify_graph: draw launches repeated back to back once, with their count (default: on past 50
                launches, where the full graph stops being readable or quick to lay out)."""
        from ...viz.tape_graph import tape_graph
        if show_gradients:
            self._require_kept("tape.visualize(show_gradients=True)")
        return tape_graph(self, filename=filename, array_labels=array_labels, graph_direction=graph_direction,
                          hide_readonly_arrays=hide_readonly_arrays, show_gradients=show_gradients,
                          simplify_graph=simplify_graph)

    def save(self, path) -> None:
        """Write a debug bundle of this tape (records, graph, array snapshots and gradients, as `.npz` + JSON, never
        pickle) that `gradkit open` shows in the debugger.

        Args:
            path: the bundle's folder (created)."""
        from ...viz.bundle import save_bundle
        self._require_kept("tape.save()")
        save_bundle(self, path)

    def _require_kept(self, what: str) -> None:
        pass_state.require_kept(self, what)


# ScopedTimer moved to timer.py; importable from here as before
from .timer import ScopedTimer  # noqa: E402,F401
