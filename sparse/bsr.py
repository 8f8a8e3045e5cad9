"""`BsrMatrix` and its builds. A block-sparse-row matrix of `nrow` x `ncol` square blocks keeps three
gk.arrays on its device: `offsets` (int32, nrow + 1: row r's blocks are offsets[r]:offsets[r+1]),
`columns` (int32, one block column per block, sorted within a row) and `values` (one block each, a
`gk.matrix((b, b), scalar)` or a scalar for 1x1 blocks). Structure is built on the host with NumPy
(O(nnz log nnz)); values move through kernels, so a build from a gk.array of values is differentiable."""

from __future__ import annotations

import numpy as np

import gradkit as gk

from .kernels import block_types, kernels

_SCALARS = {np.dtype(np.float32): gk.float32, np.dtype(np.float64): gk.float64}


def _scalar(dtype) -> object:
    """gk.float32 / gk.float64 from a gk scalar, a NumPy dtype or None (float64)."""
    if dtype is None:
        return gk.float64
    if dtype in (gk.float32, gk.float64):
        return dtype
    try:
        return _SCALARS[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError(f"dtype: gk.sparse supports float32 and float64, got {dtype!r}") from None


def _np_dtype(scalar) -> np.dtype:
    return np.dtype(np.float64 if scalar is gk.float64 else np.float32)


def _block_size(block_shape) -> int:
    if isinstance(block_shape, int):
        block_shape = (block_shape, block_shape)
    bs = tuple(int(b) for b in block_shape)
    if len(bs) != 2 or bs[0] != bs[1] or bs[0] not in (1, 2, 3):
        raise ValueError(f"block_shape: gk.sparse supports square blocks of 1, 2 or 3, got {block_shape!r}")
    return bs[0]


class BsrMatrix:
    """A block-sparse-row matrix on one device (see the module docstring for its arrays).

    `shape` is in scalars (nrow * b, ncol * b); `nrow`, `ncol` count block rows and columns, `nnz` blocks.
    `block_type` is the element type of `values`, `vector_type` that of vectors it multiplies. Build one with
    `bsr_from_triplets`, `bsr_zeros`, `bsr_diag`, `bsr_identity` or `from_scipy` rather than by hand.

    Args:
        nrow: the number of block rows.
        ncol: the number of block columns.
        block_size: b, the side of the square blocks.
        scalar: the scalar type of the entries (gk.float32 or gk.float64).
        offsets: an int32 array of nrow + 1 entries: row r's blocks are offsets[r]:offsets[r+1].
        columns: an int32 array: the block column of each block, sorted within a row.
        values: an array of the blocks (`gk.matrix((b, b), scalar)`, or scalars for 1x1 blocks)."""

    def __init__(self, nrow: int, ncol: int, block_size: int, scalar, offsets, columns, values):
        self.nrow, self.ncol, self.block_size, self.scalar = int(nrow), int(ncol), int(block_size), scalar
        self.offsets, self.columns, self.values = offsets, columns, values

    # Description ---------------------------------------------------------------
    @property
    def block_shape(self) -> tuple:
        return (self.block_size, self.block_size)

    @property
    def shape(self) -> tuple:
        return (self.nrow * self.block_size, self.ncol * self.block_size)

    @property
    def nnz(self) -> int:
        return int(self.columns.shape[0])

    @property
    def dtype(self):
        return self.scalar

    @property
    def device(self):
        return self.values.device

    @property
    def block_type(self):
        return block_types(self.block_size, self.scalar)[0]

    @property
    def vector_type(self):
        return block_types(self.block_size, self.scalar)[1]

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.values.requires_grad = value

    def __repr__(self) -> str:
        return (f"BsrMatrix(shape={self.shape}, block_shape={self.block_shape}, nnz={self.nnz}, "
                f"dtype={self.scalar.name}, device={self.device.name!r})")

    def kernels(self) -> dict:
        return kernels(self.block_size, self.scalar)

    # Host copies -----------------------------------------------------------------
    def structure(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, columns) as host NumPy arrays."""
        return self.offsets.numpy().astype(np.int64), self.columns.numpy().astype(np.int64)

    def block_rows(self) -> np.ndarray:
        """The block row of every block (host, int64)."""
        offsets = self.offsets.numpy().astype(np.int64)
        return np.repeat(np.arange(self.nrow), np.diff(offsets))

    def values_numpy(self) -> np.ndarray:
        """The values as a host array of shape (nnz, b, b)."""
        return self.values.numpy().reshape(self.nnz, self.block_size, self.block_size)

    def to_dense(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=_np_dtype(self.scalar))
        b = self.block_size
        rows, cols = self.block_rows(), self.columns.numpy()
        for r, c, v in zip(rows, cols, self.values_numpy()):
            out[r * b:(r + 1) * b, c * b:(c + 1) * b] += v
        return out

    def to_scipy(self):
        """A `scipy.sparse.bsr_matrix` (`csr_matrix` for 1x1 blocks) with copies of the arrays."""
        import scipy.sparse as sp
        offsets, columns = self.structure()
        if self.block_size == 1:
            return sp.csr_matrix((self.values.numpy().copy(), columns, offsets), shape=self.shape)
        return sp.bsr_matrix((self.values_numpy().copy(), columns, offsets), shape=self.shape)


# Builds ------------------------------------------------------------------------------------------------

def _int_array(a, device) -> gk.array:
    return gk.array(np.ascontiguousarray(a, dtype=np.int32), dtype=gk.int32, device=device)


def _empty_values(n: int, bs: int, scalar, device, requires_grad=False) -> gk.array:
    return gk.zeros(n, dtype=block_types(bs, scalar)[0], device=device, requires_grad=requires_grad)


def bsr_zeros(rows_of_blocks: int, cols_of_blocks: int, block_shape=(1, 1), dtype=None, device=None) -> BsrMatrix:
    """An empty (no blocks) `rows_of_blocks` x `cols_of_blocks` matrix of `block_shape` blocks.

    Args:
        rows_of_blocks: the number of block rows.
        cols_of_blocks: the number of block columns.
        block_shape: (b, b) for square b x b blocks, b in 1..3.
        dtype: gk.float32 or gk.float64 (or a NumPy float dtype); None: float64.
        device: where the matrix's arrays live; None: the current device."""
    bs, scalar = _block_size(block_shape), _scalar(dtype)
    device = gk.get_device(device)
    return BsrMatrix(rows_of_blocks, cols_of_blocks, bs, scalar,
                     _int_array(np.zeros(int(rows_of_blocks) + 1), device), _int_array(np.zeros(0), device),
                     _empty_values(0, bs, scalar, device))


def _structure_from_triplets(nrow: int, ncol: int, rows, cols) -> tuple:
    """(offsets, columns, where): the sorted, de-duplicated pattern and each triplet's block index in it."""
    rows = np.asarray(rows, dtype=np.int64).ravel()
    cols = np.asarray(cols, dtype=np.int64).ravel()
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols: lengths differ ({rows.size} and {cols.size})")
    if rows.size and (rows.min() < 0 or rows.max() >= nrow or cols.min() < 0 or cols.max() >= ncol):
        raise ValueError(f"rows/cols: a block index is outside the {nrow} x {ncol} blocks")
    keys, where = np.unique(rows * ncol + cols, return_inverse=True)
    offsets = np.zeros(nrow + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // ncol, minlength=nrow), out=offsets[1:])
    return offsets, keys % ncol, where.ravel()


def _values_array(values, bs: int | None, scalar, device) -> tuple:
    """(gk.array of blocks, block size) from NumPy data (n,), (n, b, b) or a gk.array of blocks."""
    if isinstance(values, gk.array):
        dt = values.dtype
        for b in (1, 2, 3):
            for s in (gk.float32, gk.float64):
                if block_types(b, s)[0] is dt and (bs is None or bs == b):
                    return values, b, s
        raise TypeError(f"values: a gk.array of float32/float64 blocks is needed, got dtype {dt!r}")
    data = np.asarray(values)
    if data.ndim == 1:
        b = 1
    elif data.ndim == 3 and data.shape[1] == data.shape[2]:
        b = data.shape[1]
    else:
        raise ValueError(f"values: shape (n,) or (n, b, b) expected, got {data.shape}")
    if bs is not None and b != bs:
        raise ValueError(f"values: blocks of {b}x{b} where {bs}x{bs} were asked for")
    _block_size(b)
    scalar = _scalar(data.dtype if scalar is None and data.dtype.kind == "f" else scalar)
    data = data.astype(_np_dtype(scalar), copy=False)
    return gk.array(data, dtype=block_types(b, scalar)[0], device=device), b, scalar


def bsr_from_triplets(rows_of_blocks: int, cols_of_blocks: int, rows, cols, values, block_shape=None,
                      dtype=None, device=None, requires_grad: bool = False) -> BsrMatrix:
    """A matrix from (row, column, block) triplets in block indices; duplicates are summed.

    `values`: NumPy data of shape (n,) (1x1 blocks) or (n, b, b), or a gk.array of blocks; the dtype is
    taken from it unless given (float64 for non-float data). From a gk.array recorded on a tape, the sum
    into the pattern is a launch, so gradients reach the triplet values.

    Args:
        rows_of_blocks: the number of block rows.
        cols_of_blocks: the number of block columns.
        rows: the block row of each triplet (ints, NumPy or a gk.array).
        cols: the block column of each triplet.
        values: the blocks, as above.
        block_shape: (b, b); None: from `values`.
        dtype: gk.float32 or gk.float64; None: from `values`.
        device: where the matrix's arrays live; None: the current device.
        requires_grad: give the matrix's values a `.grad`."""
    nrow, ncol = int(rows_of_blocks), int(cols_of_blocks)
    device = gk.get_device(device if device is not None else
                           (values.device if isinstance(values, gk.array) else None))
    bs = None if block_shape is None else _block_size(block_shape)
    src, bs, scalar = _values_array(values, bs, None if dtype is None else _scalar(dtype), device)
    if dtype is not None and scalar is not _scalar(dtype):
        raise TypeError(f"values: dtype {scalar.name} where {dtype!r} was asked for")
    offsets, columns, where = _structure_from_triplets(nrow, ncol, rows, cols)
    if where.size != src.shape[0]:
        raise ValueError(f"values: {src.shape[0]} blocks for {where.size} triplets")
    out = _empty_values(columns.size, bs, scalar, device, requires_grad or src.requires_grad)
    if where.size:
        gk.launch(kernels(bs, scalar)["scatter_add"], where.size, inputs=[src, _int_array(where, device), 1.0],
                  outputs=[out], device=device)
    return BsrMatrix(nrow, ncol, bs, scalar, _int_array(offsets, device), _int_array(columns, device), out)


def bsr_set_from_triplets(A: BsrMatrix, rows, cols, values) -> BsrMatrix:
    """Rebuild `A` (same block counts, block size, dtype, device) from triplets; returns `A`.

    Args:
        A: the matrix to rebuild.
        rows: the block row of each triplet.
        cols: the block column of each triplet.
        values: the blocks, as in `bsr_from_triplets`."""
    B = bsr_from_triplets(A.nrow, A.ncol, rows, cols, values, block_shape=A.block_shape, dtype=A.scalar,
                          device=A.device, requires_grad=A.requires_grad)
    A.offsets, A.columns, A.values = B.offsets, B.columns, B.values
    return A


def bsr_diag(diag, block_shape=None, dtype=None, device=None, rows_of_blocks: int | None = None,
             requires_grad: bool = False) -> BsrMatrix:
    """A block-diagonal matrix: `diag` is one block per row (NumPy (n,), (n, b, b) or a gk.array of blocks),
    or a single block / scalar repeated on `rows_of_blocks` rows.

    Args:
        diag: the diagonal blocks, or one block / scalar to repeat.
        block_shape: (b, b); None: from `diag`.
        dtype: gk.float32 or gk.float64; None: from `diag` (float64 for non-float data).
        device: where the matrix's arrays live; None: the current device.
        rows_of_blocks: how many rows a single repeated block fills (needed then).
        requires_grad: give the values a `.grad` (gradients reach `diag` through a tape)."""
    if not isinstance(diag, gk.array):
        d = np.asarray(diag)
        if rows_of_blocks is not None and (d.ndim == 0 or d.ndim == 2):
            d = np.broadcast_to(d, (int(rows_of_blocks), *d.shape)).copy()
        diag = d
    n = diag.shape[0]
    idx = np.arange(n)
    return bsr_from_triplets(n, n, idx, idx, diag, block_shape=block_shape, dtype=dtype, device=device,
                             requires_grad=requires_grad)


def bsr_identity(rows_of_blocks: int, block_shape=(1, 1), dtype=None, device=None) -> BsrMatrix:
    """The identity of `rows_of_blocks` blocks of `block_shape`.

    Args:
        rows_of_blocks: the number of block rows (and columns).
        block_shape: (b, b) for square b x b blocks, b in 1..3.
        dtype: gk.float32 or gk.float64 (or a NumPy float dtype); None: float64.
        device: where the matrix's arrays live; None: the current device."""
    bs, scalar = _block_size(block_shape), _scalar(dtype)
    eye = np.broadcast_to(np.eye(bs, dtype=_np_dtype(scalar)), (int(rows_of_blocks), bs, bs))
    return bsr_diag(eye.reshape(-1) if bs == 1 else eye, dtype=scalar, device=device)


def from_scipy(S, block_shape=None, dtype=None, device=None, requires_grad: bool = False) -> BsrMatrix:
    """A BsrMatrix from any SciPy sparse matrix (or array); duplicates summed. `block_shape` defaults to
    S's block size for a BSR matrix, else 1x1.

    Args:
        S: a SciPy sparse matrix or array (any format).
        block_shape: (b, b); None: as above.
        dtype: gk.float32 or gk.float64; None: S's float type (float64 for non-float data).
        device: where the matrix's arrays live; None: the current device.
        requires_grad: give the matrix's values a `.grad`."""
    import scipy.sparse as sp
    if block_shape is None:
        block_shape = S.blocksize if sp.issparse(S) and S.format == "bsr" else (1, 1)
    bs = _block_size(block_shape)
    scalar = _scalar(dtype if dtype is not None else (S.dtype if S.dtype.kind == "f" else None))
    if S.shape[0] % bs or S.shape[1] % bs:
        raise ValueError(f"S: shape {S.shape} is not a multiple of the block size {bs}")
    B = sp.bsr_matrix(S, blocksize=(bs, bs), dtype=_np_dtype(scalar))
    B.sum_duplicates()
    B.sort_indices()
    device = gk.get_device(device)
    values = B.data.reshape(-1) if bs == 1 else B.data
    vals = gk.array(np.ascontiguousarray(values), dtype=block_types(bs, scalar)[0], device=device,
                    requires_grad=requires_grad)
    return BsrMatrix(S.shape[0] // bs, S.shape[1] // bs, bs, scalar, _int_array(B.indptr, device),
                     _int_array(B.indices, device), vals)
