"""`.grad` without a buffer of its own (runtime/arrays/grad_state.py): a gradient a backward pass did not keep
raises a named error, a known zero becomes zeros when read, `retain_grad` marks an array to keep; the tape's
bookkeeping (zero, gradients, hazards) never turns either into an error. On every device."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.arrays import grad_state
from gradkit.runtime.arrays.grad_state import GradientNotKeptError


def _dropped(device, label=None):
    a = gk.array(np.arange(6.0), dtype=gk.float64, device=device, requires_grad=True, label=label)
    a._grad, a._gstate = None, grad_state.DROPPED        # what a pooled backward pass leaves
    return a


def test_dropped_gradient_raises_a_named_error(device):
    a = _dropped(device, label="velocity")
    with pytest.raises(GradientNotKeptError, match="'velocity'.*retain_grad"):
        a.grad
    assert isinstance(GradientNotKeptError("x"), (gk.GradkitError, RuntimeError))
    assert a.requires_grad and "requires_grad=True" in repr(a)
    view = a.reshape((2, 3))
    with pytest.raises(GradientNotKeptError):
        view.grad                                        # a view finds its family's state
    b = _dropped(device)
    grad_state.mark_zero(b)
    assert b.reshape((3, 2)).grad.shape == (3, 2)        # a known zero, made and viewed
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros(6))
    c = _dropped(device)
    assert c.to(device).requires_grad and c.copy().requires_grad    # copies keep requires_grad, no error


def test_zero_state_reads_as_zeros_and_assigning_restarts(device, rng):
    a = _dropped(device)
    assert grad_state.mark_zero(a) and grad_state.kept_grad(a) is None
    g = a.grad
    np.testing.assert_array_equal(g.numpy(), np.zeros(6))
    assert a.grad is g and a._gstate is None             # made once
    b = _dropped(device)
    values = rng.uniform(-1, 1, 6)
    b.grad = gk.array(values, dtype=gk.float64, device=device)
    np.testing.assert_array_equal(b.grad.numpy(), values)
    c = _dropped(device)
    c.requires_grad = True
    np.testing.assert_array_equal(c.grad.numpy(), np.zeros(6))
    d = _dropped(device)
    d.requires_grad = False
    assert d.grad is None and not d.requires_grad


def test_retain_grad(device):
    a = gk.zeros(4, device=device, requires_grad=True)
    assert a.retain_grad() is a and a._retain
    with pytest.raises(ValueError, match="requires_grad"):
        gk.zeros(4, device=device).retain_grad()
    assert not gk.zeros(4, device=device).reshape((2, 2))._retain


@gk.kernel
def double(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


def test_tape_bookkeeping_skips_gradients_not_kept(device, rng):
    """zero(), gradients, hazards and a new tape's Taichi-style clearing on an array whose gradient was
    dropped: no error, and the array reads as zero gradient afterwards."""
    x = gk.array(rng.uniform(-1, 1, 6), dtype=gk.float64, device=device, requires_grad=True)
    y = _dropped(device)
    tape = gk.Tape()
    with tape:
        gk.launch(double, 6, inputs=[x], outputs=[y], device=device)
    assert y not in tape.gradients
    tape.hazards()
    tape.zero()
    np.testing.assert_array_equal(y.grad.numpy(), 0.0)
    z = _dropped(device)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=loss):                             # entering clears every gradient it touches
        gk.launch(double, 6, inputs=[x], outputs=[z], device=device)
    np.testing.assert_array_equal(z.grad.numpy(), 0.0)
