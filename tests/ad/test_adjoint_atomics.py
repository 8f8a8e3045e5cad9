"""Adjoint accumulation without lost updates: a thread's own-element update is a plain read-modify-write
only when no other thread can add into that element (regression: a stencil's adjoint lost neighbours'
atomic adds on a GPU when the own-element add was plain)."""

import numpy as np

import gradkit as gk
from gradkit.ad.reverse import adjoint_function


@gk.kernel
def stencil(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    n = x.shape[0]
    if i > 0 and i < n - 1:
        y[i] = x[i - 1] + 2.0 * x[i] + 3.0 * x[i + 1]
    else:
        y[i] = x[i]


@gk.kernel
def pointwise(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * x[i]


def _exclusive_flags(kernel, array_name):
    fn = adjoint_function(kernel.lowered("forward"))
    adj = next(p.value.id for p in fn.params if p.name == f"adj_{array_name}")
    return [ins.attrs["exclusive"] for ins in fn.walk() if ins.op == "atomic" and ins.args[0].id == adj]


def test_exclusive_only_when_no_other_thread_touches_the_element():
    assert _exclusive_flags(pointwise, "x") == [True]
    flags = _exclusive_flags(stencil, "x")
    assert flags and not any(flags)


def test_stencil_adjoint_matches_transpose(device, rng):
    n = 1 << 16
    x0 = rng.standard_normal(n).astype(np.float32)
    g0 = rng.standard_normal(n).astype(np.float32)
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.zeros(n, device=device, requires_grad=True)
    y.grad.assign(g0)
    gk.launch(stencil, n, inputs=[x], outputs=[y], device=device, adjoint=True)
    g = g0.astype(np.float64)
    expected = g.copy()
    expected[1:-1] = 2.0 * g[1:-1]
    expected[:-2] += g[1:-1]          # x[i-1] feeds y[i]
    expected[2:] += 3.0 * g[1:-1]     # x[i+1] feeds y[i]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-5)
