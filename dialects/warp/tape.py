"""`wp.Tape`: gradkit's tape with Warp 1.19's gradient bookkeeping, found by running Warp itself
(tests/dialects/test_warp_tape.py runs the same programs under both).

What Warp 1.19 does, and this tape with it:
- the adjoint of a plain store `y[i] = v` takes the gradient it reads and resets it (unless the array was
  made with `retain_grad=True`), so an intermediate's `.grad` is zero after `backward()`; `+=` and atomic
  adds pass it through and leave it. gradkit's own tape keeps a once-written array's gradient, so here every
  recorded launch runs the consuming adjoint (ad/consume.py) unless the arrays it writes are retained;
- a gradient already in an intermediate before `backward()` is one more seed; each pass accumulates into
  what is there (`backward()` twice doubles the inputs' gradients), no pass clears what an earlier one left;
- `zero()` zeroes the gradients the tape has seen in a backward pass or a `record_func` (the loss's too),
  `reset()` forgets the launches and zeroes those; `gradients` maps each such array to its gradient.

Where Warp's number is silently wrong and gradkit can tell, `WarpGradientError` is raised before anything is
written: a second pass over gradients a previous pass left in arrays the tape accumulates into (Warp counts
them again), a `retain_grad` array written by more than one launch (Warp counts it twice), and a kernel
that reads an element, modifies it and whose adjoint needs the value read (Warp differentiates at the
modified value).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..core.errors import GradientRuleError
from ..runtime.tape.tape import Tape as _GkTape
from ..runtime.tape.tape_consume import consumable
from ..runtime.tape.tape_records import FuncRecord
from .errors import GUIDE, WarpFeatureMissing

_RETAINED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()   # id -> array made with retain_grad


class WarpGradientError(GradientRuleError):
    """A tape pattern whose gradient Warp 1.19 computes silently wrong: gradkit.warp refuses it (the message
    says what Warp would do and how to write it instead)."""


def retain(a, retain_grad: bool):
    """Mark array `a` as Warp's `retain_grad=True` (stores keep its gradient in the backward pass)."""
    if retain_grad:
        if a.grad is None:
            raise ValueError("retain_grad=True requires requires_grad=True")
        _RETAINED[id(a)] = a
    else:
        _RETAINED.pop(id(a), None)
    return a


def retained(a) -> bool:
    return _RETAINED.get(id(a)) is a


def _label(a, fallback: str) -> str:
    return getattr(a, "label", None) or fallback


def consume_for_adjoint_launch(kernel, args: list, adjs: list) -> bool:
    """Whether `wp.launch(..., adjoint=True)` resets the gradients it reads at stores, as Warp does where the
    adjoint array given is the array's own `.grad` (and it is not retained)."""
    params = consumable(kernel)
    own = [adjs[w] is not None and adjs[w] is getattr(args[w], "grad", None) and not retained(args[w])
           for w in params if w < len(args) and w < len(adjs)]
    if any(own) and not all(own):
        raise WarpFeatureMissing("launch(adjoint=True) mixing own and foreign adjoint arrays",
                                 f"kernel '{kernel.key}' writes several arrays; pass each one's own .grad as its "
                                 "adjoint, or none of them")
    return bool(own) and all(own)


class Tape(_GkTape):
    """`wp.Tape()`: records launches inside `with tape:`; `backward(loss=)` / `backward(grads=)` with Warp
    1.19's semantics (module docstring), `zero()`, `reset()`, `record_func`, `record_scope`, `gradients`."""

    def __init__(self):
        super().__init__()
        self._warp_gradients: dict[int, tuple] = {}   # id -> (array, its grad): what zero() clears
        self._left: dict[int, tuple] = {}             # id -> (array, grad, version) the last pass deposited into
        self._rules_checked = 0                       # records whose launch rules are checked
        self._keeping_gradients = False               # forget_records: reset() leaves the gradients

    # recording --------------------------------------------------------------------------------------------
    def record_func(self, backward, arrays) -> None:
        arrays = list(arrays)
        super().record_func(backward, arrays)
        for a in arrays:
            if getattr(a, "grad", None) is not None:
                self._warp_gradients[id(a)] = (a, a.grad)

    # backward ---------------------------------------------------------------------------------------------
    def backward(self, loss=None, grads: dict | None = None) -> None:
        """Warp's backward (module docstring); raises WarpGradientError where Warp's result would be wrong."""
        self._check_stale()
        self._check_launch_rules()
        written = self._written()
        seeds = {id(loss)} | {id(a) for a in (grads or {})}
        before = {k: (a.grad, a.grad.version) for k, a in written.items() if a.grad is not None}
        super().backward(loss, grads)
        self._last_pass = {}          # Warp clears nothing a previous pass left: gkit's tape would
        self._left = {}
        for k, a in written.items():
            g = a.grad
            if k in seeds or g is None or not g.size or before.get(k) == (g, g.version):
                continue
            if np.any(g._read()):
                self._left[k] = (a, g, g.version)
        for a in self._touched.values():
            if getattr(a, "grad", None) is not None:
                self._warp_gradients[id(a)] = (a, a.grad)

    def _check_stale(self) -> None:
        for a, g, version in self._left.values():
            if a.grad is g and g.version == version:
                raise WarpGradientError(
                    f"tape.backward() again: array '{_label(a, 'an array the tape wrote')}' still holds the gradient "
                    "the previous backward pass accumulated into it (it is written with += / atomic_add, or "
                    "kept by retain_grad). Warp 1.19 would count it a second time, a wrong gradient. Call "
                    f"tape.zero() between backward passes (see {GUIDE}).")

    def _check_launch_rules(self) -> None:
        """Refuse, before anything is written, the recorded patterns Warp would get wrong (module docstring)."""
        writers: dict[int, int] = {}
        for rec in self.records:
            if isinstance(rec, FuncRecord):
                arrays = list(rec.writes)
                for a in arrays:
                    if retained(a):
                        raise WarpFeatureMissing("retain_grad on the destination of a copy on the tape",
                                                 "its gradient is moved to the source in gradkit")
            else:           # overwriting stores (accumulating writes pass gradients on once in Warp too)
                arrays = [rec.args[j] for j in consumable(rec.kernel_obj)]
            for a in arrays:
                if retained(a):
                    writers[id(a)] = writers.get(id(a), 0) + 1
                    if writers[id(a)] > 1:
                        raise WarpGradientError(
                            f"array '{_label(a, 'retained')}' has retain_grad=True and is written by more than one "
                            "step on the tape: Warp 1.19 would pass its gradient back through every write, counting "
                            "it twice. Drop retain_grad (read the gradient from the inputs) or write each step into "
                            "its own array.")
        for rec in self.records[self._rules_checked:]:
            if rec.kind != "launch" or not rec.kernel_obj.enable_backward:
                continue
            kernel = rec.kernel_obj
            for v in kernel.facts().rule_violations:
                if v.rule == 1:
                    raise WarpGradientError(
                        v.describe(kernel.key).replace("the backward pass would", "Warp 1.19's backward pass would")
                        + " gradkit.warp refuses it rather than return Warp's wrong gradient or a different one.")
            keep = [retained(rec.args[w]) for w in consumable(kernel)]
            if any(keep) and not all(keep):
                raise WarpFeatureMissing("retain_grad on one of several arrays a launch overwrites",
                                         f"kernel '{kernel.key}': retain all of them or none")
        self._rules_checked = len(self.records)

    def _check_records(self) -> bool:
        """gradkit's checks, then every launch consumes (Warp's stores reset the gradient they read) unless
        what it overwrites is retained."""
        risky = super()._check_records()
        for rec in self.records:
            if rec.kind == "launch":
                params = consumable(rec.kernel_obj)
                rec.consume = bool(params) and not any(retained(rec.args[w]) for w in params)
        return risky

    # housekeeping -----------------------------------------------------------------------------------------
    def zero(self) -> None:
        """Zero every gradient the tape has seen in a backward pass or a record_func (Warp's zero)."""
        if self._keeping_gradients:
            return
        for a, g in self._warp_gradients.values():
            g.zero_()

    def forget_records(self) -> None:
        """Drop the records and keep every gradient: `reset()` without its `zero()` (a captured graph's replay
        starts the tape afresh while Warp's graph adds into the same gradients, runtime.py)."""
        self._keeping_gradients = True
        try:
            self.reset()
        finally:
            self._keeping_gradients = False

    def reset(self) -> None:
        """Forget the records and zero the gradients (Warp keeps the list of gradients to zero: so does this)."""
        super().reset()
        self._left = {}
        self._rules_checked = 0

    @property
    def gradients(self) -> dict:
        return {a: g for a, g in self._warp_gradients.values()}
