"""The kernels of gk.sparse, one set per (block size, scalar type): values are arrays of `gk.matrix((b, b),
scalar)` blocks (plain scalars for 1x1 blocks), vectors arrays of `gk.vector(b, scalar)` (plain scalars
for b = 1). Structure (which blocks exist where) is computed on the host; every kernel here only moves
or combines values, so each is an ordinary differentiable launch on every backend."""

from __future__ import annotations

import functools
import types

import gradkit as gk


def block_types(bs: int, scalar) -> tuple:
    """(block type, vector element type) for square blocks of size `bs`."""
    if bs == 1:
        return scalar, scalar
    return gk.matrix((bs, bs), scalar), gk.vector(bs, scalar)


ROWS_PER_THREAD = 256


def rows_per_thread(device, nrow: int) -> int:
    """Rows each thread of an unrecorded product takes: a run of ROWS_PER_THREAD on the LLVM CPU backend,
    whose launches split their threads into chunks on a pool (a product in a few thousand threads is a
    few calls into the kernel, which keeps its time when other processes share the cores: 5 ms instead
    of 12-25 ms for 10^6 rows on a busy 2-core machine), else 1 (a thread per row, for GPUs)."""
    if getattr(device, "backend", None) != "cpu" or nrow < 2 * ROWS_PER_THREAD:
        return 1
    return ROWS_PER_THREAD


@functools.lru_cache(maxsize=None)
def block_funcs(bs: int, scalar) -> types.SimpleNamespace:
    """The @gk.funcs every block kernel (gk.sparse's, gk.linalg's) builds on, once per (block size, scalar):
    zero_v / zero_m, block_mv (a x), block_t, block_mm, block_outer, vdot (a . b) and ratio (num / den, 0
    where den is 0); for 1x1 blocks the blocks are plain scalars."""
    M, V = block_types(bs, scalar)

    @gk.func
    def zero_v() -> V:
        if gk.static(bs == 1):
            return scalar(0.0)
        else:
            return V()

    @gk.func
    def zero_m() -> M:
        if gk.static(bs == 1):
            return scalar(0.0)
        else:
            return M()

    @gk.func
    def block_mv(a: M, x: V) -> V:
        if gk.static(bs == 1):
            return a * x
        else:
            return a @ x

    @gk.func
    def block_t(a: M) -> M:
        if gk.static(bs == 1):
            return a
        else:
            return gk.transpose(a)

    @gk.func
    def block_mm(a: M, b: M) -> M:
        if gk.static(bs == 1):
            return a * b
        else:
            return a @ b

    @gk.func
    def block_outer(u: V, v: V) -> M:
        if gk.static(bs == 1):
            return u * v
        else:
            return gk.outer(u, v)

    @gk.func
    def vdot(a: V, b: V) -> scalar:
        if gk.static(bs == 1):
            return a * b
        else:
            return gk.dot(a, b)

    @gk.func
    def ratio(num: scalar, den: scalar) -> scalar:
        q = scalar(0.0)
        if den != scalar(0.0):
            q = num / den
        return q

    return types.SimpleNamespace(zero_v=zero_v, zero_m=zero_m, block_mv=block_mv, block_t=block_t,
                                 block_mm=block_mm, block_outer=block_outer, vdot=vdot, ratio=ratio)


@functools.lru_cache(maxsize=None)
def kernels(bs: int, scalar) -> dict:
    """Every gk.sparse kernel for `bs` x `bs` blocks of `scalar`, compiled lazily on first launch."""
    M, V = block_types(bs, scalar)
    I = gk.int32

    funcs = block_funcs(bs, scalar)
    zero_v, zero_m, block_mv, block_t = funcs.zero_v, funcs.zero_m, funcs.block_mv, funcs.block_t
    block_mm, block_outer = funcs.block_mm, funcs.block_outer

    @gk.kernel
    def bsr_mv(offsets: gk.array(dtype=I), columns: gk.array(dtype=I), values: gk.array(dtype=M),
               x: gk.array(dtype=V), alpha: scalar, y: gk.array(dtype=V)):
        r = gk.tid()
        s = zero_v()
        for k in range(offsets[r], offsets[r + 1]):
            s = s + block_mv(values[k], x[columns[k]])
        y[r] = alpha * s

    @gk.kernel
    def bsr_mv_beta(offsets: gk.array(dtype=I), columns: gk.array(dtype=I), values: gk.array(dtype=M),
                    x: gk.array(dtype=V), alpha: scalar, beta: scalar, y_in: gk.array(dtype=V),
                    y: gk.array(dtype=V)):
        r = gk.tid()
        s = zero_v()
        for k in range(offsets[r], offsets[r + 1]):
            s = s + block_mv(values[k], x[columns[k]])
        y[r] = alpha * s + beta * y_in[r]

    @gk.kernel
    def bsr_mv_rows(offsets: gk.array(dtype=I), columns: gk.array(dtype=I), values: gk.array(dtype=M),
                    x: gk.array(dtype=V), alpha: scalar, chunk: int, y: gk.array(dtype=V)):
        """bsr_mv over a run of `chunk` rows per thread (the CPU's unrecorded form, rows_per_thread)."""
        c = gk.tid()
        lo = c * chunk
        for r in range(lo, gk.min(lo + chunk, y.shape[0])):
            s = zero_v()
            for k in range(offsets[r], offsets[r + 1]):
                s = s + block_mv(values[k], x[columns[k]])
            y[r] = alpha * s

    @gk.kernel
    def bsr_mv_rows_beta(offsets: gk.array(dtype=I), columns: gk.array(dtype=I), values: gk.array(dtype=M),
                         x: gk.array(dtype=V), alpha: scalar, beta: scalar, chunk: int, y: gk.array(dtype=V)):
        """y = alpha A x + beta y in place, `chunk` rows per thread (each row read, then written, by one
        thread)."""
        c = gk.tid()
        lo = c * chunk
        for r in range(lo, gk.min(lo + chunk, y.shape[0])):
            s = zero_v()
            for k in range(offsets[r], offsets[r + 1]):
                s = s + block_mv(values[k], x[columns[k]])
            y[r] = alpha * s + beta * y[r]

    @gk.kernel
    def scatter_add(src: gk.array(dtype=M), index: gk.array(dtype=I), alpha: scalar, out: gk.array(dtype=M)):
        k = gk.tid()
        out[index[k]] += alpha * src[k]

    @gk.kernel
    def gather_transposed(src: gk.array(dtype=M), perm: gk.array(dtype=I), out: gk.array(dtype=M)):
        k = gk.tid()
        out[k] = block_t(src[perm[k]])

    @gk.kernel
    def scale(values: gk.array(dtype=M), alpha: scalar):
        k = gk.tid()
        values[k] = alpha * values[k]

    @gk.kernel
    def get_diag(offsets: gk.array(dtype=I), columns: gk.array(dtype=I), values: gk.array(dtype=M),
                 out: gk.array(dtype=M)):
        r = gk.tid()
        d = zero_m()
        for k in range(offsets[r], offsets[r + 1]):
            if columns[k] == r:
                d = d + values[k]
        out[r] = d

    @gk.kernel
    def mm_pairs(a: gk.array(dtype=M), b: gk.array(dtype=M), a_idx: gk.array(dtype=I), b_idx: gk.array(dtype=I),
                 c_idx: gk.array(dtype=I), alpha: scalar, c: gk.array(dtype=M)):
        p = gk.tid()
        c[c_idx[p]] += alpha * block_mm(a[a_idx[p]], b[b_idx[p]])

    @gk.kernel
    def add_outer_rows(offsets: gk.array(dtype=I), columns: gk.array(dtype=I), u: gk.array(dtype=V),
                       v: gk.array(dtype=V), alpha: scalar, out: gk.array(dtype=M)):
        """out[k] += alpha * outer(u[row(k)], v[col(k)]) over the pattern: a rank-one update restricted to it."""
        r = gk.tid()
        for k in range(offsets[r], offsets[r + 1]):
            out[k] += alpha * block_outer(u[r], v[columns[k]])

    return dict(bsr_mv=bsr_mv, bsr_mv_beta=bsr_mv_beta, bsr_mv_rows=bsr_mv_rows, bsr_mv_rows_beta=bsr_mv_rows_beta,
                scatter_add=scatter_add,
                gather_transposed=gather_transposed, scale=scale, get_diag=get_diag, mm_pairs=mm_pairs,
                add_outer_rows=add_outer_rows)
