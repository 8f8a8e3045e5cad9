"""SpMV and CG on a 2-D Laplacian (5-point, float64, 1x1 blocks): gradkit's gk.sparse / gk.linalg against
SciPy and warp.sparse / warp.optim.linear on this CPU, and the cost of a CG solve's adjoint (its tape
step's backward pass) relative to the forward solve (issue #45). Runs on its own:

    .venv/bin/python benchmarks/sparse_bench.py [--side 1000] [--device cpu] [--cg-iters 100] [--quick]

or from a harness as `run(quick=False) -> [{"case", "system", "ms", ...}]` (quick: a 300² grid).
Times are medians (and minima) over rounds that time every system in turn after a warm-up (compiles
excluded); CG runs a fixed number of iterations (tol 0, residual checked once at the end) without a
preconditioner, so every library does the same work. Warp's CG on the CPU runs far slower per iteration than the others (seconds per iteration at
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


def gradkit_cases(K, b, device, iters) -> dict:
    """{case: fn} for gradkit: the product, an untaped CG, and a taped CG with its backward pass (which
    solves Aᵀλ = x̄ by the same CG; the ratio of the two is the adjoint's relative cost, about 1)."""
    import gradkit as gk
    A = gk.sparse.from_scipy(K, device=device)
    x = gk.array(b, device=device)
    y = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
    bb = gk.array(b, device=device)

    def cg():
        xs = gk.zeros(K.shape[0], dtype=gk.float64, device=device)
        gk.linalg.cg(A, bb, xs, tol=0.0, maxiter=iters, check_every=iters)
        gk.synchronize(device)

    At = gk.sparse.from_scipy(K, device=device, requires_grad=True)
    bt = gk.array(b, device=device, requires_grad=True)
    seed = gk.array(np.random.default_rng(1).standard_normal(K.shape[0]), device=device)

    def taped() -> dict:
        xs = gk.zeros(K.shape[0], dtype=gk.float64, device=device, requires_grad=True)
        tape = gk.Tape()
        t = time.perf_counter()
        with tape:
            gk.linalg.cg(At, bt, xs, tol=0.0, maxiter=iters, check_every=iters)
        gk.synchronize(device)
        t1 = time.perf_counter()
        tape.backward(grads={xs: seed})
        gk.synchronize(device)
        t2 = time.perf_counter()
        At.values.grad.zero_()
        bt.grad.zero_()
        return {"cg taped": t1 - t, "cg adjoint": t2 - t1}
    return {"spmv": lambda: (gk.sparse.bsr_mv(A, x, y), gk.synchronize(device)), "cg": cg, "cg taped": taped}


def scipy_cases(K, b, iters) -> dict:
    import scipy.sparse.linalg as spla
    return {"spmv": lambda: K @ b, "cg": lambda: spla.cg(K, b, rtol=1e-300, atol=0.0, maxiter=iters)}


def warp_cases(K, b, iters) -> dict:
    """Warp's product, and its CG run for WARP_CG_ITERS iterations (timed once, not interleaved)."""
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

    def spmv():
        with wp.ScopedDevice("cpu"):
            ws.bsr_mv(A, x, y)
            wp.synchronize()

    def cg(n=min(iters, WARP_CG_ITERS)):
        with wp.ScopedDevice("cpu"):
            xs = wp.zeros(K.shape[0], dtype=wp.float64)
            wl.cg(A, x, xs, tol=0.0, atol=0.0, maxiter=n, check_every=n)
            wp.synchronize()
    return {"spmv": spmv, "cg": cg}


def _time(fn) -> dict | float:
    t = time.perf_counter()
    out = fn()
    return out if isinstance(out, dict) else time.perf_counter() - t


def measure(side: int = 1000, device: str = "cpu", iters: int = 100, repeats: int = 10,
            warp: bool = True) -> list[dict]:
    """Rows {case, system, ms (median), min_ms, unknowns, iterations}: every system's cases run once to
    warm up, then `repeats` rounds each timing every case of every system in turn (the products
    `repeats` times a round), so a busy machine's slow spells fall on all of them alike."""
    K = laplacian(side)
    b = np.random.default_rng(0).standard_normal(K.shape[0])
    systems = {f"gradkit ({device})": gradkit_cases(K, b, device, iters), "SciPy": scipy_cases(K, b, iters)}
    errors, warp_cg = {}, None
    if warp:
        try:
            cases = warp_cases(K, b, iters)
            cases["cg"](1)                                      # compiles Warp's kernels
            warp_cg = _time(cases.pop("cg")) * 1e3 * iters / min(iters, WARP_CG_ITERS)
            systems["warp.sparse (cpu)"] = cases
        except ImportError as exc:
            errors["warp.sparse (cpu)"] = f"warp not importable: {exc}"
    times: dict = {}
    for system, cases in systems.items():
        for fn in cases.values():
            fn()
    for _ in range(repeats):
        for system, cases in systems.items():
            for case, fn in cases.items():
                for _ in range(repeats if case == "spmv" else 1):
                    t = _time(fn)
                    for c, v in (t if isinstance(t, dict) else {case: t}).items():
                        times.setdefault((system, c), []).append(v * 1e3)
    rows = [{"case": case, "system": system, "ms": statistics.median(v), "min_ms": min(v),
             "unknowns": K.shape[0], **({} if case == "spmv" else {"iterations": iters})}
            for (system, case), v in times.items()]
    if warp_cg is not None:
        rows.append({"case": "cg", "system": "warp.sparse (cpu)", "ms": warp_cg, "min_ms": warp_cg,
                     "unknowns": K.shape[0], "iterations": iters,
                     "note": f"{min(iters, WARP_CG_ITERS)} iterations run once, time scaled to {iters}"})
    for system, error in errors.items():
        rows.append({"case": "spmv", "system": system, "ms": float("nan"), "unknowns": K.shape[0],
                     "error": error})
    return rows


def run(quick: bool = False) -> list[dict]:
    """The benchmark for a harness: 10^6 unknowns and 100 CG iterations, or (quick) 300² and 20."""
    if quick:
        return measure(side=300, iters=20, repeats=5)
    return measure(side=1000, iters=100, repeats=5)


def table(rows: list[dict]) -> str:
    """A Markdown table: a line per system, each time as its median (minimum), and the adjoint's ratio."""
    by = {}
    for r in rows:
        by.setdefault(r["system"], {})[r["case"]] = r
    lines = ["| library | SpMV (ms) | CG (ms) | taped CG (ms) | its adjoint (ms) | adjoint / forward |",
             "|---|---|---|---|---|---|"]

    def cell(c, case):
        r = c.get(case)
        if r is None or r["ms"] != r["ms"]:
            return "n/a"
        return f"{r['ms']:.2f}" + (f" ({r['min_ms']:.2f})" if r.get("min_ms", r["ms"]) != r["ms"] else "")
    for system, c in by.items():
        ratio = f"{c['cg adjoint']['ms'] / c['cg taped']['ms']:.2f}" if "cg taped" in c else "n/a"
        lines.append(f"| {system} | {cell(c, 'spmv')} | {cell(c, 'cg')} | {cell(c, 'cg taped')} | "
                     f"{cell(c, 'cg adjoint')} | {ratio} |")
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
    print(f"2-D Laplacian, {args.side ** 2} unknowns, float64; CG: {args.cg_iters} iterations; "
          "median (min) of interleaved rounds")
    print(table(rows))
    for r in rows:
        if "note" in r or "error" in r:
            print(f"{r['system']} {r['case']}: {r.get('note', r.get('error'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
