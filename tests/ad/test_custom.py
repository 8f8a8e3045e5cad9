"""Custom gradients and custom replays of device functions (Warp's documented examples)."""

import numpy as np
import pytest

import gradkit as gk


@gk.func
def safe_sqrt(x: float) -> float:
    return gk.sqrt(x)


@gk.func_grad(safe_sqrt)
def adj_safe_sqrt(x: float, adj_ret: float):
    if x > 0.0:
        gk.adjoint[x] += 1.0 / (2.0 * gk.sqrt(x)) * adj_ret


@gk.func
def plain_sqrt(x: float) -> float:
    return gk.sqrt(x)


@gk.kernel
def run_safe_sqrt(xs: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = safe_sqrt(xs[i])


@gk.kernel
def run_plain_sqrt(xs: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = plain_sqrt(xs[i])


@pytest.mark.parametrize("kernel, expected", [
    (run_plain_sqrt, [0.5, 0.35355338, np.inf]),
    (run_safe_sqrt, [0.5, 0.35355338, 0.0]),
], ids=["without", "with"])
def test_safe_sqrt_reference(device, kernel, expected):
    xs = gk.array([1.0, 2.0, 0.0], dtype=gk.float32, device=device, requires_grad=True)
    out = gk.zeros(3, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, 3, inputs=[xs], outputs=[out], device=device)
    tape.backward(grads={out: gk.array([1.0, 1.0, 1.0], dtype=gk.float32, device=device)})
    np.testing.assert_allclose(out.numpy(), np.sqrt([1.0, 2.0, 0.0]), rtol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), expected, rtol=1e-6)


@gk.func
def reversible_increment(counter: gk.array(dtype=int), index: int, value: int,
                         thread_values: gk.array(dtype=int), tid: int) -> int:
    slot = gk.atomic_add(counter, index, value)
    thread_values[tid] = slot
    return slot


@gk.func_replay(reversible_increment)
def replay_reversible_increment(counter: gk.array(dtype=int), index: int, value: int,
                                thread_values: gk.array(dtype=int), tid: int) -> int:
    return thread_values[tid]


@gk.kernel
def gather_sqrt(inp: gk.array(dtype=float), counter: gk.array(dtype=int), thread_values: gk.array(dtype=int),
                out: gk.array(dtype=float)):
    tid = gk.tid()
    idx = reversible_increment(counter, 0, 1, thread_values, tid)
    out[idx] = gk.sqrt(inp[idx])


def test_reversible_increment_replay(device):
    n = 64
    inp = gk.array(np.arange(1, n + 1, dtype=np.float32), device=device, requires_grad=True)
    counter = gk.zeros(1, dtype=gk.int32, device=device)
    thread_values = gk.zeros(n, dtype=gk.int32, device=device)
    out = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(gather_sqrt, n, inputs=[inp, counter, thread_values], outputs=[out], device=device)
    tape.backward(grads={out: gk.array(np.ones(n, np.float32), device=device)})
    i = np.arange(1, n + 1, dtype=np.float64)
    np.testing.assert_allclose(inp.grad.numpy(), 0.5 / np.sqrt(i), rtol=1e-6)
    assert counter.numpy()[0] == n        # the replay did not increment the counter again


def test_custom_grad_signature_is_checked():
    @gk.func
    def f(x: float) -> float:
        return x * x

    @gk.func_grad(f)
    def bad(x: float):
        gk.adjoint[x] += 1.0

    @gk.kernel
    def k(a: gk.array(dtype=float)):
        a[0] = f(a[0])

    with pytest.raises(gk.CompileError, match="must take the 1 inputs of 'f' followed by 1 output adjoint"):
        k.ir(adjoint=True)
