"""CG's iteration in three fused launches (plus one-thread sums) for a BsrMatrix and no or a block-diagonal
preconditioner, when nothing is recorded: the product A p with the partial sums of p·Ap, the update of x
and r with the preconditioned residual and the partial sums of r·z (and r·r), and the new direction.

Each of the first two kernels runs one thread per chunk of rows (the chunks of linalg/vector.py's dot
products, so the sums are the same on every device); a vector is read once per kernel instead of once
per kernel and once per dot product, and an iteration makes 5 launches (6 with a preconditioner)
instead of 8."""

from __future__ import annotations

import functools

import numpy as np

import gradkit as gk

from ..sparse.kernels import block_funcs, block_types
from .vector import Vectors


@functools.lru_cache(maxsize=None)
def kernels(bs: int, scalar, preconditioned: bool) -> dict:
    M, V = block_types(bs, scalar)
    I = gk.array(dtype=gk.int32)
    S = gk.array(dtype=scalar)
    A = gk.array(dtype=V)
    B = gk.array(dtype=M)

    funcs = block_funcs(bs, scalar)
    vdot, block_mv, zero_v, ratio = funcs.vdot, funcs.block_mv, funcs.zero_v, funcs.ratio

    @gk.kernel
    def spmv_dot(offsets: I, columns: I, values: B, p: A, chunk: int, ap: A, partial: S):
        """ap = A p over a chunk of rows, partial[c] = the chunk's share of p·ap."""
        c = gk.tid()
        lo = c * chunk
        hi = gk.min(lo + chunk, p.shape[0])
        acc = scalar(0.0)
        for r in range(lo, hi):
            s = zero_v()
            for k in range(offsets[r], offsets[r + 1]):
                s = s + block_mv(values[k], p[columns[k]])
            ap[r] = s
            acc = acc + vdot(p[r], s)
        partial[c] = acc

    @gk.kernel
    def update_dot(x: A, r: A, p: A, ap: A, minv: B, rz: S, pap: S, chunk: int, z: A, partial_rz: S,
                   partial_rr: S):
        """x += a p, r -= a ap (a = rz / pap), z = M⁻¹ r with M⁻¹'s diagonal blocks (z = r: not written,
        without a preconditioner), and the chunk's shares of r·z and r·r."""
        c = gk.tid()
        lo = c * chunk
        hi = gk.min(lo + chunk, x.shape[0])
        a = ratio(rz[0], pap[0])
        acc_rz = scalar(0.0)
        acc_rr = scalar(0.0)
        for i in range(lo, hi):
            x[i] = x[i] + a * p[i]
            rn = r[i] - a * ap[i]
            r[i] = rn
            acc_rr = acc_rr + vdot(rn, rn)
            if gk.static(preconditioned):
                zi = block_mv(minv[i], rn)
                z[i] = zi
                acc_rz = acc_rz + vdot(rn, zi)
        partial_rr[c] = acc_rr
        if gk.static(preconditioned):
            partial_rz[c] = acc_rz

    @gk.kernel
    def direction(z: A, rz_new: S, rz: S, p: A):
        i = gk.tid()
        p[i] = z[i] + ratio(rz_new[0], rz[0]) * p[i]

    return dict(spmv_dot=spmv_dot, update_dot=update_dot, direction=direction)


def fusable(A, M) -> bool:
    """Whether the fused loop applies: A a BsrMatrix on the LLVM CPU backend (whose pool runs a launch's
    threads in chunks; a GPU wants the general loop's thread per row, the reference interpreter its
    per-element kernels), M None or a block-diagonal BsrMatrix like A's (what `preconditioner` builds)."""
    from ..sparse import BsrMatrix
    if not isinstance(A, BsrMatrix) or getattr(A.device, "backend", None) != "cpu":
        return False
    if M is None:
        return True
    if not isinstance(M, BsrMatrix) or (M.nrow, M.ncol, M.nnz) != (A.nrow, A.nrow, A.nrow):
        return False
    if (M.block_size, M.scalar, M.device) != (A.block_size, A.scalar, A.device):
        return False
    offsets, columns = M.structure()
    return bool(np.array_equal(offsets, np.arange(A.nrow + 1)) and np.array_equal(columns, np.arange(A.nrow)))


def cg_fused(A, b: gk.array, x: gk.array, target: float, maxiter: int, M, check_every: int,
             vec: Vectors) -> tuple:
    """CG on a BsrMatrix A with M None or block-diagonal (`block_diagonal`), unrecorded: the same iterates
    as solvers.cg_iterations in fewer launches and passes over memory; returns (iterations, r·r). The
    residual is read back every `check_every` iterations (r·r is a by-product of the update)."""
    from ..sparse import bsr_mv
    pre = M is not None
    minv = M.values if pre else gk.zeros(1, dtype=A.block_type, device=b.device)
    k = kernels(A.block_size, A.scalar, pre)
    dev, n = b.device, b.shape[0]
    r, ap, p = vec.new(), vec.new(), vec.new()
    bsr_mv(A, x, ap, record_tape=False)
    vec.axpby(1.0, b, -1.0, ap, r)
    z = vec.new() if pre else r
    if pre:
        bsr_mv(M, r, z, record_tape=False)
    vec.copy(z, p)
    rz, rz_new, pap, rr_dev = (vec.scalar_array() for _ in range(4))
    vec.dot_into(r, z, rz)
    rr = vec.dot(r, r)
    parts, chunk = vec.parts, vec.chunk
    p_pap, p_rz, p_rr = (gk.zeros(parts, dtype=A.scalar, device=dev) for _ in range(3))
    if not pre:
        p_rz = gk.zeros(1, dtype=A.scalar, device=dev)
    z_out = z if pre else gk.zeros(1, dtype=A.vector_type, device=dev)
    matrix = [A.offsets, A.columns, A.values]
    it = 0
    while it < maxiter and rr > target:
        gk.launch(k["spmv_dot"], parts, inputs=[*matrix, p, chunk], outputs=[ap, p_pap], device=dev,
                  record_tape=False)
        vec.launch("dot_finish", 1, [p_pap, 0], [pap], False)
        gk.launch(k["update_dot"], parts, inputs=[x, r, p, ap, minv, rz, pap, chunk], outputs=[z_out, p_rz, p_rr],
                  device=dev, record_tape=False)
        vec.launch("dot_finish", 1, [p_rz if pre else p_rr, 0], [rz_new], False)
        gk.launch(k["direction"], n, inputs=[z, rz_new, rz], outputs=[p], device=dev, record_tape=False)
        rz, rz_new = rz_new, rz
        it += 1
        if it % check_every == 0 or it == maxiter:
            if pre:
                vec.launch("dot_finish", 1, [p_rr, 0], [rr_dev], False)
            rr = float((rr_dev if pre else rz).numpy()[0])
    return it, rr
