"""gk.sparse on every device against SciPy: builds (duplicates summed, empty rows), products, transpose,
axpy, scale, diagonal and the SciPy round trip, for 1x1, 2x2 and 3x3 blocks in float64 and float32; and
gradients through bsr_mv (values, x, y for beta) and the triplet build against central differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import gradkit as gk
from gradkit import sparse as S

TOL = {gk.float64: dict(rtol=1e-12, atol=1e-12), gk.float32: dict(rtol=2e-5, atol=2e-5)}
NP = {gk.float64: np.float64, gk.float32: np.float32}


def random_triplets(rng, nrow, ncol, n, bs, empty_rows=(1,)):
    rows = rng.integers(0, nrow, n)
    for e in empty_rows:
        rows[rows == e] = (e + 1) % nrow
    cols = rng.integers(0, ncol, n)
    rows[-3:], cols[-3:] = rows[0], cols[0]              # duplicates, summed
    values = rng.standard_normal((n, bs, bs))
    return rows, cols, values


def dense(nrow, ncol, rows, cols, values):
    bs = values.shape[1]
    D = np.zeros((nrow * bs, ncol * bs))
    for r, c, v in zip(rows, cols, values):
        D[r * bs:(r + 1) * bs, c * bs:(c + 1) * bs] += v
    return D


def vec(data, A, device):
    bs = A.block_size
    return gk.array(data.reshape(-1) if bs == 1 else data.reshape(-1, bs), dtype=A.vector_type, device=device)


def build(rng, nrow, ncol, n, bs, dtype, device):
    rows, cols, values = random_triplets(rng, nrow, ncol, n, bs)
    values = values.astype(NP[dtype])
    A = S.bsr_from_triplets(nrow, ncol, rows, cols, values.reshape(-1) if bs == 1 else values, device=device)
    return A, dense(nrow, ncol, rows, cols, values.astype(np.float64))


@pytest.mark.parametrize("dtype", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("bs", [1, 2, 3])
def test_operations_match_scipy(device, rng, bs, dtype):
    tol = TOL[dtype]
    nrow, ncol = int(rng.integers(5, 12)), int(rng.integers(4, 10))
    A, D = build(rng, nrow, ncol, 3 * nrow, bs, dtype, device)
    assert A.shape == D.shape and A.block_shape == (bs, bs) and A.dtype is dtype
    assert A.offsets.numpy()[2] == A.offsets.numpy()[1]                 # row 1 is empty
    ref = sp.bsr_matrix(sp.csr_matrix(D), blocksize=(bs, bs))
    ref.eliminate_zeros()
    np.testing.assert_allclose(A.to_scipy().toarray(), D, **tol)
    assert A.nnz == len({(r, c) for r, c in zip(A.block_rows(), A.columns.numpy())})
    # y = alpha A x + beta y
    xs, ys = rng.standard_normal(ncol * bs), rng.standard_normal(nrow * bs)
    y = S.bsr_mv(A, vec(xs, A, device))
    np.testing.assert_allclose(y.numpy().reshape(-1), ref @ xs, **tol)
    y = S.bsr_mv(A, vec(xs, A, device), vec(ys, A, device), alpha=-0.5, beta=2.0)
    np.testing.assert_allclose(y.numpy().reshape(-1), -0.5 * (ref @ xs) + 2.0 * ys, **tol)
    # transpose, axpy (pattern union), product, diagonal, scale, identity, diag
    T = S.bsr_transposed(A)
    np.testing.assert_allclose(T.to_scipy().toarray(), D.T, **tol)
    B, DB = build(rng, nrow, ncol, nrow, bs, dtype, device)
    S.bsr_axpy(A, B, alpha=2.0, beta=-3.0)
    np.testing.assert_allclose(B.to_dense(), 2.0 * D - 3.0 * DB, **tol)
    P = S.bsr_mm(A, T)
    np.testing.assert_allclose(P.to_scipy().toarray(), (ref @ ref.T).toarray(), rtol=10 * tol["rtol"],
                               atol=10 * tol["atol"])
    C, DC = build(rng, nrow, nrow, nrow, bs, dtype, device)
    S.bsr_mm(A, T, C, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(C.to_dense(), 0.5 * D @ D.T + 2.0 * DC, rtol=10 * tol["rtol"], atol=10 * tol["atol"])
    diag = S.bsr_get_diag(P).numpy().reshape(nrow, bs, bs)
    PD = P.to_dense()
    for r in range(nrow):
        np.testing.assert_allclose(diag[r], PD[r * bs:(r + 1) * bs, r * bs:(r + 1) * bs], **tol)
    S.bsr_scale(A, 3.0)
    np.testing.assert_allclose(A.to_dense(), 3.0 * D, **tol)
    np.testing.assert_allclose(S.bsr_identity(4, (bs, bs), dtype, device).to_dense(), np.eye(4 * bs))
    F = S.from_scipy(ref, device=device, dtype=dtype)
    np.testing.assert_allclose(F.to_dense(), D, **tol)
    assert F.block_size == bs and F.device.name == gk.get_device(device).name
    Z = S.bsr_zeros(3, 4, (bs, bs), dtype, device)
    assert Z.nnz == 0 and Z.to_scipy().shape == (3 * bs, 4 * bs)
    np.testing.assert_allclose(S.bsr_mv(Z, gk.zeros(4, dtype=Z.vector_type, device=device)).numpy(), 0.0)


def test_builds_and_set_from_triplets(device, rng):
    E = S.bsr_diag(np.array([1.0, 2.0, 3.0]), device=device)
    np.testing.assert_allclose(E.to_dense(), np.diag([1.0, 2.0, 3.0]))
    blocks = rng.standard_normal((4, 2, 2))
    np.testing.assert_allclose(S.bsr_diag(blocks, device=device).to_dense(), dense(4, 4, range(4), range(4), blocks))
    A = S.bsr_zeros(5, 5, (2, 2), gk.float64, device)
    rows, cols, values = random_triplets(rng, 5, 5, 12, 2)
    assert S.bsr_set_from_triplets(A, rows, cols, values) is A
    np.testing.assert_allclose(A.to_dense(), dense(5, 5, rows, cols, values), atol=1e-14)
    np.testing.assert_allclose(S.to_scipy(A).toarray(), A.to_dense())
    with pytest.raises(ValueError, match="outside"):
        S.bsr_from_triplets(2, 2, [0, 2], [0, 0], np.ones(2), device=device)
    with pytest.raises(ValueError, match="block_shape"):
        S.bsr_zeros(2, 2, (4, 4))
    with pytest.raises(TypeError, match="dtype"):
        S.bsr_mv(A, gk.zeros(5 * 2, dtype=gk.float64, device=device))


def _central(f, x0: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    g = np.zeros(x0.size)
    for i in range(x0.size):
        e = np.zeros(x0.size)
        e[i] = eps
        g[i] = (f((x0.ravel() + e).reshape(x0.shape)) - f((x0.ravel() - e).reshape(x0.shape))) / (2 * eps)
    return g.reshape(x0.shape)


@pytest.mark.parametrize("bs", [1, 3])
def test_bsr_mv_gradients_match_central_differences(device, rng, bs):
    """loss = w · (alpha A x + beta y): gradients w.r.t. the triplet values (through the build), x and y."""
    nrow, ncol = 5, 4
    rows, cols, values = random_triplets(rng, nrow, ncol, 9, bs)
    values = values.reshape(-1) if bs == 1 else values
    xs, ys, ws = (rng.standard_normal(n * bs) for n in (ncol, nrow, nrow))
    V = S.bsr_from_triplets(1, 1, [0], [0], values[:1], device=device).vector_type
    M = S.bsr_from_triplets(1, 1, [0], [0], values[:1], device=device).block_type
    shape = (lambda n: (n,)) if bs == 1 else (lambda n: (n, bs))

    def forward(vals, x, y, grad=False):
        tv = gk.array(vals, dtype=M, device=device, requires_grad=grad)
        tx = gk.array(x.reshape(shape(ncol)), dtype=V, device=device, requires_grad=grad)
        ty = gk.array(y.reshape(shape(nrow)), dtype=V, device=device, requires_grad=grad)
        tape = gk.Tape()
        with tape:
            A = S.bsr_from_triplets(nrow, ncol, rows, cols, tv)
            out = S.bsr_mv(A, tx, ty, alpha=1.5, beta=-0.7)
        loss = float(out.numpy().reshape(-1) @ ws)
        if grad:
            tape.backward(grads={out: gk.array(ws.reshape(shape(nrow)), dtype=V, device=device)})
            return loss, tv.grad.numpy(), tx.grad.numpy().reshape(-1), ty.grad.numpy().reshape(-1), A
        return loss

    _, gv, gx, gy, A = forward(values, xs, ys, grad=True)
    assert A.values.requires_grad
    np.testing.assert_allclose(gv, _central(lambda v: forward(v, xs, ys), values), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx, _central(lambda x: forward(values, x, ys), xs), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, _central(lambda y: forward(values, xs, y), ys), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bs", [1, 2, 3])
def test_transpose_axpy_mm_diag_gradients(device, rng, bs):
    """Value ops are launches: a loss through transpose, axpy, mm and get_diag has the values' gradient of
    its dense counterpart (float64 central differences)."""
    n = 4
    rows, cols, values = random_triplets(rng, n, n, 7, bs)
    values = values.reshape(-1) if bs == 1 else values
    M = S.bsr_from_triplets(1, 1, [0], [0], values[:1], device=device).block_type
    w = rng.standard_normal((n * bs, n * bs))
    wd = rng.standard_normal((n, bs, bs))

    def loss(vals, grad=False):
        tv = gk.array(vals, dtype=M, device=device, requires_grad=grad)
        tape = gk.Tape()
        with tape:
            A = S.bsr_from_triplets(n, n, rows, cols, tv)
            C = S.bsr_axpy(S.bsr_transposed(A), S.bsr_mm(A, A), alpha=2.0, beta=0.5)
            d = S.bsr_get_diag(C)
        D = C.to_dense().astype(np.float64)
        value = float((D * w).sum() + (d.numpy().reshape(n, bs, bs) * wd).sum())
        if not grad:
            return value
        seed = np.array([w[r * bs:r * bs + bs, c * bs:c * bs + bs] for r, c in zip(C.block_rows(), C.columns.numpy())])
        shape = (lambda a: a.reshape(a.shape[0])) if bs == 1 else (lambda a: a)
        tape.backward(grads={C.values: gk.array(shape(seed), dtype=M, device=device),
                             d: gk.array(shape(wd), dtype=M, device=device)})
        return tv.grad.numpy()

    np.testing.assert_allclose(loss(values, grad=True), _central(loss, values), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("bs", [1, 2, 3])
def test_set_from_triplets_diag_and_rectangular_diag_match_scipy(device, rng, bs, dtype):
    """bsr_set_from_triplets (duplicates summed, the old pattern dropped) against SciPy's COO sum, bsr_diag
    from one block repeated, bsr_get_diag of a wide and a tall matrix, for every block size and dtype."""
    tol = TOL[dtype]
    A, _ = build(rng, 5, 6, 10, bs, dtype, device)
    rows, cols, values = random_triplets(rng, 5, 6, 14, bs)
    values = values.astype(NP[dtype])
    assert S.bsr_set_from_triplets(A, rows, cols, values.reshape(-1) if bs == 1 else values) is A
    ref = sp.coo_matrix((values.reshape(-1).astype(np.float64),
                         (np.repeat(rows * bs, bs * bs) + np.tile(np.repeat(np.arange(bs), bs), rows.size),
                          np.repeat(cols * bs, bs * bs) + np.tile(np.tile(np.arange(bs), bs), cols.size))),
                        shape=(5 * bs, 6 * bs)).toarray()
    np.testing.assert_allclose(A.to_scipy().toarray(), ref, **tol)
    assert A.dtype is dtype and A.nnz == len(set(zip(rows.tolist(), cols.tolist())))
    for M, D in ((A, ref), (S.bsr_transposed(A), ref.T)):        # wide, then tall: min(nrow, ncol) blocks
        diag = S.bsr_get_diag(M).numpy().reshape(-1, bs, bs)
        assert diag.shape[0] == 5
        for r in range(5):
            np.testing.assert_allclose(diag[r], D[r * bs:(r + 1) * bs, r * bs:(r + 1) * bs], **tol)
    block = rng.standard_normal((bs, bs)).astype(NP[dtype])
    E = S.bsr_diag(block[0, 0] if bs == 1 else block, rows_of_blocks=4, dtype=dtype, device=device)
    np.testing.assert_allclose(E.to_dense(), np.kron(np.eye(4), block), **tol)


@pytest.mark.parametrize("dtype", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("bs", [1, 3])
def test_long_products_match_scipy(device, rng, bs, dtype):
    """Products of more rows than one thread's run (unrecorded on the CPU, runs of rows per thread; a
    partial last run; empty rows) against SciPy, with and without beta, and the same product on a tape."""
    tol = TOL[dtype]
    nrow = 2 * S.kernels.ROWS_PER_THREAD + 37
    A, D = build(rng, nrow, 40, 3 * nrow, bs, dtype, device)
    assert S.kernels.rows_per_thread(A.device, nrow) == (S.kernels.ROWS_PER_THREAD if A.device.backend == "cpu" else 1)
    xs, ys = rng.standard_normal(40 * bs), rng.standard_normal(nrow * bs)
    np.testing.assert_allclose(S.bsr_mv(A, vec(xs, A, device)).numpy().reshape(-1), D @ xs, **tol)
    y = S.bsr_mv(A, vec(xs, A, device), vec(ys, A, device), alpha=0.5, beta=-1.5)
    np.testing.assert_allclose(y.numpy().reshape(-1), 0.5 * D @ xs - 1.5 * ys, **tol)
    with gk.Tape():
        y = S.bsr_mv(A, vec(xs, A, device), vec(ys, A, device), alpha=0.5, beta=-1.5)
    np.testing.assert_allclose(y.numpy().reshape(-1), 0.5 * D @ xs - 1.5 * ys, **tol)


@pytest.mark.parametrize("nrow", [9, 2 * S.kernels.ROWS_PER_THREAD + 5])
def test_bsr_mv_forward_mode(device, rng, nrow):
    """Under gk.ForwardMode a product carries x's tangent: y.dual = A t (a thread per row, and the CPU's
    runs of rows), against SciPy."""
    A, D = build(rng, nrow, 30, 3 * nrow, 2, gk.float64, device)
    xs, ts = rng.standard_normal(60), rng.standard_normal(60)
    x, y = vec(xs, A, device), gk.zeros(nrow, dtype=A.vector_type, device=device)
    with gk.ForwardMode(seeds={x: vec(ts, A, device)}):
        S.bsr_mv(A, x, y, alpha=2.0)
    np.testing.assert_allclose(y.numpy().reshape(-1), 2.0 * D @ xs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y.dual.numpy().reshape(-1), 2.0 * D @ ts, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [gk.float64, gk.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("bs", [1, 2, 3])
def test_from_scipy_coo_with_duplicates_and_back(device, rng, bs, dtype):
    """from_scipy of a COO matrix with duplicate entries (summed) cut into bs x bs blocks, and to_scipy
    back, against SciPy's own dense form; a shape that is not a multiple of the block size is refused."""
    n = 4 * bs
    r, c = rng.integers(0, n, 30), rng.integers(0, n, 30)
    r[-4:], c[-4:] = r[0], c[0]
    C = sp.coo_matrix((rng.standard_normal(30), (r, c)), shape=(n, n))
    A = S.from_scipy(C, block_shape=(bs, bs), dtype=dtype, device=device)
    assert (A.nrow, A.block_size, A.dtype) == (4, bs, dtype)
    np.testing.assert_allclose(A.to_scipy().toarray(), C.toarray(), **TOL[dtype])
    if bs > 1:
        with pytest.raises(ValueError, match="multiple"):
            S.from_scipy(sp.coo_matrix((n + 1, n + 1)), block_shape=(bs, bs), device=device)
