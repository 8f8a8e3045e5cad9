"""`ti.ad`: Taichi's autodiff entry points over gradkit's tape.

`ti.ad.Tape(loss)` is a gk.Tape with Taichi's semantics: entering it clears the gradient of EVERY field
(Taichi's `clear_all_gradients`, not only those the tape later touches, as gk.Tape(loss) does) and sets
the loss to 0; leaving it seeds `loss.grad = 1` and runs the backward pass over the launches recorded
inside (the kernels' adjoints in reverse order).

Taichi checks its global data access rule only under `validation=True` (gradkit's `check=True`, which raises).
Without it gradkit.taichi runs the modified-after-recording check only under `ti.init(debug=True)`, on the
first tape of each sequence of kernels, and only to give a note (the gradient is Taichi's either way): the
check is 7-15 % of a DiffTaichi program's first iteration (rigid_body 0.33 of 2.3 s CPU).
"""

from __future__ import annotations

import gc

import gradkit as gk

from . import runtime
from .fields import Field

_noted: set = set()
_CHECKED: set = set()       # kernel sequences whose tape passed (or noted) the version check


def _note_once(msg: str) -> None:
    if msg not in _noted:
        _noted.add(msg)
        runtime._note(msg)


def clear_all_gradients(gradient_type=None) -> None:
    """Zero `.grad` of every field that has one (Taichi's ti.ad.clear_all_gradients)."""
    for f in runtime.live_fields():
        a = f._arr
        if a is not None and a.grad is not None:
            a.grad.zero_()


def _record_key(r):
    """What a tape record does, stably across iterations: its kernel, or a host step's name and site."""
    k = getattr(r, "kernel_obj", None)
    return id(k) if k is not None else (r.name, r.site)


class Tape:
    """`with ti.ad.Tape(loss=L): ...` records the kernels called inside; on exit L.grad = 1 and the
    gradients of every field are accumulated.

    Python's cyclic garbage collector is paused from entering to the end of the backward pass (as gradkit
    pauses it while building kernels, core/locks.py): the tape's records of a time-stepped program (10 000
    launches an iteration for rigid_body) would otherwise survive young collections into the oldest
    generation and set off full collections, which rescan every long-lived object (the kernels' IR): 30 % of
    rigid_body's iterations. Garbage made meanwhile is collected as usual afterwards."""

    def __init__(self, loss=None, clear_gradients: bool = True, validation: bool = False, grad_check=None):
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.validation = validation
        self.tape = gk.Tape(check=True if validation else None)
        self.entered = False
        self.paused = False         # whether this tape paused the garbage collector (an outer one may have)

    def __enter__(self):
        if self.entered:
            raise RuntimeError("Tape can be entered only once.")
        self.entered = True
        if isinstance(self.loss, Field):
            if self.loss.shape != ():
                raise RuntimeError("The loss of `Tape` must be a 0-D field, i.e. scalar")
            if self.loss.arr.grad is None:
                raise RuntimeError("Gradients of loss are not allocated, please use ti.field(..., needs_grad=True)"
                                   " for all fields that are required by autodiff.")
            if self.clear_gradients:
                clear_all_gradients()
            self.loss.arr.zero_()
        self.tape.__enter__()
        if gc.isenabled():
            gc.disable()
            self.paused = True
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.tape.__exit__(exc_type, exc, tb)
            if exc_type is None and self.loss is not None:
                self.grad()
        finally:
            if self.paused:
                self.paused = False
                gc.enable()

    def grad(self):
        self.loss.arr.grad.fill_(1.0)
        key = None
        if not self.validation and self.tape.check_versions and not runtime.settings.debug:
            self.tape.check_versions = False    # as Taichi: no check without validation (module docstring)
        elif not self.validation and self.tape.check_versions:
            # Without validation the version check only decides whether to give the note below: the gradient
            # is the same either way (see below). A training loop records the same kernels every iteration,
            # so a sequence of kernels already checked once is not checked again (a third of backward's time
            # in time-stepped programs).
            key = tuple(_record_key(r) for r in self.tape.records)
            if key in _CHECKED:
                self.tape.check_versions = False
            elif len(_CHECKED) > 256:
                _CHECKED.clear()
        try:
            self.tape.backward()
            if key is not None:
                _CHECKED.add(key)
        except gk.GradientRuleError as exc:
            if self.validation or not self.tape.check_versions:
                raise
            # Taichi (validation=False) runs each adjoint on the fields' values as they are at backward
            # time, even where a later kernel overwrote what an earlier one read; so does gradkit.taichi,
            # saying so once. A backward that raises has written nothing: run it again without the check.
            _note_once(f"{str(exc).splitlines()[0]} Taichi computes this gradient from the values as they are "
                       "now, and so does gradkit.taichi; ti.ad.Tape(loss, validation=True) raises instead.")
            self.tape.check_versions = False
            self.tape.backward()
            if key is not None:
                _CHECKED.add(key)


class FwdMode:
    """`with ti.ad.FwdMode(loss=y, param=x, seed=[...]):` forward-mode derivative: afterwards `y.dual`
    holds dy/dx · seed (gk.ForwardMode over the fields' arrays)."""

    def __init__(self, loss, param, seed=None, clear_gradients: bool = True):
        self.loss, self.param, self.seed, self.clear = loss, param, seed, clear_gradients
        self.mode = None

    def __enter__(self):
        import numpy as np
        p = self.param
        for f in (p, self.loss) if isinstance(self.loss, Field) else (p,):
            f._want("dual")
        n = int(np.prod(p.shape)) if p.shape else 1
        if self.seed is None:
            if n != 1:
                raise RuntimeError("FwdMode: give seed= for a parameter with more than one element")
            seed = np.ones(p.arr.shape)
        else:
            comps = tuple(p.elem.shape) if not p.elem.is_scalar else ()
            seed = np.asarray(self.seed, dtype=float).reshape(p.arr.shape + comps)
        self.mode = gk.ForwardMode(seeds={p.arr: seed}, clear_gradients=self.clear)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)


def grad_replaced(fn):
    return gk.grad_replaced(fn)


def grad_for(primal):
    return gk.grad_for(primal)


no_grad = gk.no_grad
