"""Edge tests (backends/cpu/edges.py): comparisons of the last-axis thread index plus a constant with a value
fixed over a row are loop invariants in the middle of each row of a gathered stencil adjoint on the CPU
backend (thread_loops.inner_loops).
Every kernel here must give NumPy's float64 numbers, forward and gradient, on every device and for every row
width — rows shorter than the stencil, rows where the middle stretch is empty, bounds that are runtime
parameters or the row's own leading index — and the analysis must find the tests it is meant to fold."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.cpu.edges import edge_tests
from tests.ad.test_gather import heat as heat_2d     # W4's step: a 5-point stencil, its edge copied


@gk.kernel
def laplace_1d(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    n = x.shape[0]
    if i == 0 or i == n - 1:
        y[i] = x[i]
    else:
        y[i] = x[i - 1] + x[i + 1] - 2.0 * x[i]


@gk.kernel
def one_sided(x: gk.array(dtype=float), k: int, y: gk.array(dtype=float)):
    i = gk.tid()
    n = x.shape[0]
    v = x[i]
    if i + 2 < n:
        v = v + 3.0 * x[i + 2]
    if 3 <= i:                      # the thread index on the right
        v = v - x[i - 3]
    if i > k:                       # a runtime bound
        v = v * 2.0
    if i != k + 1:
        v = v + 1.0
    y[i] = v


@gk.kernel
def banded(a: gk.array(dtype=float, ndim=2), out: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    v = a[i, j]
    if j == i:                      # the bound is the row's own index
        v = v + 10.0
    elif j == i + 1 or j - 1 < i - 2:
        v = -v
    if j >= 1:                      # a shifted read: the adjoint gathers
        v = v + 0.5 * a[i, j - 1]
    out[i, j] = v * v


def _laplace_1d(x):
    y = x.copy()
    y[1:-1] = x[:-2] + x[2:] - 2.0 * x[1:-1]
    return y


def _one_sided(x, k):
    n = len(x)
    i = np.arange(n)
    v = x.copy()
    v[:-2] += 3.0 * x[2:]
    v[3:] -= x[:-3]
    v = np.where(i > k, 2.0 * v, v)
    return np.where(i != k + 1, v + 1.0, v)


def _heat_2d(u):
    out = u.copy()
    out[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                            - 4.0 * u[1:-1, 1:-1])
    return out


def _banded(a):
    """(out, d out / d v, v) of `banded` in float64."""
    i, j = np.indices(a.shape)
    sign = np.where(j == i, 1.0, np.where((j == i + 1) | (j - 1 < i - 2), -1.0, 1.0))
    v = np.where(j == i, a + 10.0, sign * a)
    v[:, 1:] += 0.5 * a[:, :-1]
    return v * v, sign, v


def _jacobian_t(f, shape, seed):
    """seedᵀ·J of a linear map f in float64, column by column (small shapes only)."""
    size = int(np.prod(shape))
    cols = [f(np.eye(size)[k].reshape(shape)).ravel() for k in range(size)]
    return (np.array(cols) @ seed.ravel()).reshape(shape)


def _forward_and_grad(kernel, x_np, device, extra=()):
    x = gk.array(x_np.astype(np.float32), device=device, requires_grad=True)
    y = gk.zeros(x_np.shape, device=device, requires_grad=True)
    seed = np.random.default_rng(1).uniform(-1, 1, x_np.shape)
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, x_np.shape, inputs=[x, *extra], outputs=[y], device=device)
    tape.backward(grads={y: gk.array(seed.astype(np.float32), device=device)})
    return y.numpy().astype(np.float64), x.grad.numpy().astype(np.float64), seed


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 17, 64, 1000, 4099])
def test_1d_stencil_with_edge_tests(device, n):
    x_np = np.random.default_rng(n).uniform(-1, 1, n)
    y, g, seed = _forward_and_grad(laplace_1d, x_np, device)
    np.testing.assert_allclose(y, _laplace_1d(x_np), rtol=1e-5, atol=1e-5)
    # the adjoint of the linear stencil, gathered: A^T seed
    want = np.zeros(n)
    want[[0, -1]] += seed[[0, -1]] if n > 1 else seed[0]
    if n > 2:
        want[:-2] += seed[1:-1]
        want[2:] += seed[1:-1]
        want[1:-1] -= 2.0 * seed[1:-1]
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,k", [(1, 0), (4, -5), (7, 2), (33, 31), (33, 40), (1000, 500), (1000, -1)])
def test_one_sided_tests_and_runtime_bounds(device, n, k):
    x_np = np.random.default_rng(n + abs(k)).uniform(-1, 1, n)
    y, g, seed = _forward_and_grad(one_sided, x_np, device, extra=(k,))
    np.testing.assert_allclose(y, _one_sided(x_np, k), rtol=1e-5, atol=1e-5)
    lin = lambda x: _one_sided(x, k) - _one_sided(np.zeros_like(x), k)  # noqa: E731
    if n <= 64:
        np.testing.assert_allclose(g, _jacobian_t(lin, (n,), seed), rtol=1e-5, atol=1e-5)
    else:                       # central differences of a linear map are exact: one random direction
        d = np.random.default_rng(2).uniform(-1, 1, n)
        np.testing.assert_allclose(g @ d, seed @ lin(d), rtol=1e-4)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (3, 2), (5, 5), (7, 40), (40, 7), (64, 130)])
def test_2d_heat_stencil_forward_and_gathered_adjoint(device, shape):
    u_np = np.random.default_rng(sum(shape)).uniform(-1, 1, shape)
    y, g, seed = _forward_and_grad(heat_2d, u_np, device)
    np.testing.assert_allclose(y, _heat_2d(u_np), rtol=1e-5, atol=1e-5)
    if np.prod(shape) <= 400:
        np.testing.assert_allclose(g, _jacobian_t(_heat_2d, shape, seed), rtol=1e-5, atol=1e-5)
    else:
        d = np.random.default_rng(3).uniform(-1, 1, shape)
        np.testing.assert_allclose(np.sum(g * d), np.sum(seed * _heat_2d(d)), rtol=1e-4)


@pytest.mark.parametrize("shape", [(1, 1), (3, 9), (9, 3), (20, 37)])
def test_bounds_from_the_leading_index(device, shape):
    a_np = np.random.default_rng(7).uniform(-1, 1, shape)
    y, g, seed = _forward_and_grad(banded, a_np, device)
    out, sign, v = _banded(a_np)
    np.testing.assert_allclose(y, out, rtol=1e-5, atol=1e-5)
    want = seed * 2.0 * v * sign
    want[:, :-1] += seed[:, 1:] * 2.0 * v[:, 1:] * 0.5
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def _found(kernel, variant="forward"):
    tests, _ = edge_tests(kernel.lowered(variant))
    return sorted((t.pred, t.offset) for t in tests)


def test_the_analysis_finds_the_edge_tests():
    assert _found(laplace_1d) == [("==", 0), ("==", 0)]
    assert _found(one_sided) == [("!=", 0), ("<", 2), (">", 0), (">=", 0)]
    assert ("==", 0) in _found(heat_2d) and len(_found(heat_2d)) == 2     # j == 0, j == m - 1; i is a row's
    assert _found(banded) == [("<", -1), ("==", 0), ("==", 0), (">=", 0)]
    assert banded.gather_sources() and ("==", 1) in _found(banded, "adjoint_gather")   # thread j + 1: j + 1 == i
    # the gathered adjoint: the replayed threads' boundary tests, at their shifts
    assert {c for _, c in _found(heat_2d, "adjoint_gather")} >= {-1, 0, 1}


def test_gathered_adjoints_fold_their_tests_and_nothing_else_does():
    from gradkit.backends.cpu.codegen import Codegen
    gathered = heat_2d.lowered("adjoint_gather")
    assert Codegen(gathered, "k", debug=False, stack_size=8).edges is not None
    assert Codegen(gathered, "k", debug=True, stack_size=8).edges is None      # bounds checks see every test
    # a forward stencil keeps one loop: a split of its own measured no faster and tripled its compile time
    assert Codegen(heat_2d.lowered("forward"), "k", debug=False, stack_size=8).edges is None
