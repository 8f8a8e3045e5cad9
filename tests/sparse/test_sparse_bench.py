"""benchmarks/sparse_bench.py at a tiny size: `measure` (what `run(quick)` calls) gives one row per case
and system with a finite time, Warp's included when it imports, and its table reads them back."""

from __future__ import annotations

import importlib.util
import math
import pathlib

PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "sparse_bench.py"
spec = importlib.util.spec_from_file_location("sparse_bench", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_rows_and_table():
    rows = bench.measure(side=12, device="cpu", iters=4, repeats=1,
                         warp=importlib.util.find_spec("warp") is not None)
    cases = {(r["system"], r["case"]) for r in rows}
    assert {("gradkit (cpu)", c) for c in ("spmv", "cg", "cg taped", "cg adjoint")} <= cases
    assert {("SciPy", "spmv"), ("SciPy", "cg")} <= cases
    for r in rows:
        assert set(r) >= {"case", "system", "ms"} and r["unknowns"] == 144
        assert "error" in r or (math.isfinite(r["ms"]) and r["ms"] > 0)
    text = bench.table(rows)
    assert text.count("\n") == 1 + len({r["system"] for r in rows}) and "| gradkit (cpu) |" in text
