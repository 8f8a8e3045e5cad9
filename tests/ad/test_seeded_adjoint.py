"""Adjoint launches seeded with a number (`adj_outputs=[1.0]`: every element's gradient is that value,
ad/uniform.py). Where the adjoint only reads the gradient the seed is a scalar argument of a folded variant;
where it needs an array (the kernel also reads the output, so the adjoint adds into its gradient) the launch
fills one. Either way the gradients equal those of the same seed given as an array, and NumPy float64
derivatives, on every device."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.ops import Op


@gk.kernel
def stream(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = gk.sin(v) * v + 0.5 * v * v


@gk.kernel
def two_outputs(x: gk.array(dtype=float), s: float, y: gk.array(dtype=float), z: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    if v > 0.0:
        y[i] = gk.exp(v) * s
    else:
        y[i] = v * v
    for k in range(3):
        gk.atomic_add(z, k, v * float(k + 1))


@gk.kernel
def accumulate(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = y[i] * x[i] + x[i]             # reads y: its adjoint adds into y's gradient


def _grads(kernel, device, inputs, outputs, adj_outputs):
    arrays = [a for a in inputs + outputs if isinstance(a, gk.array)]
    for a in arrays:
        if a.grad is not None:
            a.grad.zero_()
    gk.launch(kernel, inputs[0].shape[0], inputs=inputs, outputs=outputs, device=device, adjoint=True,
              adj_outputs=adj_outputs)
    return [a.grad.numpy().astype(np.float64) for a in inputs if isinstance(a, gk.array)]


def test_stream_folds(device, rng):
    x_np = rng.uniform(-3, 3, 1000).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.zeros(1000, device=device, requires_grad=True)
    seed = 0.75
    (got,) = _grads(stream, device, [x], [y], [seed])
    xd = x_np.astype(np.float64)
    ref = seed * (np.cos(xd) * xd + np.sin(xd) + xd)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-5)
    assert not y.grad.numpy().any()            # the seed was never written into y.grad
    folded = stream.lowered(stream.seeded("adjoint", (3,)))
    assert folded.params[3].type is gk.float32
    assert not any(i.op == Op.LOAD and i.args[0] is folded.params[3].value for i in folded.walk())


def test_several_outputs_and_scalars(device, rng):
    n = 777
    x_np = rng.uniform(-1, 1, n).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.zeros(n, device=device, requires_grad=True)
    z = gk.zeros(3, device=device, requires_grad=True)
    g_y = gk.array(np.full(n, -1.5, np.float32), device=device)
    as_numbers = _grads(two_outputs, device, [x, 2.0], [y, z], [-1.5, 0.25])[0]
    as_arrays = _grads(two_outputs, device, [x, 2.0], [y, z], [g_y, gk.full(3, 0.25, device=device)])[0]
    mixed = _grads(two_outputs, device, [x, 2.0], [y, z], [g_y, 0.25])[0]
    xd = x_np.astype(np.float64)
    ref = -1.5 * np.where(xd > 0, 2.0 * np.exp(xd), 2.0 * xd) + 0.25 * (1 + 2 + 3)
    np.testing.assert_allclose(as_numbers, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(as_numbers, as_arrays)
    np.testing.assert_array_equal(mixed, as_arrays)


def test_adjoint_that_adds_into_the_seed_gets_an_array(device, rng):
    """accumulate's adjoint adds into y's gradient: the seed is materialised, and the caller's number is
    all the caller gave (nothing of theirs is written)."""
    x_np, y_np = rng.uniform(-1, 1, (2, 300)).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.array(y_np, device=device, requires_grad=True)
    assert accumulate.seeded("adjoint", (3,)).name == "adjoint"
    (got,) = _grads(accumulate, device, [x], [y], [2.0])
    np.testing.assert_allclose(got, 2.0 * (y_np.astype(np.float64) + 1.0), rtol=1e-6)
    assert not y.grad.numpy().any()


def test_seed_matches_central_differences(device, rng):
    x_np = rng.uniform(-2, 2, 64).astype(np.float64)
    x = gk.array(x_np, dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(64, dtype=gk.float64, device=device, requires_grad=True)

    @gk.kernel
    def cube(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = x[i] * x[i] * x[i] - gk.cos(x[i])

    gk.launch(cube, 64, inputs=[x], outputs=[y], device=device, adjoint=True, adj_outputs=[3.0])
    f = lambda v: np.sum(3.0 * (v ** 3 - np.cos(v)))   # noqa: E731
    h = 1e-6
    fd = np.array([(f(x_np + h * e) - f(x_np - h * e)) / (2 * h) for e in np.eye(64)])
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bad", ["1.0", True, None])
def test_bad_seeds_name_the_parameter(device, bad):
    x = gk.zeros(8, device=device, requires_grad=True)
    y = gk.zeros(8, device=device, requires_grad=True)
    if bad is None:
        gk.launch(stream, 8, inputs=[x], outputs=[y], device=device, adjoint=True, adj_outputs=[bad])  # .grad
        return
    with pytest.raises(ValueError, match="'y'"):
        gk.launch(stream, 8, inputs=[x], outputs=[y], device=device, adjoint=True, adj_outputs=[bad])
