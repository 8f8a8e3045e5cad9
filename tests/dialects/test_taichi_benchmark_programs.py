"""benchmarks/dialect_programs.py without DiffTaichi's sources: our own programs run in its worker at the
quick sizes (values finite and repeatable, one time per iteration) and `run()` returns the rows `make
bench` collects, steady-state per-iteration times from the later half of each run."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("gk_dialect_programs", ROOT / "benchmarks" / "dialect_programs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("prog", ["spring_robot", "mls_mpm"])
def test_own_programs_run_in_the_worker(prog):
    bench = _bench()
    out = bench.own_worker(prog, "gradkit.taichi", 2, quick=True)
    assert len(out["wall"]) == len(out["cpu"]) == len(out["loss"]) == 2
    assert all(math.isfinite(v) and v > 0 for v in out["loss"])
    assert out["loss"][0] == out["loss"][1]          # iterate() starts from the same state each time
    assert "import gradkit.taichi as ti" in bench._own_text(prog, "gradkit.taichi", True)


def test_run_returns_rows_of_steady_times(monkeypatch):
    bench = _bench()
    fake = {"load_wall": 0.5, "load_cpu": 0.4, "wall": [9.0, 5.0, 1.0, 1.0, 2.0, 2.0],
            "cpu": [8.0, 4.0, 1.0, 1.0, 1.0, 1.0], "loss": [1.0] * 6}
    calls = []

    def fake_run(src, prog, target, iters, timeout, quick=False, env_extra=None):
        calls.append((prog, target[0], quick))
        return fake

    monkeypatch.setattr(bench, "_run", fake_run)
    monkeypatch.setattr(bench, "_available", lambda m: True)
    rows = bench.run(quick=True)
    assert {(r["program"], r["system"]) for r in rows} == {(p, s) for p in bench.OWN_PROGRAMS
                                                          for s in ("gradkit.taichi", "taichi")}
    for r in rows:
        assert set(r) == {"program", "system", "first_iter_s", "per_iter_s", "size", "steps"}
        assert r["steps"] == bench.QUICK_SIZES[r["program"]]["STEPS"] and "float32" in r["size"]
        assert r["first_iter_s"] == 9.0 and r["per_iter_s"] == 2.0     # median of the later half [1, 2, 2]
    # the systems alternate within each program
    assert [c[1] for c in calls[:2]] == ["gradkit.taichi", "taichi"] and all(c[2] for c in calls)


@pytest.mark.parametrize("cache", ["cold", "warm", "as-is"])
def test_cache_modes_point_each_run_at_its_caches(monkeypatch, cache):
    """cold: every timed run its own empty folders; warm: one folder per system, filled by an untimed run
    first; as-is: the user's caches (no variables set)."""
    bench = _bench()
    calls = []

    def fake_run(src, prog, target, iters, timeout, quick=False, env_extra=None):
        env = dict(env_extra or {})
        if env:     # the folder exists and is the caller's alone (GRADKIT's cache refuses others)
            parent = pathlib.Path(env["GRADKIT_CACHE_DIR"]).parent
            assert parent.is_dir() and parent.stat().st_mode & 0o077 == 0
            assert pathlib.Path(env["TI_OFFLINE_CACHE_FILE_PATH"]).parent == parent
        calls.append((prog, target[0], iters, env.get("GRADKIT_CACHE_DIR")))
        return {"load_wall": 0.1, "load_cpu": 0.1, "wall": [3.0, 1.0], "cpu": [3.0, 1.0], "loss": [1.0, 1.0]}

    monkeypatch.setattr(bench, "_run", fake_run)
    targets = {"a": ("gradkit.taichi", None), "b": ("taichi", None)}
    out = bench.compare(None, ["mls_mpm"], targets, 2, 2, 10.0, True, cache)
    assert set(out["mls_mpm"]) == {"a", "b"}
    timed = [c for c in calls if c[2] == 2]
    assert len(timed) == 4 and [c[1] for c in timed] == ["gradkit.taichi", "taichi"] * 2
    dirs = [c[3] for c in timed]
    if cache == "as-is":
        assert calls == timed and dirs == [None] * 4
    elif cache == "cold":
        assert calls == timed and len(set(dirs)) == 4
    else:
        assert [c[2] for c in calls[:2]] == [1, 1]                      # the untimed warm-up runs
        assert dirs[0] == dirs[2] == calls[0][3] and dirs[1] == dirs[3] == calls[1][3] and dirs[0] != dirs[1]
    with pytest.raises(ValueError):
        bench.compare(None, ["mls_mpm"], targets, 2, 1, 10.0, True, "lukewarm")
