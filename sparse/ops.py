"""Operations on BsrMatrix: products (`bsr_mv`, `bsr_mm`), `bsr_transposed`, `bsr_axpy`, `bsr_scale`,
`bsr_get_diag`. Every value computation is a kernel launch, recorded on a recording gk.Tape like any
launch (so `A.values.grad` and the vectors' `.grad` come out of `tape.backward()`); the structure of a
result (transpose, union of patterns, product pattern) is computed on the host with NumPy."""

from __future__ import annotations

import numpy as np

import gradkit as gk

from ..runtime.state import current as _recording
from .bsr import BsrMatrix, _empty_values, _int_array, bsr_zeros
from .kernels import kernels, rows_per_thread


def _check_vector(A: BsrMatrix, v, length: int, name: str) -> gk.array:
    if not isinstance(v, gk.array):
        raise TypeError(f"{name}: a gk.array is needed, got {type(v).__name__}")
    if v.dtype is not A.vector_type:
        raise TypeError(f"{name}: dtype {v.dtype!r} where the matrix's vectors are {A.vector_type!r}")
    if v.shape != (length,):
        raise ValueError(f"{name}: shape {v.shape} where ({length},) is needed")
    if v.device != A.device:
        raise ValueError(f"{name}: on {v.device.name}, the matrix is on {A.device.name}")
    return v


def bsr_mv(A: BsrMatrix, x: gk.array, y: gk.array | None = None, alpha: float = 1.0, beta: float = 0.0,
           record_tape: bool = True) -> gk.array:
    """y = alpha A x + beta y, one thread per block row (unrecorded on the CPU, a run of rows per thread:
    `kernels.rows_per_thread`); returns y (a new array when y is None).

    x and y are arrays of `A.vector_type` (scalars for 1x1 blocks). On a recording tape the product is a
    launch: gradients reach `A.values`, x, and (for beta != 0) y's value before the product.

    Args:
        A: the matrix.
        x: the vector multiplied (A.ncol elements of `A.vector_type`).
        y: the result (A.nrow elements), read when beta != 0; None: a new array.
        alpha: the factor of A x.
        beta: the factor of y's value before the product.
        record_tape: record the product on the active tape (False: run it unrecorded)."""
    _check_vector(A, x, A.ncol, "x")
    k = A.kernels()
    if y is None:
        y = gk.zeros(A.nrow, dtype=A.vector_type, device=A.device,
                     requires_grad=x.requires_grad or A.values.requires_grad)
        beta = 0.0
    _check_vector(A, y, A.nrow, "y")
    if y is x:
        raise ValueError("y: must not be x (the product reads x while it writes y)")
    if A.nrow == 0:
        return y
    recording = record_tape and _recording.tape is not None
    chunk = 1 if recording else rows_per_thread(A.device, A.nrow)
    if chunk > 1:                               # unrecorded on the CPU: runs of rows per thread
        parts = -(-A.nrow // chunk)
        matrix = [A.offsets, A.columns, A.values, x]
        if beta == 0.0:
            gk.launch(k["bsr_mv_rows"], parts, inputs=[*matrix, alpha, chunk], outputs=[y], device=A.device,
                      record_tape=False)
        else:
            gk.launch(k["bsr_mv_rows_beta"], parts, inputs=[*matrix, alpha, beta, chunk], outputs=[y],
                      device=A.device, record_tape=False)
        return y
    if beta == 0.0:
        gk.launch(k["bsr_mv"], A.nrow, inputs=[A.offsets, A.columns, A.values, x, alpha], outputs=[y],
                  device=A.device, record_tape=record_tape)
        return y
    # y is read and written: on a tape the old y is kept in a copy so its gradient (beta y.grad) is exact
    y_in = y
    if recording:
        y_in = gk.copy(gk.zeros_like(y), y)
    gk.launch(k["bsr_mv_beta"], A.nrow, inputs=[A.offsets, A.columns, A.values, x, alpha, beta, y_in],
              outputs=[y], device=A.device, record_tape=record_tape)
    return y


def bsr_scale(A: BsrMatrix, alpha: float) -> BsrMatrix:
    """`A *= alpha` in place (Warp's bsr_scale); returns A. In place, so not for a recording tape: use
    `bsr_axpy(A, None, alpha)` there.

    Args:
        A: the matrix scaled.
        alpha: the factor."""
    if A.nnz:
        gk.launch(A.kernels()["scale"], A.nnz, inputs=[A.values, alpha], device=A.device, record_tape=False)
    return A


def bsr_get_diag(A: BsrMatrix, out: gk.array | None = None) -> gk.array:
    """The diagonal blocks (zero where a row has none) as an array of `A.block_type`, min(nrow, ncol) long.

    Args:
        A: the matrix.
        out: an array to write them into; None: a new array."""
    n = min(A.nrow, A.ncol)
    if out is None:
        out = gk.zeros(n, dtype=A.block_type, device=A.device, requires_grad=A.values.requires_grad)
    if n:
        gk.launch(A.kernels()["get_diag"], n, inputs=[A.offsets, A.columns, A.values], outputs=[out],
                  device=A.device)
    return out


def bsr_transposed(A: BsrMatrix) -> BsrMatrix:
    """Aᵀ as a new matrix (each block transposed); its values are a gather launch from A's.

    Args:
        A: the matrix to transpose."""
    offsets, columns = A.structure()
    rows = A.block_rows()
    perm = np.lexsort((rows, columns))          # blocks ordered by (column, row): Aᵀ's row-major order
    t_offsets = np.zeros(A.ncol + 1, dtype=np.int64)
    np.cumsum(np.bincount(columns, minlength=A.ncol), out=t_offsets[1:])
    out = _empty_values(A.nnz, A.block_size, A.scalar, A.device, A.values.requires_grad)
    if A.nnz:
        gk.launch(A.kernels()["gather_transposed"], A.nnz, inputs=[A.values, _int_array(perm, A.device)],
                  outputs=[out], device=A.device)
    return BsrMatrix(A.ncol, A.nrow, A.block_size, A.scalar, _int_array(t_offsets, A.device),
                     _int_array(rows[perm], A.device), out)


def _keys(M: BsrMatrix) -> np.ndarray:
    return M.block_rows() * M.ncol + M.structure()[1]


def _compatible(A: BsrMatrix, B: BsrMatrix, what: str) -> None:
    if (A.block_size, A.scalar) != (B.block_size, B.scalar):
        raise TypeError(f"{what}: block size / dtype differ ({A!r} and {B!r})")
    if A.device != B.device:
        raise ValueError(f"{what}: matrices on {A.device.name} and {B.device.name}")


def _from_keys(keys: np.ndarray, nrow: int, ncol: int, values: gk.array, like: BsrMatrix) -> BsrMatrix:
    offsets = np.zeros(nrow + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // max(ncol, 1), minlength=nrow), out=offsets[1:])
    return BsrMatrix(nrow, ncol, like.block_size, like.scalar, _int_array(offsets, like.device),
                     _int_array(keys % max(ncol, 1), like.device), values)


def bsr_axpy(x: BsrMatrix, y: BsrMatrix | None = None, alpha: float = 1.0, beta: float = 1.0) -> BsrMatrix:
    """y = alpha x + beta y; y's pattern becomes the union of both (new arrays, so this may be recorded on a
    tape); returns y, or a new matrix alpha x when y is None.

    Args:
        x: the matrix added.
        y: the matrix added to (same shape, block size and dtype); None: a new matrix alpha x.
        alpha: the factor of x.
        beta: the factor of y."""
    if y is None:
        y = bsr_zeros(x.nrow, x.ncol, x.block_shape, x.scalar, x.device)
    _compatible(x, y, "bsr_axpy")
    if (x.nrow, x.ncol) != (y.nrow, y.ncol):
        raise ValueError(f"bsr_axpy: shapes {x.shape} and {y.shape} differ")
    kx, ky = _keys(x), _keys(y)
    keys = np.union1d(kx, ky)
    grad = x.values.requires_grad or y.values.requires_grad
    out = _empty_values(keys.size, x.block_size, x.scalar, x.device, grad)
    scatter = x.kernels()["scatter_add"]
    for M, k, coef in ((y, ky, beta), (x, kx, alpha)):
        if k.size and coef != 0.0:
            gk.launch(scatter, k.size, inputs=[M.values, _int_array(np.searchsorted(keys, k), x.device), coef],
                      outputs=[out], device=x.device)
    result = _from_keys(keys, x.nrow, x.ncol, out, x)
    y.offsets, y.columns, y.values = result.offsets, result.columns, result.values
    return y


def bsr_mm(A: BsrMatrix, B: BsrMatrix, C: BsrMatrix | None = None, alpha: float = 1.0,
           beta: float = 0.0) -> BsrMatrix:
    """C = alpha A B + beta C (C's pattern grows to hold the product); returns C, a new matrix when None.
    One thread per pair of blocks multiplied, adding into the product's block.

    Args:
        A: the left matrix.
        B: the right matrix (A.ncol block rows, same block size and dtype).
        C: the result, read when beta != 0; None: a new matrix.
        alpha: the factor of A B.
        beta: the factor of C's value before the product."""
    _compatible(A, B, "bsr_mm")
    if A.ncol != B.nrow:
        raise ValueError(f"bsr_mm: shapes {A.shape} and {B.shape} do not chain")
    a_rows, (_, a_cols) = A.block_rows(), A.structure()
    b_off, b_cols = B.structure()
    counts = b_off[a_cols + 1] - b_off[a_cols]                 # blocks of B each block of A meets
    a_idx = np.repeat(np.arange(A.nnz), counts)
    start = np.repeat(b_off[a_cols] - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    b_idx = start + np.arange(a_idx.size)
    keys_pairs = a_rows[a_idx] * B.ncol + b_cols[b_idx]
    keys = np.unique(keys_pairs)
    grad = A.values.requires_grad or B.values.requires_grad
    out = _empty_values(keys.size, A.block_size, A.scalar, A.device, grad)
    if a_idx.size:
        dev = A.device
        gk.launch(A.kernels()["mm_pairs"], a_idx.size,
                  inputs=[A.values, B.values, _int_array(a_idx, dev), _int_array(b_idx, dev),
                          _int_array(np.searchsorted(keys, keys_pairs), dev), alpha], outputs=[out], device=dev)
    product = _from_keys(keys, A.nrow, B.ncol, out, A)
    if C is None:
        return product
    return bsr_axpy(product, C, 1.0, beta)
