"""benchmarks/warp_programs.py's per-kernel view (`kernel_times`, `--kernels`) at dem's quick size, and dem's
substeps: each system's rows name every kernel the example launches and its hash-grid build, with the launch
counts a step makes and positive times, the Markdown table has a line per kernel, and a step runs the
substeps its size sets (the example's constructor captures its own 64 as a graph: the benchmark captures
them again)."""

from __future__ import annotations


import pytest

from tests.benchmarks.bench_modules import load

pytest.importorskip("warp")


def _bench():
    return load("warp_programs", "warp_programs_k")


def test_kernel_times_rows_and_table():
    wpp = _bench()
    substeps = wpp.SIZES["dem"][1]["substeps"]
    rows = wpp.kernel_times("dem", quick=True, steps=1)
    by = {(r["system"], r["kernel"]): r for r in rows}
    assert set(by) == {(s, k) for s in ("warp", "gradkit.warp") for k in ("HashGrid.build", "apply_forces", "integrate")}
    for (system, kernel), r in by.items():
        assert r["program"] == "dem" and r["wall_s"] > 0 and r["cpu_s"] >= 0
        assert r["calls"] == (1 if kernel == "HashGrid.build" else substeps), (system, kernel)
    table = wpp.markdown_kernels(rows).splitlines()
    assert len(table) == 2 + 3 and all(line.startswith("| dem | ") for line in table[2:])
    assert any("| apply_forces | " + f"{substeps:g} |" in line for line in table)


def test_dem_step_runs_the_substeps_its_size_sets():
    """gradkit.warp's captured graph launches each kernel once per substep of the size, at its time step."""
    wpp = _bench()
    size = wpp.SIZES["dem"][1]
    e, _ = wpp._make("dem", "gradkit.warp", size)
    names = [args[0].key for _, args, _ in e.graph.ops]
    assert names == ["apply_forces", "integrate"] * size["substeps"]
    assert e.sim_dt == pytest.approx(e.frame_dt / size["substeps"])
