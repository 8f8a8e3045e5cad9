"""Native snippets (`@gk.func_native`) in every variant — forward, replay (the adjoint's forward sweep) and
adjoint — for a backend declaring the `native` feature. Snippets are code in the backend's own language, so
the backend supplies them: `conformance_snippets()` returns, per reference function below, the snippet of
each variant (backends/README.md, "Native code"). Checked against float64 references."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.conformance.plugin import require

# the reference functions a backend writes snippets for, as Python (their meaning; the body is ignored)
FUNCTIONS = ("scaled_square", "scale_into")


def _snippets(device: str, fn: str) -> dict:
    require(device, "native")
    impl = gk.get_device(device).impl
    table = getattr(impl, "conformance_snippets", None)
    table = table() if callable(table) else table
    if not table or fn not in table or not {"forward", "replay", "adjoint"} <= set(table[fn]):
        pytest.fail(f"backend '{impl.name}' declares 'native' but its conformance_snippets() lacks the forward, "
                    f"replay and adjoint snippets of '{fn}' (backends/README.md, Native code)")
    return table[fn]


def _native(device: str, fn: str, pyfunc):
    name = gk.get_device(device).backend
    s = _snippets(device, fn)
    return gk.func_native({name: s["forward"]}, adj_snippets={name: s["adjoint"]},
                          replay_snippets={name: s["replay"]})(pyfunc)


def test_native_scalar_function_forward_replay_adjoint(device, rng):
    """y = f(a, x) * x with f(a, x) = a x^2 a native function returning a value: the forward snippet gives
    y; reverse mode replays f (replay snippet) and runs its adjoint (dy/dx = 3 a x^2, dy/da = x^3)."""
    def scaled_square(a: float, x: float) -> float: ...
    f = _native(device, "scaled_square", scaled_square)

    @gk.kernel
    def k(a: gk.array(dtype=float), x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = f(a[0], x[i]) * x[i]

    n = 67
    x0 = rng.uniform(-2, 2, n).astype(np.float32)
    a0, g = np.float32(rng.uniform(0.5, 2)), rng.uniform(-1, 1, n).astype(np.float32)
    a = gk.array(np.array([a0]), device=device, requires_grad=True)
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(k, n, inputs=[a, x], outputs=[y], device=device)
    x64, a64, g64 = x0.astype(np.float64), float(a0), g.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), a64 * x64 ** 3, rtol=1e-5, atol=1e-6)
    tape.backward(grads={y: gk.array(g, device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 3 * a64 * x64 ** 2 * g64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.grad.numpy()[0], np.sum(x64 ** 3 * g64), rtol=1e-4, atol=1e-4)


def test_native_array_function_forward_and_adjoint(device, rng):
    """A native function over arrays (arrays as their flat data, the thread index passed in): out[i] = a x[i];
    its adjoint adds a g into adj_x and sum(x g) into adj_a."""
    def scale_into(a: float, x: gk.array(dtype=float), out: gk.array(dtype=float), i: int): ...
    f = _native(device, "scale_into", scale_into)

    @gk.kernel
    def k(a: gk.array(dtype=float), x: gk.array(dtype=float), out: gk.array(dtype=float)):
        f(a[0], x, out, gk.tid())

    n = 53
    x0 = rng.uniform(-2, 2, n).astype(np.float32)
    a0, g = np.float32(rng.uniform(0.5, 2)), rng.uniform(-1, 1, n).astype(np.float32)
    a = gk.array(np.array([a0]), device=device, requires_grad=True)
    x = gk.array(x0, device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(k, n, inputs=[a, x], outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), float(a0) * x0.astype(np.float64), rtol=1e-6, atol=1e-6)
    tape.backward(grads={out: gk.array(g, device=device)})
    np.testing.assert_allclose(x.grad.numpy(), float(a0) * g.astype(np.float64), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.grad.numpy()[0], np.dot(x0.astype(np.float64), g), rtol=1e-4, atol=1e-5)
