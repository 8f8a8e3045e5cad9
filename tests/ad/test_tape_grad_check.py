"""Taichi's tape options: `gk.Tape(loss=l, grad_check=[x])` compares x's gradient with central
differences of the loss by replaying the recorded launches (and restores every array), and
`validation=True` is `check=True` — on every device, with a deliberately wrong custom gradient to show
the check can fail."""

import numpy as np
import pytest

import gradkit as gk

A = gk.array(dtype=gk.float64)


@gk.kernel
def stage(x: A, y: A):
    i = gk.tid()
    y[i] = gk.sin(x[i]) * x[i]


@gk.kernel
def total(y: A, w: A, loss: A):
    i = gk.tid()
    gk.atomic_add(loss, 0, y[i] * y[i] * w[i])


@gk.func
def cube(x: gk.float64) -> gk.float64:
    return x * x * x


@gk.func_grad(cube)
def cube_wrong_grad(x: gk.float64, adj: gk.float64):
    gk.adjoint[x] += 2.0 * x * x * adj          # should be 3x²


@gk.kernel
def stage_wrong(x: A, y: A):
    i = gk.tid()
    y[i] = cube(x[i])


def _arrays(rng, device, n=6):
    x = gk.array(rng.uniform(-1, 1, n), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    w = gk.array(rng.uniform(0.5, 1.5, n), dtype=gk.float64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    return x, y, w, loss


def test_grad_check_passes_and_restores_the_arrays(device, rng):
    x, y, w, loss = _arrays(rng, device)
    with gk.Tape(loss=loss, grad_check=[x, w]) as tape:
        gk.launch(stage, 6, inputs=[x, y], device=device)
        gk.launch(total, 6, inputs=[y, w, loss], device=device)
    x0, w0 = x.numpy(), w.numpy()
    y0 = np.sin(x0) * x0
    assert loss.numpy()[0] == pytest.approx(np.sum(y0 * y0 * w0), rel=1e-12)     # restored after the replays
    np.testing.assert_allclose(y.numpy(), y0, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), y0 * y0, rtol=1e-12)
    tape.backward(loss=loss)                      # the tape still holds: nothing counts as modified


def test_grad_check_catches_a_wrong_gradient(device, rng):
    x, y, w, loss = _arrays(rng, device)
    with pytest.raises(gk.GradientCheckError, match=r"gradient check of grad_check\[0\] failed"):
        with gk.Tape(loss=loss, grad_check=[x]):
            gk.launch(stage_wrong, 6, inputs=[x, y], device=device)
            gk.launch(total, 6, inputs=[y, w, loss], device=device)
    np.testing.assert_allclose(y.numpy(), x.numpy() ** 3, rtol=1e-12)


def test_grad_check_arguments(device, rng):
    x, y, w, loss = _arrays(rng, device)
    with pytest.raises(ValueError, match="grad_check needs the tape's loss"):
        gk.Tape(grad_check=[x])
    with pytest.raises(TypeError, match=r"grad_check\[0\] must be a float gk.array"):
        gk.Tape(loss=loss, grad_check=[gk.zeros(2, dtype=gk.int32, device=device)])
    with pytest.raises(ValueError, match=r"grad_check\[0\] is not an array the tape's launches used"):
        with gk.Tape(loss=loss, grad_check=[gk.zeros(2, dtype=gk.float64, device=device, requires_grad=True)]):
            gk.launch(stage, 6, inputs=[x, y], device=device)
            gk.launch(total, 6, inputs=[y, w, loss], device=device)
    with pytest.raises(ValueError, match="cannot check a tape that also recorded host writes"):
        with gk.Tape(loss=loss, grad_check=[x]):
            gk.launch(stage, 6, inputs=[x, y], device=device)
            y.assign(y.numpy() * 2)
            gk.launch(total, 6, inputs=[y, w, loss], device=device)


def test_validation_is_check(device, rng):
    assert gk.Tape(validation=True).check is True and gk.Tape(validation=False).check is False
    x, y, w, loss = _arrays(rng, device)
    with pytest.raises(gk.GradientRuleError):
        with gk.Tape(validation=True):
            gk.launch(stage, 6, inputs=[x, y], device=device)
            gk.launch(stage, 6, inputs=[y, x], device=device)      # overwrites x, which the first adjoint reads
