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


@gk.func
def transform(v: gk.vec3, m: gk.mat33) -> (gk.vec3, float):
    return m @ v, gk.dot(v, v)


@gk.func_grad(transform)
def adj_transform(v: gk.vec3, m: gk.mat33, adj_mv: gk.vec3, adj_vv: float):
    # the exact adjoint, except that the v-gradient is doubled: the test can tell it ran
    gk.adjoint[v] += 2.0 * (gk.transpose(m) @ adj_mv + 2.0 * adj_vv * v)
    gk.adjoint[m] += gk.outer(adj_mv, v)


@gk.kernel
def run_transform(vs: gk.array(dtype=gk.vec3), ms: gk.array(dtype=gk.mat33), out: gk.array(dtype=gk.vec3),
                  sq: gk.array(dtype=float)):
    i = gk.tid()
    mv, vv = transform(vs[i], ms[i])
    out[i] = mv
    sq[i] = vv


def test_custom_grad_on_vec_and_mat_arguments_with_two_outputs(device, rng):
    n = 7
    v0 = rng.standard_normal((n, 3)).astype(np.float32)
    m0 = rng.standard_normal((n, 3, 3)).astype(np.float32)
    go, gs = rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    vs = gk.array(v0, dtype=gk.vec3, device=device, requires_grad=True)
    ms = gk.array(m0, dtype=gk.mat33, device=device, requires_grad=True)
    out = gk.zeros(n, dtype=gk.vec3, device=device, requires_grad=True)
    sq = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(run_transform, n, inputs=[vs, ms], outputs=[out, sq], device=device)
    v, m = v0.astype(np.float64), m0.astype(np.float64)
    np.testing.assert_allclose(out.numpy(), np.einsum("nij,nj->ni", m, v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sq.numpy(), (v * v).sum(1), rtol=1e-5)
    tape.backward(grads={out: go, sq: gs})
    true_v = np.einsum("nji,nj->ni", m, go) + 2 * gs[:, None] * v
    np.testing.assert_allclose(vs.grad.numpy(), 2.0 * true_v, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ms.grad.numpy(), np.einsum("ni,nj->nij", go, v), rtol=1e-4, atol=1e-5)


# A custom gradient whose function and whose adjoint call another function with a custom gradient (vector
# arguments, so the inner bodies must be lowered before they are inlined): forward, reverse, forward mode.

@gk.func
def sq_norm(v: gk.vec3d) -> gk.float64:
    return gk.dot(v, v)


@gk.func_grad(sq_norm)
def adj_sq_norm(v: gk.vec3d, adj_ret: gk.float64):
    gk.adjoint[v] += 2.0 * v * adj_ret


@gk.func
def spring_energy(v: gk.vec3d, k: gk.float64) -> gk.float64:
    return 0.5 * k * sq_norm(v)


@gk.func_grad(spring_energy)
def adj_spring_energy(v: gk.vec3d, k: gk.float64, adj_ret: gk.float64):
    gk.adjoint[v] += k * v * adj_ret
    gk.adjoint[k] += 0.5 * sq_norm(v) * adj_ret          # a custom-gradient call inside a custom adjoint


@gk.kernel
def run_spring_energy(p: gk.array(dtype=gk.vec3d), k: gk.array(dtype=gk.float64), e: gk.array(dtype=gk.float64)):
    i = gk.tid()
    e[i] = spring_energy(p[i], k[i]) + sq_norm(p[i])


def test_custom_grad_calling_custom_grad(device, rng):
    from tests.kernel_check import check
    n = 5
    check(run_spring_energy, n, [rng.normal(size=(n, 3)), rng.uniform(0.5, 2.0, n), np.zeros(n)],
          [gk.vec3d, gk.float64, gk.float64], "iiw",
          lambda p, k, e: (0.5 * k + 1.0) * (p * p).sum(1), device, rng)
