"""SpMV and CG on a 2-D Laplacian (5-point, float64, 1x1 blocks): gradkit's gk.sparse / gk.linalg against
SciPy and warp.sparse / warp.optim.linear on this CPU, and the cost of a CG solve's adjoint (its tape
step's backward pass) relative to the forward solve (issue #45). Runs on its own:

    .venv/bin/python benchmarks/sparse_bench.py [--side 1000] [--device cpu] [--cg-iters 100] [--quick]

or from a harness as `run(quick=False) -> [{"case", "system", "ms", ...}]` (quick: a 300² grid).
Times are the median of repeats after a warm-up (compiles excluded); CG runs a fixed number of
iterations (tol 0, residual checked once at the end) without a preconditioner, so every library does the
same work. Warp's CG on the CPU runs far slower per iteration than the others (seconds per iteration at
10^6 unknowns with Warp 1.19), so it runs `WARP_CG_ITERS` iterations and its row says so."""

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

WARP_CG_ITERS = 3


def laplacian(side: int) -> sp.csr_matrix:
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(side, side))
    I = sp.identity(side)
    return (sp.kron(I, T) + sp.kron(T, I)).tocsr()


def timed(fn, repeats: int) -> float:
    """Median wall milliseconds of `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def bench_gradkit(K, b, device, iters, repeats) -> dict:
    import gradkit as gk
    A = gk.sparse.from_scipy(K, device=device)
    x = gk.array(b, device=device)
    y = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
    out = {"spmv": timed(lambda: (gk.sparse.bsr_mv(A, x, y), gk.synchronize(device)), repeats)}
    bb = gk.array(b, device=device)

    def cg():
        xs = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
        gk.linalg.cg(A, bb, xs, tol=0.0, maxiter=iters, check_every=iters)
        gk.synchronize(device)
    out["cg"] = timed(cg, max(1, repeats // 5))
    out.update(adjoint_ratio(gk, K, b, device, iters, max(1, repeats // 5)))
    return out


def adjoint_ratio(gk, K, b, device, iters, repeats) -> dict:
    """A taped CG solve (fixed iterations) and its backward pass, which solves Aᵀλ = x̄ by the same CG:
    their times and ratio (about 1 expected: the same iterations plus one outer-product kernel)."""
    A = gk.sparse.from_scipy(K, device=device, requires_grad=True)
    bb = gk.array(b, device=device, requires_grad=True)
    seed = gk.array(np.random.default_rng(1).standard_normal(K.shape[0]), device=device)
    forward, backward = [], []
    for _ in range(repeats + 1):
        xs = gk.zeros(K.shape[0], dtype=gk.float64, device=device, requires_grad=True)
        tape = gk.Tape()
        t = time.perf_counter()
        with tape:
            gk.linalg.cg(A, bb, xs, tol=0.0, maxiter=iters, check_every=iters)
        gk.synchronize(device)
        t1 = time.perf_counter()
        tape.backward(grads={xs: seed})
        gk.synchronize(device)
        t2 = time.perf_counter()
        forward.append(t1 - t)
        backward.append(t2 - t1)
        A.values.grad.zero_()
        bb.grad.zero_()
    fwd, bwd = statistics.median(forward[1:]) * 1e3, statistics.median(backward[1:]) * 1e3
    return {"cg taped": fwd, "cg adjoint": bwd}


def bench_scipy(K, b, iters, repeats) -> dict:
    import scipy.sparse.linalg as spla
    return {"spmv": timed(lambda: K @ b, repeats),
            "cg": timed(lambda: spla.cg(K, b, rtol=1e-300, atol=0.0, maxiter=iters), max(1, repeats // 5))}


def bench_warp(K, b, iters, repeats) -> dict:
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
        out = {"spmv": timed(lambda: (ws.bsr_mv(A, x, y), wp.synchronize()), repeats)}
        n = min(iters, WARP_CG_ITERS)

        def cg():
            xs = wp.zeros(K.shape[0], dtype=wp.float64)
            wl.cg(A, x, xs, tol=0.0, atol=0.0, maxiter=n, check_every=n)
            wp.synchronize()
        out["cg"] = timed(cg, 1) * iters / n          # per-iteration cost times the others' iterations
        out["cg iterations run"] = n
        return out


def measure(side: int = 1000, device: str = "cpu", iters: int = 100, repeats: int = 10,
            warp: bool = True) -> list[dict]:
    """Rows {case, system, ms} (and `unknowns`, `iterations`; notes where a row is extrapolated)."""
    K = laplacian(side)
    b = np.random.default_rng(0).standard_normal(K.shape[0])
    results = {f"gradkit ({device})": bench_gradkit(K, b, device, iters, repeats),
               "SciPy": bench_scipy(K, b, iters, repeats)}
    if warp:
        try:
            results["warp.sparse (cpu)"] = bench_warp(K, b, iters, repeats)
        except ImportError as exc:
            results["warp.sparse (cpu)"] = {"error": f"warp not importable: {exc}"}
    rows = []
    for system, r in results.items():
        if "error" in r:
            rows.append({"case": "spmv", "system": system, "ms": float("nan"), "unknowns": K.shape[0],
                         "error": r["error"]})
            continue
        for case, ms in r.items():
            if case == "cg iterations run":
                continue
            row = {"case": case, "system": system, "ms": ms, "unknowns": K.shape[0]}
            if case != "spmv":
                row["iterations"] = iters
            if case == "cg" and "cg iterations run" in r:
                row["note"] = f"{r['cg iterations run']} iterations run, time scaled to {iters}"
            rows.append(row)
    return rows


def run(quick: bool = False) -> list[dict]:
    """The benchmark for a harness: 10^6 unknowns and 100 CG iterations, or (quick) 300² and 20."""
    if quick:
        return measure(side=300, iters=20, repeats=5)
    return measure(side=1000, iters=100, repeats=10)


def table(rows: list[dict]) -> str:
    """A Markdown table: one line per system, SpMV and CG columns, plus the adjoint ratio."""
    by = {}
    for r in rows:
        by.setdefault(r["system"], {})[r["case"]] = r["ms"]
    lines = ["| library | SpMV (ms) | CG (ms) | taped CG (ms) | its adjoint (ms) | adjoint / forward |",
             "|---|---|---|---|---|---|"]
    fmt = lambda v: "n/a" if v is None or v != v else f"{v:.2f}"
    for system, c in by.items():
        ratio = c["cg adjoint"] / c["cg taped"] if "cg taped" in c else None
        lines.append(f"| {system} | {fmt(c.get('spmv'))} | {fmt(c.get('cg'))} | {fmt(c.get('cg taped'))} | "
                     f"{fmt(c.get('cg adjoint'))} | {fmt(ratio)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", type=int, default=1000, help="grid side (side² unknowns)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--cg-iters", type=int, default=100)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="300² unknowns, 20 CG iterations")
    p.add_argument("--no-warp", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.side, args.cg_iters, args.repeats = 300, 20, 5
    rows = measure(args.side, args.device, args.cg_iters, args.repeats, warp=not args.no_warp)
    print(f"2-D Laplacian, {args.side ** 2} unknowns, float64; CG: {args.cg_iters} iterations")
    print(table(rows))
    for r in rows:
        if "note" in r or "error" in r:
            print(f"{r['system']} {r['case']}: {r.get('note', r.get('error'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
