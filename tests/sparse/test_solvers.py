"""gk.linalg: cg on an SPD 2-D Laplacian, bicgstab and gmres on a non-symmetric system (every device,
against SciPy's direct solve), Jacobi / block-Jacobi preconditioners, matrix-free operators; and the
implicit gradient of each solve against the closed form, central differences and unrolled CG."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import gradkit as gk
from gradkit import linalg as L
from gradkit import sparse as S


def laplacian(n: int) -> sp.csr_matrix:
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    I = sp.identity(n)
    return (sp.kron(I, T) + sp.kron(T, I)).tocsr()


def nonsymmetric(n: int, rng) -> sp.csr_matrix:
    K = laplacian(n)
    return (K + 0.8 * sp.diags(rng.uniform(0.5, 1.0, K.shape[0] - 1), 1)).tocsr()


@pytest.mark.parametrize("method, M", [("cg", None), ("cg", "diag"), ("bicgstab", "diag"), ("gmres", None)])
def test_solvers_converge(device, rng, method, M):
    K = laplacian(8) if method == "cg" else nonsymmetric(8, rng)
    b = rng.standard_normal(K.shape[0])
    x = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
    it, res = getattr(L, method)(S.from_scipy(K, device=device), gk.array(b, device=device), x, tol=1e-10, M=M)
    ref = spla.spsolve(K.tocsc(), b)
    assert 0 < it < 200 and res <= 1e-10 * np.linalg.norm(b)
    np.testing.assert_allclose(x.numpy(), ref, atol=1e-8)
    assert np.linalg.norm(b - K @ x.numpy()) == pytest.approx(res, rel=1e-3, abs=1e-12)


@pytest.mark.parametrize("method", ["cg", "bicgstab", "gmres"])
@pytest.mark.parametrize("M", ["diag", "block_diag"])
def test_block_systems_and_float32(rng, method, M):
    """3x3 blocks (an SPD block Laplacian coupled inside blocks), float64 and float32, both preconditioners."""
    K = laplacian(5)
    C = rng.standard_normal((3, 3))
    B = sp.kron(K, np.eye(3)) + sp.kron(sp.identity(K.shape[0]), C @ C.T + np.eye(3))
    if method != "cg":
        B = B + 0.3 * sp.kron(sp.diags(np.ones(K.shape[0] - 1), 1), np.eye(3))
    b = rng.standard_normal(B.shape[0])
    ref = spla.spsolve(B.tocsc(), b)
    for dtype, tol, atol in ((gk.float64, 1e-10, 1e-8), (gk.float32, 1e-5, 1e-3)):
        A = S.from_scipy(sp.bsr_matrix(B, blocksize=(3, 3)), dtype=dtype)
        x = gk.zeros(A.nrow, dtype=A.vector_type)
        bb = gk.array(b.reshape(-1, 3), dtype=A.vector_type)
        it, res = getattr(L, method)(A, bb, x, tol=tol, M=M, maxiter=400)
        np.testing.assert_allclose(x.numpy().reshape(-1), ref, atol=atol)


def test_linear_operator_and_callable_preconditioner(rng):
    K = laplacian(6)
    A = S.from_scipy(K)
    b = rng.standard_normal(K.shape[0])
    P = L.preconditioner(A, "diag")
    op = L.LinearOperator(K.shape[0], gk.float64, "cpu", lambda x, y: S.bsr_mv(A, x, y), symmetric=True)
    x = gk.zeros(K.shape[0], dtype=gk.float64)
    it, res = L.cg(op, gk.array(b), x, tol=1e-10, M=lambda r, z: S.bsr_mv(P, r, z))
    np.testing.assert_allclose(x.numpy(), spla.spsolve(K.tocsc(), b), atol=1e-8)
    it2, _ = L.cg(A, gk.array(b), gk.zeros(K.shape[0], dtype=gk.float64), tol=1e-10, maxiter=3)
    assert it2 == 3
    with pytest.raises(ValueError, match="unroll"):
        L.gmres(A, gk.array(b), x, backward="unroll") if False else L.solvers._solve(
            "gmres", A, gk.array(b), x, 1e-6, 0.0, None, None, "unroll")


def spd_triplets(rng, n):
    r, c = rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n)
    w = rng.uniform(0.1, 1.0, 2 * n)
    rows = np.concatenate([r, c, np.arange(n)])
    cols = np.concatenate([c, r, np.arange(n)])
    vals = np.concatenate([w, w, np.full(n, 6.0)])
    return rows, cols, vals


def solve_loss(device, rows, cols, vals, b, w, method, backward="implicit", grad=True, tol=1e-12,
               maxiter=500):
    """loss = w · x with A x = b; returns (loss, dloss/dtriplet values, dloss/db)."""
    n = b.size
    tv = gk.array(vals, device=device, requires_grad=grad)
    tb = gk.array(b, device=device, requires_grad=grad)
    x = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=grad)
    out = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=grad)
    tape = gk.Tape()
    with tape:
        A = S.bsr_from_triplets(n, n, rows, cols, tv)
        kw = {"backward": backward} if method == "cg" else {}
        getattr(L, method)(A, tb, x, tol=tol, maxiter=maxiter, M="diag", **kw)
        S.bsr_mv(S.bsr_from_triplets(1, n, np.zeros(n), np.arange(n), w, device=device), x, out)
    if not grad:
        return float(out.numpy()[0])
    tape.backward(loss=out)
    return float(out.numpy()[0]), tv.grad.numpy(), tb.grad.numpy()


@pytest.mark.parametrize("method", ["cg", "bicgstab", "gmres"])
def test_implicit_gradient_is_the_adjoint_solution(device, rng, method):
    n = 10
    rows, cols, vals = spd_triplets(rng, n)
    if method != "cg":
        vals = vals + np.where(rows < cols, 0.3, 0.0)             # non-symmetric
    b, w = rng.standard_normal(n), rng.standard_normal(n)
    K = np.zeros((n, n))
    np.add.at(K, (rows, cols), vals)
    x, lam = np.linalg.solve(K, b), np.linalg.solve(K.T, w)
    loss, gv, gb = solve_loss(device, rows, cols, vals, b, w, method)
    assert loss == pytest.approx(w @ x, rel=1e-10)
    np.testing.assert_allclose(gb, lam, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gv, -lam[rows] * x[cols], rtol=1e-8, atol=1e-10)   # duplicates share a block


def test_implicit_gradient_matches_central_differences_and_unrolled_cg(rng):
    n = 8
    rows, cols, vals = spd_triplets(rng, n)
    b, w = rng.standard_normal(n), rng.standard_normal(n)
    _, gv, gb = solve_loss("cpu", rows, cols, vals, b, w, "cg")
    eps = 1e-4          # the solves' error (tol 1e-15) over eps stays far below the tolerance checked
    f = lambda v, bb: solve_loss("cpu", rows, cols, v, bb, w, "cg", grad=False, tol=1e-15)
    fd_v = [(f(vals + eps * e, b) - f(vals - eps * e, b)) / (2 * eps) for e in np.eye(vals.size)]
    fd_b = [(f(vals, b + eps * e) - f(vals, b - eps * e)) / (2 * eps) for e in np.eye(n)]
    np.testing.assert_allclose(gv, fd_v, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, fd_b, rtol=1e-6, atol=1e-8)
    # unrolled CG: its iterates' derivatives lag the iterates (at the n-th iteration, where x is exact,
    # they are still ~1e-4 off); after 3n iterations (tol=0) they agree to rounding
    _, uv, ub = solve_loss("cpu", rows, cols, vals, b, w, "cg", backward="unroll", tol=0.0, maxiter=3 * n)
    np.testing.assert_allclose(uv, gv, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ub, gb, rtol=1e-9, atol=1e-12)


def test_solve_is_one_tape_step(rng):
    K = laplacian(4)
    A = S.from_scipy(K, requires_grad=True)
    b = gk.array(rng.standard_normal(K.shape[0]), requires_grad=True)
    x = gk.zeros(K.shape[0], dtype=gk.float64, requires_grad=True)
    tape = gk.Tape()
    with tape:
        it, res = L.cg(A, b, x, tol=1e-8)
    assert len(tape.records) == 1 and tape.records[0].name.startswith(f"cg ({it} iterations")
    assert tape.launches == []


@pytest.mark.parametrize("bs", [1, 3])
@pytest.mark.parametrize("M", [None, "diag", "block_diag"])
def test_fused_cg_takes_the_general_loops_steps(device, rng, bs, M):
    """The fused CG (a BsrMatrix on the CPU, no or a block-diagonal preconditioner) against the general loop
    (the same matrix and preconditioner as matrix-free operators): the same iteration count and solution,
    and SciPy's direct solve; other devices run the general loop both ways."""
    K = laplacian(6)
    C = rng.standard_normal((bs, bs))
    B = sp.kron(K, np.eye(bs)) + sp.kron(sp.identity(K.shape[0]), C @ C.T + np.eye(bs))
    A = S.from_scipy(sp.bsr_matrix(B, blocksize=(bs, bs)), device=device)
    P = None if M is None else L.preconditioner(A, M)
    assert L.fused.fusable(A, P) == (A.device.backend == "cpu")
    b = rng.standard_normal(B.shape[0])
    vec = (lambda v: gk.array(v, dtype=A.vector_type, device=device)) if bs == 1 else (
        lambda v: gk.array(v.reshape(-1, bs), dtype=A.vector_type, device=device))
    x_fused, x_loop = vec(np.zeros(B.shape[0])), vec(np.zeros(B.shape[0]))
    op = L.LinearOperator(A.nrow, A.vector_type, device, lambda u, y: S.bsr_mv(A, u, y), symmetric=True)
    precondition = None if P is None else (lambda r, z: S.bsr_mv(P, r, z))
    assert not L.fused.fusable(op, None)
    it_f, res_f = L.cg(A, vec(b), x_fused, tol=1e-10, M=P)
    it_l, res_l = L.cg(op, vec(b), x_loop, tol=1e-10, M=precondition)
    assert it_f == it_l and res_f == pytest.approx(res_l, rel=1e-6, abs=1e-13)
    np.testing.assert_allclose(x_fused.numpy(), x_loop.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(x_fused.numpy().reshape(-1), spla.spsolve(B.tocsc(), b), atol=1e-8)
    assert np.linalg.norm(b - B @ x_fused.numpy().reshape(-1)) == pytest.approx(res_f, rel=1e-3, abs=1e-12)
    it_3, _ = L.cg(A, vec(b), vec(np.zeros(B.shape[0])), tol=1e-10, M=P, check_every=3)
    assert it_f <= it_3 < it_f + 3 or it_3 == 2 * B.shape[0]


@pytest.mark.parametrize("method", ["cg", "bicgstab", "gmres"])
def test_block_implicit_gradient_is_the_adjoint_solution(device, rng, method):
    """3x3 blocks, block-Jacobi: dloss/db = λ and dloss/dA = −λ xᵀ on A's pattern (Aᵀλ = w, loss = w·x),
    from float64 dense solves."""
    nb, bs = 6, 3
    K = laplacian(3)[:nb, :nb].toarray()
    D = np.kron(K, np.eye(bs)) + np.kron(np.eye(nb), 0.5 * np.eye(bs))
    D = D + 0.1 * np.kron(np.abs(K) > 0, rng.standard_normal((bs, bs)) @ np.eye(bs) * 0.5)
    if method == "cg":
        D = 0.5 * (D + D.T)
    A = S.from_scipy(sp.bsr_matrix(D, blocksize=(bs, bs)), device=device, requires_grad=True)
    Dd = A.to_dense().astype(np.float64)
    b, w = rng.standard_normal(nb * bs), rng.standard_normal(nb * bs)
    tb = gk.array(b.reshape(-1, bs), dtype=gk.vec3d, device=device, requires_grad=True)
    x = gk.zeros(nb, dtype=gk.vec3d, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        getattr(L, method)(A, tb, x, tol=1e-13, M="block_diag", maxiter=400)
    tape.backward(grads={x: gk.array(w.reshape(-1, bs), dtype=gk.vec3d, device=device)})
    xs, lam = np.linalg.solve(Dd, b), np.linalg.solve(Dd.T, w)
    np.testing.assert_allclose(x.numpy().reshape(-1), xs, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(tb.grad.numpy().reshape(-1), lam, rtol=1e-8, atol=1e-10)
    full = -np.outer(lam, xs)
    rows, (_, cols) = A.block_rows(), A.structure()
    expected = np.array([full[r * bs:(r + 1) * bs, c * bs:(c + 1) * bs] for r, c in zip(rows, cols)])
    np.testing.assert_allclose(A.values.grad.numpy(), expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("method", ["cg", "bicgstab", "gmres"])
def test_each_solvers_gradient_matches_central_differences(device, rng, method):
    """The implicit gradient of every solver (non-symmetric A for bicgstab and gmres) w.r.t. the triplet
    values and b, against central differences of the same solver's loss at tol 1e-15, on every device."""
    n = 8
    rows, cols, vals = spd_triplets(rng, n)
    if method != "cg":
        vals = vals + np.where(rows < cols, 0.3, 0.0)
    b, w = rng.standard_normal(n), rng.standard_normal(n)
    _, gv, gb = solve_loss(device, rows, cols, vals, b, w, method)
    eps = 1e-4
    f = lambda v, bb: solve_loss(device, rows, cols, v, bb, w, method, grad=False, tol=1e-15)
    for i in rng.choice(vals.size, 6, replace=False):
        e = np.zeros(vals.size)
        e[i] = eps
        assert gv[i] == pytest.approx((f(vals + e, b) - f(vals - e, b)) / (2 * eps), rel=1e-6, abs=1e-8)
    for i in rng.choice(n, 3, replace=False):
        e = np.zeros(n)
        e[i] = eps
        assert gb[i] == pytest.approx((f(vals, b + e) - f(vals, b - e)) / (2 * eps), rel=1e-6, abs=1e-8)
