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
from tests.ad.decomposition_cases import (NAMES, PRECISION, _close, _rotation, fd_jvp, fd_vjp, kernels, np_svd, ref_eig,
                                          ref_svd, run, well_conditioned)

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
