"""The decompositions as the language offers them: Warp's out-argument form re-bound in a loop, calls from
@gk.func, gk.grad/gk.jvp through them, host calls, compile errors, and reverse mode replaying the Jacobi
sweeps without the value stack — on every device."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from tests.ad.decomposition_cases import fd_vjp, kernels, np_polar, np_qr, np_svd, well_conditioned


@gk.func
def frobenius_rotation_error(A: gk.mat33d) -> gk.float64:
    U, P = gk.polar_decompose(A)
    E = A - U
    return gk.trace(gk.transpose(E) @ E)


@gk.kernel
def out_args_in_loop(A: gk.array(dtype=gk.mat33d), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    Q = gk.identity(n=3, dtype=gk.float64)
    R = gk.identity(n=3, dtype=gk.float64)
    M = A[i]
    for _k in range(3):                   # QR iteration: the out-arguments re-bound in a loop
        gk.qr3(M, Q, R)
        M = R @ Q
    out[i] = M[0, 0] + M[1, 1] * 2.0 + M[2, 2] * 3.0 + frobenius_rotation_error(A[i])


def test_out_arguments_in_loops_and_calls_from_funcs(device, rng):
    a = well_conditioned(rng, "svd3", 3)

    def ref(a):
        res = []
        for m0 in a:
            m = m0
            for _ in range(3):
                q, r = np_qr(m)
                m = r @ q
            u, p = np_polar(m0)
            res.append(m[0, 0] + 2 * m[1, 1] + 3 * m[2, 2] + np.sum((m0 - u) ** 2))
        return [np.array(res)]

    A = gk.array(a, dtype=gk.mat33d, device=device, requires_grad=True)
    out = gk.zeros(3, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(out_args_in_loop, 3, inputs=[A, out], device=device)
    np.testing.assert_allclose(out.numpy(), ref(a)[0], atol=1e-10)
    w = rng.normal(size=3)
    tape.backward(grads={out: gk.array(w, device=device)})
    np.testing.assert_allclose(A.grad.numpy(), fd_vjp(ref, a, [w]), atol=1e-6)


def test_host_calls_follow_the_same_conventions(rng):
    for m in well_conditioned(rng, "svd3", 2):
        u, s, v = gk.svd3(m)
        want = np_svd(m)
        np.testing.assert_allclose(s, want[1], atol=1e-12)
        np.testing.assert_allclose(u @ np.diag(s) @ v.T, m, atol=1e-12)
        q, r = gk.qr3(m.astype(np.float32))
        assert q.dtype == np.float32
        np.testing.assert_allclose(q @ r, m, atol=1e-5)
    with pytest.raises(TypeError, match="svd3"):
        gk.svd3(np.eye(2))


def _compile(src_fn):
    k = gk.kernel(src_fn)
    A = gk.zeros(1, dtype=gk.mat33, device="cpu")
    gk.launch(k, 1, inputs=[A], device="cpu")


def test_compile_errors_name_the_problem():
    def wrong_type(A: gk.array(dtype=gk.mat33)):
        v = gk.vec3(1.0, 2.0, 3.0)
        U, s, V = gk.svd3(v)

    def wrong_shape(A: gk.array(dtype=gk.mat33)):
        U, s, V = gk.svd2(A[0])

    def bad_out(A: gk.array(dtype=gk.mat33)):
        s = gk.vec3()
        V = gk.mat33()
        gk.svd3(A[0], A[0], s, V)

    def mistyped_out(A: gk.array(dtype=gk.mat33)):
        U = gk.mat33()
        s = gk.mat33()
        V = gk.mat33()
        gk.svd3(A[0], U, s, V)

    def arity(A: gk.array(dtype=gk.mat33)):
        Q = gk.mat33()
        gk.qr3(A[0], Q)

    for fn, msg in [(wrong_type, "needs a 3x3 float matrix"), (wrong_shape, "needs a 2x2 float matrix"),
                    (bad_out, "out-argument U must be a local variable"),
                    (mistyped_out, "out-argument sigma must be a local variable of type vec3, not mat33"),
                    (arity, "qr3\\(\\) takes a matrix A, or A and the local variables Q, R")]:
        with pytest.raises(gk.CompileError, match=msg) as exc:
            _compile(fn)
        assert "test_decomposition_forms.py:" in str(exc.value) and "^" in str(exc.value)


@gk.kernel
def polar_iteration(A: gk.array(dtype=gk.mat33d), steps: int, out: gk.array(dtype=gk.mat33d)):
    i = gk.tid()
    M = A[i]
    for _k in range(steps):             # many decompositions in one thread's backward pass
        U, P = gk.polar_decompose(M)
        M = M * 0.9 + U * 0.1
    out[i] = M


def test_jacobi_sweeps_are_not_saved_for_the_backward_pass(device, rng):
    """The sweeps run on stop_gradient values, so reverse mode replays them without the value stack: only
    the outer loop's carried matrix is saved, and 300 decompositions in a loop differentiate correctly."""
    for dt, name in ((gk.float64, "svd3"), (gk.float32, "eig3"), (gk.float64, "polar3")):
        assert "push" not in kernels(dt)[name][0].ir(adjoint=True)
    a = well_conditioned(rng, "polar3", 2)
    A = gk.array(a, dtype=gk.mat33d, device=device, requires_grad=True)
    out = gk.zeros(2, dtype=gk.mat33d, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(polar_iteration, 2, inputs=[A, 300, out], device=device)

    def ref(a):
        res = []
        for m in a:
            for _ in range(300):
                m = m * 0.9 + np_polar(m)[0] * 0.1
            res.append(m)
        return [np.array(res)]
    np.testing.assert_allclose(out.numpy(), ref(a)[0], atol=1e-10)
    w = rng.normal(size=(2, 3, 3))
    tape.backward(grads={out: gk.array(w, dtype=gk.mat33d, device=device)})
    np.testing.assert_allclose(A.grad.numpy(), fd_vjp(ref, a, [w]), atol=1e-6)


@gk.func
def top_sigma_plus_top_eig(t: gk.float64) -> gk.float64:
    U, s, V = gk.svd3(gk.mat33d(2.0, t, 0.0, 0.3, 1.0, t * t, 0.1, 0.0, 0.5))
    Q, d = gk.eig3(gk.mat33d(2.0, t, 0.0, t, 1.0, 0.2, 0.0, 0.2, 0.5))
    return s[0] + d[2]


@gk.kernel
def transformed(x: gk.array(dtype=gk.float64), g: gk.array(dtype=gk.float64), t: gk.array(dtype=gk.float64)):
    i = gk.tid()
    g[i] = gk.grad(top_sigma_plus_top_eig)(x[i])
    v, dv = gk.jvp(top_sigma_plus_top_eig)(x[i], 1.0)
    t[i] = dv


def test_grad_and_jvp_transforms_see_through_the_decompositions(device, rng):
    x = rng.uniform(-1, 1, 3)

    def ref(t):
        m = np.array([[2, t, 0], [0.3, 1, t * t], [0.1, 0, 0.5]])
        n = np.array([[2, t, 0], [t, 1, 0.2], [0, 0.2, 0.5]])
        return np.linalg.svd(m, compute_uv=False)[0] + np.linalg.eigvalsh(n)[2]
    g, t = gk.zeros(3, dtype=gk.float64, device=device), gk.zeros(3, dtype=gk.float64, device=device)
    gk.launch(transformed, 3, inputs=[gk.array(x, device=device), g, t], device=device)
    want = [(ref(v + 1e-6) - ref(v - 1e-6)) / 2e-6 for v in x]
    np.testing.assert_allclose(g.numpy(), want, atol=1e-7)
    np.testing.assert_allclose(t.numpy(), want, atol=1e-7)


@gk.kernel
def out_args_after_loop(A: gk.array(dtype=gk.mat33d), out: gk.array(dtype=gk.mat33d)):
    i = gk.tid()
    Q = gk.identity(n=3, dtype=gk.float64)
    R = gk.identity(n=3, dtype=gk.float64)
    for _k in range(2):
        gk.qr3(A[i] * float(_k + 1), Q, R)     # the out-arguments are loop-carried locals
    out[i] = Q @ R


def test_out_arguments_assigned_in_a_loop_are_carried_out_of_it(device, rng):
    """The locals an out-argument call assigns inside a loop hold the last iteration's values after it."""
    a = well_conditioned(rng, "svd3", 2)
    out = gk.zeros(2, dtype=gk.mat33d, device=device)
    gk.launch(out_args_after_loop, 2, inputs=[gk.array(a, dtype=gk.mat33d, device=device), out], device=device)
    np.testing.assert_allclose(out.numpy(), 2 * a, atol=1e-10)
