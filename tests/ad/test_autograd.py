"""gk.autograd: reverse, forward and finite-difference Jacobians agree; gradcheck passes good kernels and
reports a readable table for wrong gradients."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def mix(x: gk.array(dtype=gk.float64), w: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    n = x.shape[0]
    y[i] = gk.sin(x[i]) * w[(i + 1) % n] + x[(i + 2) % n] ** 2


def _setup(device, rng):
    x = gk.array(rng.normal(size=5), dtype=gk.float64, device=device, requires_grad=True)
    w = gk.array(rng.normal(size=5), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(5, dtype=gk.float64, device=device, requires_grad=True)
    return x, w, y


def test_three_jacobians_agree(device, rng):
    x, w, y = _setup(device, rng)
    rev = gk.autograd.jacobian(mix, 5, [x, w], [y], device=device)
    fwd = gk.autograd.jacobian_fwd(mix, 5, [x, w], [y], device=device)
    fd = gk.autograd.jacobian_fd(mix, 5, [x, w], [y], eps=1e-6, device=device)
    xs, ws = x.numpy(), w.numpy()
    analytic = np.zeros((5, 5))
    for i in range(5):
        analytic[i, i] += np.cos(xs[i]) * ws[(i + 1) % 5]
        analytic[i, (i + 2) % 5] += 2 * xs[(i + 2) % 5]
    for key in rev:
        np.testing.assert_allclose(rev[key], fwd[key], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(rev[key], fd[key], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(rev[(0, 0)], analytic, rtol=1e-12)
    assert gk.autograd.gradcheck(mix, 5, [x, w], [y], device=device)


@gk.func
def wrong_square(v: gk.float64) -> gk.float64:
    return v * v


@gk.func_grad(wrong_square)
def adj_wrong_square(v: gk.float64, adj_ret: gk.float64):
    gk.adjoint[v] += 3.0 * v * adj_ret          # deliberately wrong (should be 2 v)


@gk.kernel
def uses_wrong(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = wrong_square(x[i])


def test_gradcheck_reports_a_table(device):
    x = gk.array([1.0, 2.0, 3.0], dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(3, dtype=gk.float64, device=device, requires_grad=True)
    assert gk.autograd.gradcheck(uses_wrong, 3, [x], [y], raise_exception=False, device=device) is False
    with pytest.raises(gk.GradientCheckError, match=r"uses_wrong(.|\n)*analytic(.|\n)*numeric(.|\n)*9"):
        gk.autograd.gradcheck(uses_wrong, 3, [x], [y], device=device)
    tape = gk.Tape()
    with tape:
        gk.launch(uses_wrong, 3, inputs=[x], outputs=[y], device=device)
    assert gk.autograd.gradcheck_tape(tape, raise_exception=False) is False


@gk.kernel
def scale_by_three(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 3.0 * x[i]


def test_central_differences_divide_by_the_step_the_array_holds(device, rng):
    """At |x| ~ 1000 a float32 holds x + 1e-3 only to a multiple of 6.1e-5: dividing by 2*eps would be off
    by ~2.4 %; jacobian_fd divides by the step actually taken, so a linear kernel's slope is exact."""
    x = gk.array(rng.uniform(900.0, 1100.0, 16).astype(np.float32), device=device, requires_grad=True)
    y = gk.zeros(16, device=device, requires_grad=True)
    jac = gk.autograd.jacobian_fd(scale_by_three, 16, [x], [y], eps=1e-3, device=device)[(0, 0)]
    np.testing.assert_allclose(np.diag(jac), 3.0, rtol=1e-6)
    assert not np.any(jac - np.diag(np.diag(jac)))
