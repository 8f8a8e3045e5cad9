"""Smoke tests of the benchmark harness (benchmarks/run.py): tiny sizes, every workload, results checked
against the float64 references inside the workers. gradkit always; Warp, Taichi, Dr.Jit and JAX when
importable (make test installs them, best effort)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import DEVICES

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "run.py"
ALL_CASES = ["W1 forward", "W1 backward", "W2 forward", "W2 backward", "W3 forward", "W3 backward",
             "W4 forward", "W4 backward", "W5 plain", "W5 taped", "W5 backward", "W6 cold", "W6 warm",
             "W7 n=250"]


def run_bench(tmp_path, *args) -> dict:
    out = tmp_path / "bench-results"
    env = dict(os.environ, GRADKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(RUN), "--smoke", "--out", str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    doc["markdown"] = (out / "results.md").read_text()
    return doc


def figures(doc: dict, label: str) -> dict:
    return {r["case"]: r for r in doc["results"] if r["system"] == label}


def test_gradkit_smoke(tmp_path):
    devices = [d for d in DEVICES if d.split(":")[0] in ("cpu", "opencl")]
    if not devices:
        pytest.skip("no gradkit cpu/opencl device")
    doc = run_bench(tmp_path, "--peers", "none", "--devices", ",".join(devices))
    for dev in devices:
        got = figures(doc, f"gradkit {dev}")
        errors = {c: r["error"] for c, r in got.items() if "error" in r}
        assert not errors, errors
        assert set(ALL_CASES) <= set(got), sorted(set(ALL_CASES) - set(got))
        for case in ALL_CASES:
            r = got[case]
            assert 0 < r["min"] <= r["median"], r
        assert got["W5 plain"]["unit"] == "us" and got["W6 cold"]["unit"] == "s" and got["W7 n=250"]["unit"] == "s"
        assert "min" in got["W6 warm - import numpy"]
        assert 0 < got["W1 forward"]["parallelism"] < 2 * os.cpu_count() + 1
    md = doc["markdown"]
    assert "| W3 backward | ms |" in md and "| W6 cold | s |" in md and "| W7 n=250 | s |" in md
    assert "| W4 forward | " in md.split("### Effective bandwidth")[1]          # GB/s of memory-bound rows
    readme = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "readme_table.py"),
                             str(tmp_path / "bench-results" / "results.json")], capture_output=True, text=True,
                            check=True).stdout
    assert readme.startswith("| workload | gradkit ") and "| W1 streaming" in readme


@pytest.mark.parametrize("peer,module,compiles", [("warp", "warp", True), ("taichi", "taichi", True),
                                                  ("drjit", "drjit", False), ("jax", "jax", False)])
def test_peer_smoke(tmp_path, peer, module, compiles):
    """Every peer's cases run and pass their float64 checks; W7 (compile time) is measured against Warp and
    Taichi only."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (make bench installs it)")
    doc = run_bench(tmp_path, "--devices", "none", "--peers", peer)
    label = doc["systems"][0]["label"]
    got = figures(doc, label)
    errors = {c: r["error"] for c, r in got.items() if "error" in r}
    assert doc["systems"][0]["status"] == "ok", doc["systems"][0]
    assert not errors, errors
    expected = set(ALL_CASES) if compiles else {c for c in ALL_CASES if not c.startswith("W7")}
    assert expected <= set(got), sorted(expected - set(got))
    assert compiles or not any(c.startswith("W7") for c in got)
    for case in expected:
        assert 0 < got[case]["min"] <= got[case]["median"], got[case]


def test_missing_peer_is_na(tmp_path):
    """A peer that cannot run (here: Warp on a CUDA device this machine lacks, or Warp not installed)
    is a column of n/a with the reason, not a crash; gradkit's own figures are unaffected."""
    doc = run_bench(tmp_path, "--devices", "cpu", "--peers", "warp", "--warp-device", "cuda:9",
                    "--workloads", "W1")
    warp = next(s for s in doc["systems"] if s["system"] == "warp")
    assert warp["status"] == "n/a" and warp["reason"]
    assert "n/a [1]" in doc["markdown"] and warp["reason"].split("\n")[0][:40] in doc["markdown"]
    got = figures(doc, "gradkit cpu")
    assert "min" in got["W1 forward"]
