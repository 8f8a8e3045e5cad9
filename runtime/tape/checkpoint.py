"""Python-level gradient plumbing: `gk.no_grad` (launches not recorded), `gk.checkpoint` (recompute
instead of store) and Taichi's `@gk.grad_replaced` / `@gk.grad_for` (a hand-written backward for a
function that launches kernels)."""

from __future__ import annotations

import contextlib
import functools
import weakref

from .block import Block
from ..state import current as state


def _arrays(values) -> list:
    return [v for v in values if hasattr(v, "buffer")]


@contextlib.contextmanager
def _suspended():
    tape, state.tape = state.tape, None
    try:
        yield
    finally:
        state.tape = tape


def no_grad(fn=None):
    """`with gk.no_grad():` launches and host copies inside are not recorded on this thread's active
    tape (PyTorch's `torch.no_grad`); writes to arrays the tape recorded are still caught at backward.
    As a decorator, `@gk.no_grad` makes a Python function run so, and a kernel never recorded (Taichi's
    `@ti.ad.no_grad`: its gradient is a no-op).

    Args:
        fn: None for the context manager; a Python function or a kernel when used as a decorator."""
    if fn is None:
        return _suspended()
    if getattr(fn, "_gk_kernel", False):
        fn.recorded = False
        return fn
    if not callable(fn):
        raise TypeError(f"gk.no_grad takes a kernel or a function to decorate, got {type(fn).__name__}")

    @functools.wraps(fn)
    def untaped(*args, **kwargs):
        with _suspended():
            return fn(*args, **kwargs)
    return untaped


def _untaped(fn, args, kwargs):
    """Run fn with no tape recording (its launches are not kept)."""
    with _suspended():
        return fn(*args, **kwargs)


def checkpoint(fn, *args, **kwargs):
    """Run `fn(*args)` (which launches kernels) without keeping its launches on the active tape; on
    backward, re-run it on a temporary tape and back-propagate through that. Memory for time: the
    intermediate arrays `fn` allocates live only while its block is being differentiated.
    `fn` must write (not accumulate into) its outputs, since it runs twice. The recompute refuses inputs
    changed since the block ran (GradientRuleError) and puts back what later launches wrote into the
    block's outputs (runtime/tape/block.py).

    Args:
        fn: a Python function that launches kernels; its return value is returned.
        args: the positional arguments `fn` is called with (both times).
        kwargs: its keyword arguments (both times)."""
    tape = state.tape
    if tape is None:
        return fn(*args, **kwargs)
    result, block = Block.run(fn, args, kwargs)
    index = len(tape.records)
    outer_tape = weakref.ref(tape)          # the tape holds this record: no reference cycle back to it

    def backward() -> None:
        block.check_inputs()
        with block.outputs_kept():
            from .tape import Tape
            inner = Tape(snapshots=False)
            inner._prior = outer_tape().memory_before(index)      # what the tape used before the block
            outer, state.tape = state.tape, inner
            try:
                fn(*args, **kwargs)
            finally:
                state.tape = outer
            inner._run_adjoints()

    tape.record_func(backward, block.arrays(_arrays([*args, *kwargs.values()])))
    rec = tape.records[-1]
    rec.name, rec.writes = f"checkpoint({getattr(fn, '__name__', 'fn')})", block.written()
    return result


def grad_replaced(fn):
    """Taichi's `@ti.ad.grad_replaced`: inside a Tape, `fn`'s launches are not recorded; its
    `@gk.grad_for(fn)` function runs in their place during backward, with the same arguments.

    Args:
        fn: the Python function (launching kernels) whose gradient is written by hand."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tape = state.tape
        if tape is None:
            return fn(*args, **kwargs)
        if wrapper.backward is None:
            raise RuntimeError(f"'{fn.__name__}' is @gk.grad_replaced but no @gk.grad_for({fn.__name__}) is defined")
        result = _untaped(fn, args, kwargs)
        backward = wrapper.backward
        tape.record_func(lambda: _untaped(backward, args, kwargs), _arrays([*args, *kwargs.values()]))
        return result

    def grad(*args, **kwargs):
        """`f.grad(...)` (Taichi): run the `@gk.grad_for(f)` function directly, recording nothing."""
        if wrapper.backward is None:
            raise RuntimeError(f"'{fn.__name__}.grad' needs a @gk.grad_for({fn.__name__}) function")
        return _untaped(wrapper.backward, args, kwargs)

    wrapper.backward = None
    wrapper.grad = grad
    wrapper._gk_grad_replaced = True
    return wrapper


def grad_for(primal):
    """Taichi's `@ti.ad.grad_for(primal)`: register the decorated function as `primal`'s backward.

    Args:
        primal: the `@gk.grad_replaced` function the decorated one differentiates; it is called with the
            same arguments during the backward pass."""
    if not getattr(primal, "_gk_grad_replaced", False):
        raise TypeError("gk.grad_for(f) needs f decorated with @gk.grad_replaced")

    def deco(backward):
        primal.backward = backward
        return backward
    return deco
