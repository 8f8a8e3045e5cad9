"""SpMV and CG on a 2-D Laplacian (5-point, float64, 1x1 blocks): gradkit's gk.sparse / gk.linalg against
SciPy and warp.sparse / warp.optim.linear on this CPU (issue #45). Runs on its own:

    .venv/bin/python benchmarks/sparse_bench.py [--side 1000] [--device cpu] [--cg-iters 100]

Times are the median of repeats after a warm-up (compiles excluded); CG runs a fixed number of
iterations (tol 0) without a preconditioner, so every library does the same work."""

from __future__ import annotations

import argparse
import os
import statistics
import time

# one BLAS thread: SciPy's CG is dot/axpy bound, and OpenBLAS's threads on a shared 2-core machine made it
# 40x slower (1.9 s instead of 49 ms for 50 iterations on 300²)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import scipy.sparse as sp


def laplacian(side: int) -> sp.csr_matrix:
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(side, side))
    I = sp.identity(side)
    return (sp.kron(I, T) + sp.kron(T, I)).tocsr()


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def bench_gradkit(K, b, device, iters, repeats):
    import gradkit as gk
    A = gk.sparse.from_scipy(K, device=device)
    x = gk.array(b, device=device)
    y = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
    spmv = timed(lambda: (gk.sparse.bsr_mv(A, x, y), gk.synchronize(device)), repeats)
    bb = gk.array(b, device=device)

    def cg():
        xs = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
        gk.linalg.cg(A, bb, xs, tol=0.0, maxiter=iters, check_every=iters)
        gk.synchronize(device)
    return spmv, timed(cg, max(1, repeats // 5))


def bench_scipy(K, b, iters, repeats):
    import scipy.sparse.linalg as spla
    spmv = timed(lambda: K @ b, repeats)
    return spmv, timed(lambda: spla.cg(K, b, rtol=1e-300, atol=0.0, maxiter=iters), max(1, repeats // 5))


def bench_warp(K, b, iters, repeats):
    import warp as wp
    import warp.optim.linear as wl
    import warp.sparse as ws
    wp.config.quiet = True
    wp.init()
    with wp.ScopedDevice("cpu"):
        A = ws.bsr_zeros(K.shape[0], K.shape[1], wp.float64)
        coo = K.tocoo()
        ws.bsr_set_from_triplets(A, wp.array(coo.row.astype(np.int32)), wp.array(coo.col.astype(np.int32)),
                                 wp.array(coo.data))
        x = wp.array(b, dtype=wp.float64)
        y = wp.zeros(K.shape[0], dtype=wp.float64)
        spmv = timed(lambda: (ws.bsr_mv(A, x, y), wp.synchronize()), repeats)

        def cg():
            xs = wp.zeros(K.shape[0], dtype=wp.float64)
            wl.cg(A, x, xs, tol=0.0, atol=0.0, maxiter=iters, check_every=0)
            wp.synchronize()
        return spmv, timed(cg, max(1, repeats // 5))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", type=int, default=1000, help="grid side (side² unknowns)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--cg-iters", type=int, default=100)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args(argv)
    K = laplacian(args.side)
    b = np.random.default_rng(0).standard_normal(K.shape[0])
    rows = {}
    rows["gradkit (" + args.device + ")"] = bench_gradkit(K, b, args.device, args.cg_iters, args.repeats)
    rows["SciPy"] = bench_scipy(K, b, args.cg_iters, args.repeats)
    try:
        rows["warp.sparse (cpu)"] = bench_warp(K, b, args.cg_iters, args.repeats)
    except ImportError:
        rows["warp.sparse (cpu)"] = (float("nan"), float("nan"))
    print(f"2-D Laplacian, {K.shape[0]} unknowns, {K.nnz} non-zeros, float64; CG: {args.cg_iters} iterations")
    print("| library | SpMV (ms) | CG (ms) |\n|---|---|---|")
    for name, (spmv, cg) in rows.items():
        print(f"| {name} | {spmv:.2f} | {cg:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
