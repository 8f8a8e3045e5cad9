"""gk.svd3, gk.svd2, gk.qr3, gk.eig3 and gk.polar_decompose in kernels, on every device: values against
NumPy float64 (np.linalg.svd / qr / eigh with Warp's sign and order conventions applied here), reverse
mode (gk.Tape) and forward mode (gk.ForwardMode) against central differences of those references, in
float64 and float32; degenerate inputs (identity, repeated values, rank deficiency, zero) give finite
values and gradients, exact wherever the quantity is differentiable there; the out-argument form, calls
from @gk.func and compile errors."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk

# --------------------------------------------------------------------------- float64 references

D3, D2 = np.diag([1.0, 2.0, 3.0]), np.diag([1.0, 2.0])


def np_svd(a):
    """Warp's convention: rotations U, V; |sigma| decreasing; the last sigma carries det(A)'s sign."""
    u, s, vt = np.linalg.svd(a)
    v = vt.T.copy()
    for m in (u, v):
        if np.linalg.det(m) < 0:
            m[:, -1] *= -1
            s[-1] *= -1
    return u, s, v


def np_qr(a):
    q, r = np.linalg.qr(a)
    sg = np.where(np.diag(r) < 0, -1.0, 1.0)
    q, r = q * sg, r * sg[:, None]
    if np.linalg.det(q) < 0:
        q[:, -1] *= -1
        r[-1] *= -1
    return q, r


def np_polar(a):
    u, s, v = np_svd(a)
    r = u @ v.T
    p = r.T @ a
    return r, (p + p.T) / 2


def _batch(fn, a):
    outs = [fn(m) for m in a]
    return [np.stack([o[k] for o in outs]) for k in range(len(outs[0]))]


def ref_svd(a):
    """Outputs independent of the sign a pair of singular vectors shares: sigma, U D Vᵀ, U D Uᵀ, V D Vᵀ."""
    def one(m):
        u, s, v = np_svd(m)
        d = D3 if len(m) == 3 else D2
        return s, u @ d @ v.T, u @ d @ u.T, v @ d @ v.T
    return _batch(one, a)


def ref_eig(a):
    def one(m):
        d, q = np.linalg.eigh((m + m.T) / 2)
        return d, q @ D3 @ q.T
    return _batch(one, a)


def ref_qr(a):
    return _batch(np_qr, a)


def ref_polar(a):
    return _batch(np_polar, a)


# --------------------------------------------------------------------------- kernels per precision

_KERNELS: dict = {}


def kernels(dt):
    if dt in _KERNELS:
        return _KERNELS[dt]
    M3, V3, M2, V2 = gk.matrix((3, 3), dt), gk.vector(3, dt), gk.matrix((2, 2), dt), gk.vector(2, dt)
    A3, A2, AV3, AV2 = gk.array(dtype=M3), gk.array(dtype=M2), gk.array(dtype=V3), gk.array(dtype=V2)

    @gk.kernel
    def svd3_k(A: A3, s: AV3, X: A3, Y: A3, Z: A3):
        i = gk.tid()
        U, sg, V = gk.svd3(A[i])
        D = M3(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)
        s[i] = sg
        X[i] = U @ D @ gk.transpose(V)
        Y[i] = U @ D @ gk.transpose(U)
        Z[i] = V @ D @ gk.transpose(V)

    @gk.kernel
    def svd3_out_k(A: A3, s: AV3, X: A3, Y: A3, Z: A3):      # Warp's out-argument form
        i = gk.tid()
        U = M3()
        sg = V3()
        V = M3()
        gk.svd3(A[i], U, sg, V)
        D = M3(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)
        s[i] = sg
        X[i] = U @ D @ gk.transpose(V)
        Y[i] = U @ D @ gk.transpose(U)
        Z[i] = V @ D @ gk.transpose(V)

    @gk.kernel
    def svd2_k(A: A2, s: AV2, X: A2, Y: A2, Z: A2):
        i = gk.tid()
        U, sg, V = gk.svd2(A[i])
        D = M2(1.0, 0.0, 0.0, 2.0)
        s[i] = sg
        X[i] = U @ D @ gk.transpose(V)
        Y[i] = U @ D @ gk.transpose(U)
        Z[i] = V @ D @ gk.transpose(V)

    @gk.kernel
    def eig3_k(A: A3, d: AV3, Y: A3):
        i = gk.tid()
        Q = M3()
        e = V3()
        gk.eig3(A[i], Q, e)
        d[i] = e
        Y[i] = Q @ M3(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0) @ gk.transpose(Q)

    @gk.kernel
    def qr3_k(A: A3, Q: A3, R: A3):
        i = gk.tid()
        q, r = gk.qr3(A[i])
        Q[i] = q
        R[i] = r

    @gk.kernel
    def polar3_k(A: A3, U: A3, P: A3):
        i = gk.tid()
        u, p = gk.polar_decompose(A[i])
        U[i] = u
        P[i] = p

    @gk.kernel
    def polar2_k(A: A2, U: A2, P: A2):
        i = gk.tid()
        u, p = gk.polar_decompose(A[i])
        U[i] = u
        P[i] = p

    _KERNELS[dt] = {"svd3": (svd3_k, ref_svd, 3, 4), "svd3_out": (svd3_out_k, ref_svd, 3, 4),
                    "svd2": (svd2_k, ref_svd, 2, 4), "eig3": (eig3_k, ref_eig, 3, 2),
                    "qr3": (qr3_k, ref_qr, 3, 2), "polar3": (polar3_k, ref_polar, 3, 2),
                    "polar2": (polar2_k, ref_polar, 2, 2)}
    return _KERNELS[dt]


def _rotation(rng, n):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.linalg.det(q))


def well_conditioned(rng, name, count=3):
    """Random matrices whose singular values (eigenvalues for eig3) are well apart, some with det < 0."""
    n = 2 if name.endswith("2") else 3
    out = []
    for k in range(count):
        if name == "eig3":
            lam = np.array([-1.5, 0.3, 1.6]) + rng.uniform(-0.2, 0.2, 3)
            q = _rotation(rng, 3)
            skew = rng.normal(size=(3, 3)) * 0.3
            out.append(q @ np.diag(lam) @ q.T + skew - skew.T)      # eig3 uses the symmetric part
            continue
        sig = (np.array([2.6, 1.4, 0.6]) if n == 3 else np.array([2.0, 0.8]))[:n] + rng.uniform(-0.2, 0.2, n)
        if k % 2:
            sig[-1] = -sig[-1]
        out.append(_rotation(rng, n) @ np.diag(sig) @ _rotation(rng, n).T)
    return np.array(out)


def _arr(x, dt, device, **kw):
    npdt = np.float64 if dt is gk.float64 else np.float32
    n = x.shape[-1]
    t = gk.matrix((n, n), dt) if x.ndim == 3 else gk.vector(n, dt)
    return gk.array(np.asarray(x, dtype=npdt), dtype=t, device=device, **kw)


def run(name, a, dt, device, grads=None, tangent=None):
    """Launch decomposition kernel `name` on the matrices `a`; optionally a backward pass seeded with
    `grads` (returns A.grad) or a forward-mode pass along `tangent` (returns the output duals)."""
    kern, ref, n, nout = kernels(dt)[name]
    A = _arr(a, dt, device, requires_grad=grads is not None)
    shapes = [o.shape for o in ref(a)]
    outs = [_arr(np.zeros(s), dt, device, requires_grad=grads is not None) for s in shapes]
    if grads is not None:
        tape = gk.Tape()
        with tape:
            gk.launch(kern, len(a), inputs=[A, *outs], device=device)
        tape.backward(grads={o: _arr(g, dt, device) for o, g in zip(outs, grads)})
        return [o.numpy() for o in outs], A.grad.numpy()
    if tangent is not None:
        with gk.ForwardMode(seeds={A: _arr(tangent, dt, device)}):
            gk.launch(kern, len(a), inputs=[A, *outs], device=device)
        return [o.numpy() for o in outs], [o.dual.numpy() for o in outs]
    gk.launch(kern, len(a), inputs=[A, *outs], device=device)
    return [o.numpy() for o in outs], None


def fd_vjp(ref, a, ws, eps=1e-6):
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[idx] += eps
        lo[idx] -= eps
        g[idx] = sum(np.sum(w * (p - m)) for w, p, m in zip(ws, ref(hi), ref(lo))) / (2 * eps)
    return g


def fd_jvp(ref, a, v, eps=1e-6):
    return [(p - m) / (2 * eps) for p, m in zip(ref(a + eps * v), ref(a - eps * v))]


NAMES = ["svd3", "svd3_out", "svd2", "eig3", "qr3", "polar3", "polar2"]
PRECISION = {gk.float64: dict(val=1e-10, grad=1e-6), gk.float32: dict(val=2e-5, grad=2e-3)}


def _close(got, want, tol, what):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale, err_msg=what)


# --------------------------------------------------------------------------- values and gradients

@pytest.mark.parametrize("dt", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", NAMES)
def test_values_match_numpy(name, dt, device, rng):
    a = well_conditioned(rng, name, 4)
    a = a.astype(np.float32).astype(np.float64) if dt is gk.float32 else a
    got, _ = run(name, a, dt, device)
    for k, (g, w) in enumerate(zip(got, kernels(dt)[name][1](a))):
        _close(g, w, PRECISION[dt]["val"], f"{name} output {k} on {device}")


@pytest.mark.parametrize("dt", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", NAMES)
def test_reverse_mode_matches_central_differences(name, dt, device, rng):
    a = well_conditioned(rng, name)
    a = a.astype(np.float32).astype(np.float64) if dt is gk.float32 else a
    ref = kernels(dt)[name][1]
    ws = [rng.normal(size=o.shape) for o in ref(a)]
    _, grad = run(name, a, dt, device, grads=ws)
    _close(grad, fd_vjp(ref, a, ws), PRECISION[dt]["grad"], f"{name} gradient on {device}")


@pytest.mark.parametrize("dt", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", NAMES)
def test_forward_mode_matches_central_differences(name, dt, device, rng):
    a = well_conditioned(rng, name)
    a = a.astype(np.float32).astype(np.float64) if dt is gk.float32 else a
    ref = kernels(dt)[name][1]
    v = rng.normal(size=a.shape)
    _, duals = run(name, a, dt, device, tangent=v)
    for k, (d, want) in enumerate(zip(duals, fd_jvp(ref, a, v))):
        _close(d, want, PRECISION[dt]["grad"], f"{name} tangent of output {k} on {device}")


def test_svd_gradient_matches_the_analytic_formulas(device, rng):
    """dσᵢ = uᵢᵀ dA vᵢ, and the rotation's derivative U·skew·Vᵀ with (Eᵢⱼ - Eⱼᵢ)/(σᵢ + σⱼ), E = Uᵀ dA V."""
    a = well_conditioned(rng, "svd3", 2)
    ws = [np.zeros((2, 3)), np.zeros((2, 3, 3)), np.zeros((2, 3, 3)), np.zeros((2, 3, 3))]
    ws[0][:, 1] = 1.0                      # the middle singular value
    _, grad = run("svd3", a, gk.float64, device, grads=ws)
    for k in range(2):
        u, s, v = np_svd(a[k])
        np.testing.assert_allclose(grad[k], np.outer(u[:, 1], v[:, 1]), atol=1e-10)
        dA = rng.normal(size=(3, 3))
        dr = run("polar3", a[k:k + 1], gk.float64, device, tangent=dA[None])[1][0][0]
        e = u.T @ dA @ v
        h = np.array([[0 if i == j else (e[i, j] - e[j, i]) / (s[i] + s[j]) for j in range(3)]
                      for i in range(3)])
        np.testing.assert_allclose(dr, u @ h @ v.T, atol=1e-9)


# --------------------------------------------------------------------------- degenerate inputs

DEGENERATE = {
    "identity": np.eye(3),
    "repeated": np.diag([2.0, 2.0, 1.0]),
    "rotated_repeated": None,           # R diag(2, 2, 1) Rᵀ with a random rotation, filled in by the test
    "rank2": np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 0.5], [3.0, 3.0, 3.5]]),
    "rank1": np.outer([1.0, -2.0, 0.5], [0.3, 1.0, 2.0]),
    "zero": np.zeros((3, 3)),
}

# What stays differentiable at each degenerate input (checked against central differences there): the sum
# of the (signed) singular values and the polar factors wherever σᵢ + σⱼ ≠ 0, the eigenvalues' sum and
# sum of squares, and QR of a full-rank matrix.
SMOOTH = {
    "identity": {"sigma_sum", "polar", "eig", "qr"},
    "repeated": {"sigma_sum", "polar", "eig", "qr"},
    "rotated_repeated": {"sigma_sum", "polar", "eig", "qr"},
    "rank2": {"sigma_sum", "polar", "eig"},
    "rank1": {"eig"},
    "zero": {"eig"},
}


def _degenerate(which, rng):
    if which == "rotated_repeated":
        q = _rotation(rng, 3)
        return q @ np.diag([2.0, 2.0, 1.0]) @ q.T
    return DEGENERATE[which]


@pytest.mark.parametrize("dt", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("which", list(DEGENERATE))
def test_degenerate_inputs_are_finite_and_exact_where_differentiable(which, dt, device, rng):
    a = _degenerate(which, rng)[None]
    tol = PRECISION[dt]["grad"] * (1 if dt is gk.float64 else 5)
    smooth = SMOOTH[which]
    for name in ("svd3", "eig3", "qr3", "polar3"):
        ref = kernels(dt)[name][1]
        shapes = [o.shape for o in ref(a)]
        ws = [rng.normal(size=s) for s in shapes]
        v = rng.normal(size=a.shape)
        outs, grad = run(name, a, dt, device, grads=ws)
        _, duals = run(name, a, dt, device, tangent=v)
        assert all(np.isfinite(o).all() for o in outs), (name, which, outs)
        assert np.isfinite(grad).all() and all(np.isfinite(d).all() for d in duals), (name, which)
        # the factors reconstruct A
        if name == "qr3":
            q, r = outs
            _close(q[0] @ r[0], a[0], PRECISION[dt]["val"] * 10, f"QR of {which}")
            _close(q[0].T @ q[0], np.eye(3), PRECISION[dt]["val"] * 10, f"Q of {which}")
            assert np.allclose(np.tril(r[0], -1), 0)
        if name == "polar3":
            u, p = outs
            _close(u[0] @ p[0], a[0], PRECISION[dt]["val"] * 10, f"polar of {which}")
            assert np.linalg.det(u[0]) == pytest.approx(1.0, abs=1e-4)
        # derivatives that exist at this input: against central differences of the reference
        checks = []
        if name == "svd3" and "sigma_sum" in smooth:
            checks.append(([np.ones((1, 3)), *(np.zeros_like(w) for w in ws[1:])], lambda m: [ref_svd(m)[0]]))
        if name == "eig3":
            checks.append(([np.ones((1, 3)), np.zeros((1, 3, 3))], lambda m: [ref_eig(m)[0]]))
            d = ref_eig(a)[0]
            checks.append(([2 * d, np.zeros((1, 3, 3))], lambda m: [ref_eig(m)[0]]))   # Σ dᵢ² to first order
        if (name == "polar3" and "polar" in smooth) or (name == "qr3" and "qr" in smooth):
            checks.append((ws, ref))
        for seeds, loss_ref in checks:
            _, g = run(name, a, dt, device, grads=seeds)
            want = fd_vjp(lambda m: loss_ref(m), a, [s for s in seeds[:len(loss_ref(a))]], eps=1e-6)
            _close(g, want, tol, f"{name} gradient at {which} on {device}")
        if (name == "polar3" and "polar" in smooth) or (name == "qr3" and "qr" in smooth):
            for k, (d, want) in enumerate(zip(duals, fd_jvp(ref, a, v))):
                _close(d, want, tol, f"{name} tangent {k} at {which} on {device}")


def test_degenerate_2x2(device, rng):
    for a in (np.eye(2), np.zeros((2, 2)), np.array([[1.0, 2.0], [2.0, 4.0]]), 3 * _rotation(rng, 2)):
        for name in ("svd2", "polar2"):
            ref = kernels(gk.float64)[name][1]
            ws = [rng.normal(size=o.shape) for o in ref(a[None])]
            outs, grad = run(name, a[None], gk.float64, device, grads=ws)
            assert np.isfinite(grad).all() and all(np.isfinite(o).all() for o in outs)
        u, p = run("polar2", a[None], gk.float64, device)[0]
        _close(u[0] @ p[0], a, 1e-12, "polar2")
        s = run("svd2", a[None], gk.float64, device)[0][0][0]
        _close(s, np_svd(a)[1], 1e-12, "svd2 singular values")


# --------------------------------------------------------------------------- language forms and errors

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
        assert "test_decompositions.py:" in str(exc.value) and "^" in str(exc.value)


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
