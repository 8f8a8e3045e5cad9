"""benchmarks/warp_programs.py at its quick sizes: `run(quick=True)` gives a row per program and system with
positive times (the rows `make bench` reads), the start containing the first step; the command line writes
the JSON (with the load average) and prints the table, and refuses `--cold` once warp or gradkit is imported
(their kernel caches could no longer be pointed elsewhere)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

pytest.importorskip("warp")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("_warp_programs_bench", ROOT / "benchmarks" / "warp_programs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_run_rows_and_command_line(tmp_path, monkeypatch, capsys):
    wpp = _bench()
    monkeypatch.setitem(sys.modules, "pxr", wpp._stand_in_pxr(8))      # diffray's bunny.usd, undone after
    rows = wpp.run(quick=True, programs=("dem", "diffray", "mesh"), steps=1)
    assert [(r["program"], r["system"]) for r in rows] == [
        ("dem", "warp"), ("dem", "gradkit.warp"), ("diffray", "warp"), ("diffray", "gradkit.warp"),
        ("mesh", "warp"), ("mesh", "gradkit.warp")]
    for r in rows:
        assert r["first_step_s"] > 0 and r["per_step_s"] > 0 and r["per_step_cpu_s"] >= 0
        assert r["start_s"] > r["first_step_s"] and r["device"] == "cpu"
        assert r["size"] == next(o["size"] for o in rows if o["program"] == r["program"])
    out = tmp_path / "w.json"
    wpp.main(["--quick", "--steps", "1", "--programs", "dem", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert {r["system"] for r in doc["rows"]} == {"warp", "gradkit.warp"} and doc["quick"] is True
    assert doc["cold"] is False and len(doc["load_before"]) == 3 and doc["device"] == "cpu"
    out = capsys.readouterr().out
    assert "| dem |" in out and "devices: gradkit.warp cpu, warp cpu;" in out
    with pytest.raises(SystemExit, match="already imported"):
        wpp.main(["--quick", "--cold", "--programs", "dem", "--json", str(out)])
