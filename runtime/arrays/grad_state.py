"""What `.grad` means when a tape's backward pass did not keep an array's own gradient buffer.

A backward pass gives an intermediate array that nothing outside the tape holds a pooled gradient buffer
for as long as its adjoints need it, and takes the buffer back afterwards (runtime/tape/grad_pool.py). The
array then remembers that its gradient was not kept (`DROPPED`): reading `.grad` raises
`GradientNotKeptError` instead of returning a stale or reused buffer. Zeroing such a gradient (`tape.zero()`,
the next backward pass) makes it a known zero (`ZERO`) without writing memory; reading `.grad` in that state
allocates the zeros then. `tape.zero()` also defers zeroing a large gradient array that only its array
refers to (`defer_zero`): the first read of `.grad` — by the user, or by the backward pass right before
the adjoint that first accumulates into it, while it is in cache — zeroes it. `a.retain_grad()` keeps an
array out of the pool.
"""

from __future__ import annotations

from ...core.errors import GradkitError

DROPPED = "dropped"      # the last backward pass used a pooled buffer for the gradient and did not keep it
ZERO = "zero"            # the gradient is zero: `_grad` is None (made on first read) or not yet zeroed


class GradientNotKeptError(GradkitError, RuntimeError):
    """`.grad` of an intermediate array whose gradient the last backward pass computed in a reused buffer
    (nothing held the array when the pass ran, and it was not `retain_grad()`-ed)."""


def not_kept_message(a) -> str:
    name = f"'{a.label}'" if a.label else f"of shape {a.shape}"
    return (f"the gradient of array {name} was not kept: when tape.backward() ran, no variable held this "
            "intermediate array, so its gradient lived in a reused buffer. Call a.retain_grad() before the "
            "backward pass (or keep a reference to the array while it runs) to keep it; assign a.grad or set "
            "a.requires_grad = True to start again from zero.")


def settle(a):
    """The gradient array of `a` whose `_gstate` is set: zeros made or written now (ZERO), or
    GradientNotKeptError."""
    if a._gstate == ZERO:
        g = a._grad
        if g is None:
            from .array import array
            g = a._grad = array._alloc(a.shape, a.dtype, a.device)
            g.label = f"{a.label}.grad" if a.label else None
        else:                   # zeroed lazily (defer_zero): nothing else refers to it, so nobody saw it
            if g._host is not None:
                g._host.fill(0)
            elif g.nbytes:
                g.device.impl.fill_zero(g.device.info, g.buffer, g.nbytes)
            g._bump()
        a._gstate = None
        return g
    raise GradientNotKeptError(not_kept_message(a))


def defer_zero(a) -> None:
    """Zero `a.grad` when it is next read instead of now (the caller checked that only `a` refers to it)."""
    a._gstate = ZERO


def kept_grad(a):
    """`a`'s gradient array when one holds its value, else None (never allocates or raises: for the tape's
    own bookkeeping, which must not turn a dropped or zero gradient into memory)."""
    if getattr(a, "_gstate", None) is not None:
        return None
    return a.grad


def mark_zero(a) -> bool:
    """Make a gradient without a buffer a known zero; True when `a` had none (nothing left to write)."""
    if getattr(a, "_gstate", None) is None:      # struct arrays have fields, not a state of their own
        return False
    a._gstate = ZERO
    return True
