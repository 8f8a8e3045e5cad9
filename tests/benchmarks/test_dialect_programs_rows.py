"""benchmarks/dialect_programs.py's bookkeeping (no program is run): a worker for our own programs must not
inherit $DIFFTAICHI_EXAMPLES as its --src (it then failed and make bench lost those rows without a word), and a
program and system that gave no result becomes an error row."""

from __future__ import annotations

import subprocess

from tests.benchmarks.bench_modules import load

dialect_programs = load("dialect_programs")


def test_own_program_workers_run_without_difftaichis_folder(monkeypatch):
    seen = []

    def fake_run(cmd, **kwargs):
        seen.append((cmd, kwargs["env"]))
        return subprocess.CompletedProcess(cmd, 0, 'RESULT {"wall": [1.0]}\n', "")

    monkeypatch.setenv("DIFFTAICHI_EXAMPLES", "/somewhere/examples")
    monkeypatch.setattr(dialect_programs.subprocess, "run", fake_run)
    assert dialect_programs._run(None, "spring_robot", ("gradkit.taichi", None), 2, 10) == {"wall": [1.0]}
    assert dialect_programs._run("/src", "mass_spring", ("gradkit.taichi", None), 2, 10) == {"wall": [1.0]}
    (own_cmd, own_env), (theirs_cmd, theirs_env) = seen
    assert "DIFFTAICHI_EXAMPLES" not in own_env and "--src" not in own_cmd
    assert theirs_env["DIFFTAICHI_EXAMPLES"] == "/somewhere/examples" and theirs_cmd[-2:] == ["--src", "/src"]


def test_a_missing_result_is_an_error_row():
    results = {"spring_robot": {"gradkit.taichi": {}}, "mls_mpm": {}}
    targets = {"gradkit.taichi": None, "taichi": None}
    rows = dialect_programs._failed(results, ["spring_robot", "mls_mpm"], targets, "")
    assert {(r["program"], r["system"]) for r in rows} == {("spring_robot", "taichi"), ("mls_mpm", "gradkit.taichi"),
                                                          ("mls_mpm", "taichi")}
    assert all("error" in r for r in rows)
