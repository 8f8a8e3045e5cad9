"""One array passed as two parameters of a launch, where the kernel adds into one of them without atomics
(the CPU backend's plain adds at a thread's own index in the middle of a chunk, its workers' private
scatter buffers, a gathered stencil adjoint's own-element adds) and atomically through the other: every
add must still land. Launches big enough to run on every worker, repeated; counts compared exactly."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk

N = 1 << 20          # past the CPU backend's inline threshold: every worker takes chunks


@gk.kernel
def own_and_scattered(idx: gk.array(dtype=int), a: gk.array(dtype=float), b: gk.array(dtype=float)):
    i = gk.tid()
    a[i] += 1.0                       # only ever at the thread's own element: no atomic needed alone
    gk.atomic_add(b, idx[i], 1.0)     # anywhere


@gk.kernel
def add_then_store(idx: gk.array(dtype=int), a: gk.array(dtype=float), b: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(a, idx[i], 1.0)     # only scatter-adds into `a`: per-worker buffers, summed after
    b[idx[i]] = 5.0                   # then the same element overwritten: 5 is what stays


@gk.kernel
def stencil_and_gather(u: gk.array(dtype=float), v: gk.array(dtype=float), idx: gk.array(dtype=int),
                       out: gk.array(dtype=float)):
    i = gk.tid()
    n = u.shape[0]
    s = u[i]
    if i > 0:
        s += u[i - 1]
    if i < n - 1:
        s += u[i + 1]
    out[i] = s + v[idx[i]]


@gk.kernel
def own_and_gather(u: gk.array(dtype=float), v: gk.array(dtype=float), idx: gk.array(dtype=int),
                   out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = 2.0 * u[i] + v[idx[i]]      # adjoint: an own-element add into du, an atomic one into dv


def _idx(device, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, N, N).astype(np.int32)
    return idx, gk.array(idx, dtype=int, device=device)


def test_own_element_adds_and_atomic_adds_into_one_array(device):
    idx, idx_g = _idx(device)
    a = gk.zeros(N, device=device)
    reps = 8
    for _ in range(reps):
        gk.launch(own_and_scattered, N, inputs=[idx_g, a, a], device=device)
    want = reps * (1.0 + np.bincount(idx, minlength=N))
    np.testing.assert_array_equal(a.numpy(), want)


def test_scatter_adds_then_a_store_into_one_array(device):
    idx = np.random.default_rng(1).permutation(N).astype(np.int32)     # one thread per element
    a = gk.zeros(N, device=device)
    gk.launch(add_then_store, N, inputs=[gk.array(idx, dtype=int, device=device), a, a], device=device)
    np.testing.assert_array_equal(a.numpy(), np.full(N, 5.0))


def test_gathered_adjoint_into_a_gradient_shared_with_a_scatter(device):
    idx, idx_g = _idx(device, 2)
    rng = np.random.default_rng(3)
    x = gk.array(rng.uniform(-1, 1, N).astype(np.float32), device=device, requires_grad=True)
    out = gk.zeros(N, device=device, requires_grad=True)
    seed = rng.integers(1, 4, N).astype(np.float32)      # small integers: every sum exact in float32
    tape = gk.Tape()
    with tape:
        gk.launch(stencil_and_gather, N, inputs=[x, x, idx_g], outputs=[out], device=device)
    reps = 8
    for _ in range(reps):     # gradients accumulate: every pass's adds must land
        tape.backward(grads={out: gk.array(seed, device=device)})
    want = seed.astype(np.float64).copy()
    want[:-1] += seed[1:]
    want[1:] += seed[:-1]
    want += np.bincount(idx, weights=seed, minlength=N)
    np.testing.assert_array_equal(x.grad.numpy(), reps * want)


@pytest.mark.parametrize("n", [1000, N])
def test_distinct_arrays_keep_their_fast_paths_right(device, n):
    idx = np.random.default_rng(4).integers(0, n, n).astype(np.int32)
    a, b = gk.zeros(n, device=device), gk.zeros(n, device=device)
    gk.launch(own_and_scattered, n, inputs=[gk.array(idx, dtype=int, device=device), a, b], device=device)
    np.testing.assert_array_equal(a.numpy(), np.ones(n))
    np.testing.assert_array_equal(b.numpy(), np.bincount(idx, minlength=n))


def test_own_element_adjoint_into_a_gradient_shared_with_a_scatter(device):
    idx, idx_g = _idx(device, 6)
    x = gk.zeros(N, device=device, requires_grad=True)
    out = gk.zeros(N, device=device, requires_grad=True)
    seed = np.random.default_rng(7).integers(1, 4, N).astype(np.float32)
    tape = gk.Tape()
    with tape:
        gk.launch(own_and_gather, N, inputs=[x, x, idx_g], outputs=[out], device=device)
    reps = 8
    for _ in range(reps):
        tape.backward(grads={out: gk.array(seed, device=device)})
    want = 2.0 * seed + np.bincount(idx, weights=seed, minlength=N)
    np.testing.assert_array_equal(x.grad.numpy(), reps * want)


@pytest.mark.parametrize("kernel", [stencil_and_gather, own_and_gather])
def test_adjoints_with_plain_adds_are_not_chosen_for_shared_gradients(device, kernel):
    """The races above are rare in a run; which adjoint a launch takes is certain: the one whose adds into
    its own elements are atomics again, when two gradients it writes are one array."""
    from gradkit.runtime.launch.launch import prepare_adjoint
    idx, idx_g = _idx(device, 5)
    x, y = (gk.zeros(N, device=device, requires_grad=True) for _ in range(2))
    out = gk.zeros(N, device=device, requires_grad=True)
    shared = prepare_adjoint(kernel, (N,), [x, x, idx_g], [out], device)
    apart = prepare_adjoint(kernel, (N,), [x, y, idx_g], [out], device)
    assert apart.spec.exclusive and not shared.spec.exclusive
    # the launch path decides the same way
    g = gk.zeros(N, device=device)
    gk.launch(kernel, N, inputs=[x, x, idx_g], outputs=[out], adjoint=True, adj_inputs=[g, g, None],
              adj_outputs=[gk.full(N, 1.0, device=device)], device=device)
    want = np.bincount(idx, minlength=N) + (2.0 if kernel is own_and_gather else 3.0)
    if kernel is stencil_and_gather:
        want[[0, -1]] -= 1.0
    np.testing.assert_array_equal(g.numpy(), want)


@gk.kernel
def squares_twice(u: gk.array(dtype=float), v: gk.array(dtype=float), idx: gk.array(dtype=int),
                  out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = u[i] * u[i] + v[idx[i]] * v[idx[i]]


def test_forward_over_reverse_with_one_array_passed_twice(device, monkeypatch):
    """Hessian-vector products (ForwardMode around a backward) take the atomic adjoint too."""
    idx, idx_g = _idx(device, 8)
    rng = np.random.default_rng(9)
    x_np = rng.integers(-3, 4, N).astype(np.float32)         # small integers: sums exact in float32
    s_np = rng.integers(-2, 3, N).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    out = gk.zeros(N, device=device, requires_grad=True)
    variants = []
    spec_of = squares_twice.specialization
    monkeypatch.setattr(squares_twice, "specialization",
                        lambda dev, variant="forward": variants.append(variant) or spec_of(dev, variant))
    with gk.ForwardMode(seeds={x: gk.array(s_np, device=device)}):
        tape = gk.Tape()
        with tape:
            gk.launch(squares_twice, N, inputs=[x, x, idx_g], outputs=[out], device=device)
        tape.backward(grads={out: gk.full(N, 1.0, device=device)})
    count = np.bincount(idx, minlength=N)
    np.testing.assert_array_equal(x.grad.numpy(), 2.0 * x_np * (1 + count))
    np.testing.assert_array_equal(x.grad.dual.numpy(), 2.0 * s_np * (1 + count))
    assert variants[-1].name == "adjoint_shared_tangent"
