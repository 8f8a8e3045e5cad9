"""Annotations resolve in the scope that defines the kernel, as Python's own scoping would — also under
`from __future__ import annotations`, where they are strings and never become closure cells."""

from __future__ import annotations

import numpy as np

import gradkit as gk


def _make_kernel(dtype):
    Arr = gk.array(dtype=dtype)
    Scalar = dtype

    @gk.func
    def square(v: Scalar) -> Scalar:
        return v * v

    @gk.kernel
    def apply(x: Arr, y: Arr):
        i = gk.tid()
        y[i] = square(x[i])

    return apply


def test_local_array_types_in_annotations(device, rng):
    x_np = rng.uniform(-1, 1, 5)
    for dtype in (gk.float32, gk.float64):
        k = _make_kernel(dtype)
        x = gk.array(x_np, dtype=dtype, device=device, requires_grad=True)
        y = gk.zeros(5, dtype=dtype, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(k, 5, inputs=[x, y], device=device)
        tape.backward(grads={y: gk.array(np.ones(5), dtype=dtype, device=device)})
        tol = 1e-6 if dtype is gk.float32 else 1e-12
        np.testing.assert_allclose(y.numpy(), x_np ** 2, rtol=tol)
        np.testing.assert_allclose(x.grad.numpy(), 2 * x_np, rtol=tol)
