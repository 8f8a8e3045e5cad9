"""The GPU check script (benchmarks/gpu_check.py) in --smoke mode on CPU OpenCL (PoCL), and the whole-program
rows of `make bench` (benchmarks/programs.py through run.py's P workload): the JSON and Markdown they write,
with program sources given as small modules (one working, one failing, one missing)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.benchmarks.bench_modules import load
from tests.conftest import DEVICES

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _module(name: str):
    return load(name)


gpu_check = _module("gpu_check")
programs = _module("programs")

TOY = '''
def run(quick=False):
    assert quick
    return [{"program": "toy", "system": "gradkit.toy", "first_iter_s": 0.5, "per_iter_s": 0.01},
            {"program": "toy", "system": "toy", "first_step_s": 2.0, "per_step_s": 0.04},
            {"system": "gradkit (cpu)", "case": "cg", "ms": 3.0}, {"system": "SciPy", "case": "cg", "ms": 6.0}]
'''
BROKEN = "def run(quick=False):\n    raise RuntimeError('no such example here')\n"


def _sources(tmp_path) -> str:
    (tmp_path / "toy_prog.py").write_text(TOY)
    (tmp_path / "broken_prog.py").write_text(BROKEN)
    return f"toy={tmp_path / 'toy_prog.py'},broken={tmp_path / 'broken_prog.py'},gone={tmp_path / 'gone.py'}"


def test_gpu_check_smoke_on_cpu_opencl(tmp_path):
    devices = [d for d in DEVICES if d.startswith("opencl")]
    if not devices:
        pytest.skip("no OpenCL device (PoCL) in GRADKIT_TEST_DEVICES")
    (tmp_path / "toy_prog.py").write_text(TOY)
    out = tmp_path / "results"
    env = dict(os.environ, GRADKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--smoke", "--device",
                           devices[0], "--peers", "none", "--wheelhouse", str(tmp_path / "no-wheels"),
                           "--program-sources", f"toy={tmp_path / 'toy_prog.py'}", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (js,) = out.glob("gpu-check-*-smoke.json")
    doc = json.loads(js.read_text())
    steps = {s["name"]: s for s in doc["steps"]}
    assert [s["name"] for s in doc["steps"]] == ["install", "tests", "bench", "programs"]
    assert all(s["status"] == "ok" for s in doc["steps"]), doc["steps"]
    assert doc["meta"]["device"] == devices[0] and doc["meta"]["smoke"] is True
    assert steps["tests"]["counts"].get("passed", 0) > 0 and "failed" not in steps["tests"]["counts"]
    got = {r["case"]: r for r in steps["bench"]["results"]["results"] if r["system"] == f"gradkit {devices[0]}"}
    for case in ("W1 forward", "W1 backward", "W2 backward", "W3 backward", "W4 forward", "W4 backward"):
        assert 0 < got[case]["min"] <= got[case]["median"], got.get(case)
    assert {r["program"] for r in steps["programs"]["rows"]} == {"toy", "sparse cg"}
    md = js.with_suffix(".md").read_text()
    assert "| tests | ok |" in md and "| bench | ok |" in md and "| W4 backward | ms |" in md
    assert "| toy | toy | toy | 500 ms | 2 s | 4.00x | 10 ms | 40 ms | 4.00x |" in md


def test_real_programs_in_a_bench_run(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke", "--devices", "none",
                           "--peers", "none", "--workloads", "P", "--program-sources", _sources(tmp_path),
                           "--out", str(out), "--results-dir", str(tmp_path / "kept")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    rows = doc["programs"]
    ok = [r for r in rows if "error" not in r]
    assert {(r["program"], r["system"]) for r in ok} == {("toy", "gradkit.toy"), ("toy", "toy"),
                                                         ("sparse cg", "gradkit (cpu)"), ("sparse cg", "SciPy")}
    toy = {r["system"]: r for r in ok if r["program"] == "toy"}
    assert toy["toy"]["first_s"] == 2.0 and toy["toy"]["per_iter_s"] == 0.04
    errors = {r["source"]: r["error"] for r in rows if "error" in r}
    assert set(errors) == {"broken", "gone"}
    assert "no such example here" in errors["broken"] and "gone.py" in errors["gone"]
    md = (out / "results.md").read_text()
    assert "## Real programs" in md and "| sparse cg | toy | SciPy | — | — | — | 3 ms | 6 ms | 2.00x |" in md
    assert "broken: n/a (" in md
    kept = list((tmp_path / "kept").glob("*.md"))
    assert len(kept) == 1 and kept[0].read_text() == md
    table = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "readme_table.py"), str(out / "results.json")],
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "**Real programs**" in table.stdout


def test_speedups_are_each_gpu_peers_time_over_gradkits():
    doc = {"systems": [{"label": "gradkit opencl:0", "system": "gradkit"}, {"label": "Warp cuda", "system": "warp"},
                       {"label": "JAX cuda", "system": "jax"}],
           "results": [{"system": "gradkit opencl:0", "case": "W1 forward", "min": 2.0},
                       {"system": "Warp cuda", "case": "W1 forward", "min": 3.0},
                       {"system": "JAX cuda", "case": "W1 forward", "min": 1.0},
                       {"system": "gradkit opencl:0", "case": "W4 backward", "min": 1.0},
                       {"system": "Warp cuda", "case": "W4 backward", "error": "n/a"}]}
    assert gpu_check.speedups(doc) == {"W1 forward vs Warp cuda": 1.5, "W1 forward vs JAX cuda": 0.5}


def test_normalise_reads_each_sources_fields():
    assert programs.normalise("warp", {"program": "sph", "system": "warp", "first_step_s": 1.5, "per_step_s": 0.2,
                                       "size": "n=1000"}) == \
        {"source": "warp", "program": "sph", "system": "warp", "first_s": 1.5, "per_iter_s": 0.2, "size": "n=1000"}
    assert programs.normalise("sparse", {"system": "SciPy", "case": "spmv", "ms": float("nan")})["per_iter_s"] is None


def test_a_wheel_past_the_carry_limit_travels_in_parts(tmp_path):
    """prepare cuts it into part-1..N; calls 1..N-1 stage their part, the last joins them (digest checked);
    a part never carried, or changed, leaves the wheel out with the reason."""
    rng = __import__("random").Random(43)
    data = bytes(rng.randrange(256) for _ in range(1000))
    big = tmp_path / "big-1.0-py3-none-any.whl"
    big.write_bytes(data)
    house = tmp_path / ".whl"
    (house / "wheels").mkdir(parents=True)
    entry = gpu_check.split_wheel(big, house, part_size=300)
    (house / "wheels" / "parts.json").write_text(json.dumps([entry]))
    assert entry["parts"] == [f"part-{k}/{big.name}.{k}" for k in (1, 2, 3, 4)]
    stage = tmp_path / "stage"
    for k in (1, 2, 3):                     # calls 1-3: each carries its part alone
        carried = tmp_path / f"call{k}"
        (carried / f"part-{k}").mkdir(parents=True)
        (carried / f"part-{k}" / f"{big.name}.{k}").write_bytes((house / entry["parts"][k - 1]).read_bytes())
        assert gpu_check.stage_parts(carried, stage) == [f"{big.name}.{k}"]
    last = tmp_path / "call4"
    (last / "wheels").mkdir(parents=True)
    (last / "wheels" / "parts.json").write_text(json.dumps([entry]))
    (last / "part-4").mkdir()
    (last / "part-4" / f"{big.name}.4").write_bytes((house / entry["parts"][3]).read_bytes())
    joined, missing = gpu_check.join_parts(last, tmp_path / "out", stage)
    assert missing == [] and pathlib.Path(joined[0]).read_bytes() == data
    (stage / f"{big.name}.2").unlink()
    joined, missing = gpu_check.join_parts(last, tmp_path / "out2", stage)
    assert joined == [] and f"{big.name}.2" in missing[0]
    (stage / f"{big.name}.2").write_bytes(b"x" * 300)
    joined, missing = gpu_check.join_parts(last, tmp_path / "out3", stage)
    assert joined == [] and "SHA-256" in missing[0]
