"""Linear operators the solvers take (a BsrMatrix or a `LinearOperator` around a callable) and the Jacobi /
block-Jacobi preconditioners, which are block-diagonal BsrMatrix objects applied with `bsr_mv`."""

from __future__ import annotations

import functools

import gradkit as gk

from ..sparse import BsrMatrix, bsr_get_diag, bsr_mv, bsr_transposed
from ..sparse.bsr import _int_array
from ..sparse.kernels import block_types

import numpy as np


class LinearOperator:
    """A matrix-free operator: `matvec(x, y)` writes y = A x for arrays of `vector_type`; `rmatvec(x, y)`
    (optional) writes y = Aᵀ x, which the gradient of a non-symmetric solve needs (`symmetric=True` uses
    matvec for it). Gradients through a solve reach b only: the operator's own parameters are opaque.

    Args:
        n: the number of rows (and columns), in vectors of `vector_type`.
        vector_type: the element type of the vectors it multiplies (gk.float64, gk.vec3d, ...).
        device: the device its vectors live on.
        matvec: a callable `matvec(x, y)` writing y = A x (launching kernels).
        rmatvec: a callable `rmatvec(x, y)` writing y = Aᵀ x; None: only for a symmetric A.
        symmetric: A = Aᵀ: `matvec` serves as `rmatvec`."""

    def __init__(self, n: int, vector_type, device, matvec, rmatvec=None, symmetric: bool = False):
        self.nrow = self.ncol = int(n)
        self.vector_type, self.device = vector_type, gk.get_device(device)
        self.matvec, self.rmatvec, self.symmetric = matvec, rmatvec, symmetric

    def transposed(self) -> "LinearOperator":
        if self.symmetric:
            return self
        if self.rmatvec is None:
            raise ValueError("LinearOperator: the gradient of this solve needs Aᵀ: give rmatvec= or symmetric=True")
        return LinearOperator(self.nrow, self.vector_type, self.device, self.rmatvec, self.matvec)


def vector_info(v: gk.array) -> tuple:
    """(block size, scalar) of a solver vector's element type."""
    for bs in (1, 2, 3):
        for s in (gk.float32, gk.float64):
            if block_types(bs, s)[1] is v.dtype:
                return bs, s
    raise TypeError(f"b: vectors of float32/float64 scalars or vec2/vec3 are needed, got {v.dtype!r}")


def apply(A, x: gk.array, y: gk.array, record: bool) -> None:
    """y = A x for a BsrMatrix, a LinearOperator or a plain callable f(x, y)."""
    if isinstance(A, BsrMatrix):
        bsr_mv(A, x, y, record_tape=record)
    elif isinstance(A, LinearOperator):
        A.matvec(x, y)
    else:
        A(x, y)


def transposed(A):
    if isinstance(A, BsrMatrix):
        with gk.no_grad():
            return bsr_transposed(A)
    if isinstance(A, LinearOperator):
        return A.transposed()
    raise ValueError("the gradient of a non-symmetric solve with a plain callable needs Aᵀ: wrap it in "
                     "gk.linalg.LinearOperator(..., rmatvec=...)")


@functools.lru_cache(maxsize=None)
def _invert_kernel(bs: int, scalar, block: bool):
    M = block_types(bs, scalar)[0]

    @gk.kernel
    def invert_diag(diag: gk.array(dtype=M), out: gk.array(dtype=M)):
        r = gk.tid()
        d = diag[r]
        if gk.static(bs == 1):
            if d != scalar(0.0):
                out[r] = scalar(1.0) / d
            else:
                out[r] = scalar(1.0)
        elif gk.static(block):
            if gk.determinant(d) != scalar(0.0):
                out[r] = gk.inverse(d)
            else:
                out[r] = gk.identity(n=bs, dtype=scalar)
        else:
            m = M()
            for i in gk.static(range(bs)):
                if d[i, i] != scalar(0.0):
                    m[i, i] = scalar(1.0) / d[i, i]
                else:
                    m[i, i] = scalar(1.0)
            out[r] = m

    return invert_diag


def preconditioner(A: BsrMatrix, kind: str = "diag") -> BsrMatrix:
    """A Jacobi ("diag": inverse of the scalar diagonal) or block-Jacobi ("block_diag": inverse of each
    diagonal block) preconditioner of a square BsrMatrix, as a block-diagonal BsrMatrix (zero pivots: 1).

    Args:
        A: a square `gk.sparse.BsrMatrix`.
        kind: "diag" or "block_diag"."""
    if kind not in ("diag", "block_diag"):
        raise ValueError(f"kind: 'diag' or 'block_diag', got {kind!r}")
    if A.nrow != A.ncol:
        raise ValueError(f"A: a square matrix is needed, got {A.shape}")
    with gk.no_grad():
        diag = bsr_get_diag(A, gk.zeros(A.nrow, dtype=A.block_type, device=A.device))
        inv = gk.zeros(A.nrow, dtype=A.block_type, device=A.device)
        if A.nrow:
            gk.launch(_invert_kernel(A.block_size, A.scalar, kind == "block_diag"), A.nrow, inputs=[diag],
                      outputs=[inv], device=A.device)
    idx = np.arange(A.nrow)
    return BsrMatrix(A.nrow, A.ncol, A.block_size, A.scalar, _int_array(np.arange(A.nrow + 1), A.device),
                     _int_array(idx, A.device), inv)


def resolve_preconditioner(A, M):
    """M as given (BsrMatrix, LinearOperator, callable, None) or built from A for 'diag' / 'block_diag'."""
    if isinstance(M, str):
        name = {"jacobi": "diag", "block_jacobi": "block_diag"}.get(M, M)
        if not isinstance(A, BsrMatrix):
            raise ValueError(f"M={M!r} needs A as a BsrMatrix")
        return preconditioner(A, name)
    return M
