"""benchmarks/warp_examples_table.py (issue #40's closing table) in --quick mode on two cheap examples,
example_wave and example_raymarch: each row has its fields, gradkit's state agrees with Warp's run in the same
process, the command line prints the table and writes the JSON; and the table's own arithmetic (lines
changed besides the import, difference figures) against hand-made inputs. CPU only: the table compares
Warp's CPU device with gradkit.warp's."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from tests.benchmarks.bench_modules import load

pytest.importorskip("warp")


def _module(name: str):
    return load(name)


table = _module("warp_examples_table")
FIELDS = {"example", "file", "size", "edits", "diff", "state", "state_max_abs", "state_max_rel", "steps",
          "timed_steps", "start_s", "first_step_s", "warp_step_s", "gradkit_step_s", "ratio", "state_after_first_step",
          "warp_step_cpu_s", "gradkit_step_cpu_s"}


@pytest.fixture(scope="module")
def rows():
    return table.run(quick=True, examples=("wave", "raymarch"))


def test_quick_rows_agree_with_warp(rows):
    assert [r["example"] for r in rows] == ["wave", "raymarch"], rows
    for r in rows:
        assert "error" not in r and FIELDS <= set(r), r
        assert r["file"] == table.CASES[r["example"]].rel and r["steps"] == 2 and r["timed_steps"] == 1
        assert isinstance(r["edits"], int) and r["edits"] >= 0
        assert (r["edits"] == 0) == (r["diff"] == [])
        for key in ("warp_step_s", "gradkit_step_s", "ratio"):
            assert math.isfinite(r[key]) and r[key] > 0, key
        assert r["warp_step_cpu_s"] >= 0 and r["gradkit_step_cpu_s"] >= 0
        for system in table.SYSTEMS:
            assert r["start_s"][system] >= r["first_step_s"][system] > 0
        assert r["ratio"] == pytest.approx(r["gradkit_step_s"] / r["warp_step_s"])
        assert "grads" not in r                           # neither example takes gradients
        arrays = {k: v for k, v in r["state"].items() if k != "all"}
        assert set(arrays) == {"wave": {"grid", "verts"}, "raymarch": {"pixels"}}[r["example"]]
        assert set(r["state_after_first_step"]) == set(r["state"])
        for name, d in [*r["state"].items(), *r["state_after_first_step"].items()]:
            assert math.isfinite(d["max_abs"]) and math.isfinite(d["max_rel"]), name
            assert d["scale"] > 0.1, name                 # the example did something: not all zeros
            assert d["max_abs"] <= 1e-4 * d["scale"] and d["max_rel"] < 1e-3 and d["off"] == 0, (name, d)
        assert r["state_max_abs"] == max(d["max_abs"] for d in arrays.values())
        assert r["state"]["all"]["size"] == sum(d["size"] for d in arrays.values())
    md = table.markdown(rows)
    assert md.count("\n") == 3 and "| wave |" in md and "| raymarch |" in md


def test_command_line_writes_json_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "t.json"
    table.main(["--quick", "--examples", "wave", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "| wave | 128x128 grid" in printed and "load average" in printed
    doc = json.loads(out.read_text())
    assert doc["quick"] is True and [r["example"] for r in doc["rows"]] == ["wave"]
    with pytest.raises(SystemExit):
        table.main(["--examples", "no_such_example"])


def test_a_failing_example_is_an_error_row(monkeypatch):
    def broken(system, quick):
        raise RuntimeError("no such example here")

    monkeypatch.setattr(table.CASES["wave"], "make", broken)
    rows = table.run(quick=True, examples=("wave",))
    assert rows == [{"example": "wave", "file": "core/example_wave.py", "error": "RuntimeError: no such example here"}]
    assert "error: RuntimeError: no such example here" in table.markdown(rows)


def test_changed_lines_counts_edits_not_imports():
    """Lines changed besides the import: 0 for the source with only its imports rewritten, then one replaced
    line, one replaced by two, one inserted."""
    from gradkit.warp.examples import get_source_directory, gradkit_imports
    rel = "core/example_wave.py"
    src = (pathlib.Path(get_source_directory()) / rel).read_text()
    loaded = gradkit_imports(src)[0]
    assert table.changed_lines(rel, loaded)[0] == 0
    lines = loaded.splitlines(True)
    k = next(i for i, line in enumerate(lines) if line.startswith("def "))
    one = lines[:k] + ["def renamed_" + lines[k][4:]] + lines[k + 1:]
    n, diff = table.changed_lines(rel, "".join(one))
    assert n == 1 and sum(d.startswith("+") and not d.startswith("+++") for d in diff) == 1
    two = lines[:k] + ["def renamed_" + lines[k][4:], "# and a comment\n"] + lines[k + 1:]
    assert table.changed_lines(rel, "".join(two))[0] == 2
    added = lines[:k] + ["# a line\n"] + lines[k:] + ["x = 1\n"]
    assert table.changed_lines(rel, "".join(added))[0] == 2


def test_edits_in_tests_reads_literal_tuples_only(tmp_path):
    """`<NAME>_EDITS = <literal>` at the top of a test_warp_*examples.py file is example_<name>'s edits; one
    computed from KNOWN_EDITS, one inside a function, or one in another file is not read."""
    (tmp_path / "test_warp_some_examples.py").write_text(
        'FLUID_EDITS = (("a: int):", "a: int) -> float:"),)\n'
        'SPH_EDITS = KNOWN_EDITS["core/example_sph.py"]\n'
        'def f():\n    WAVE_EDITS = (("x", "y"),)\n')
    (tmp_path / "test_other.py").write_text('DEM_EDITS = (("x", "y"),)\n')
    assert table.edits_in_tests(tmp_path) == {"fluid": (("a: int):", "a: int) -> float:"),)}
    assert table._names("core/example_fluid.py", "fluid") and not table._names("optim/example_fluid_checkpoint.py", "fluid")
    assert table._names("optim/example_particle_repulsion.py", "repulsion")
    for name in table.edits_in_tests():          # every literal the example tests hold belongs to a row here
        assert any(table._names(c.rel, name) for c in table.CASES.values()), name


def test_difference_figures(rng):
    """max abs, max rel (per element, near-zero entries against a thousandth of the scale) and entries off,
    against the same figures computed here in float64 on random arrays."""
    want = rng.normal(size=(50, 3))
    want[0, 0] = 0.0
    got = want + rng.normal(scale=1e-6, size=want.shape)
    got[7, 1] += 0.5                                      # one entry off
    d = table.difference({"a": got.astype(np.float32), "b": want[:, 0]}, {"a": want, "b": want[:, 0]})
    scale = np.abs(want).max()
    err = np.abs(got.astype(np.float32).astype(np.float64) - want)
    assert d["a"]["max_abs"] == pytest.approx(err.max(), rel=1e-12)
    assert d["a"]["max_rel"] == pytest.approx((err / np.maximum(np.abs(want), 1e-3 * scale)).max(), rel=1e-12)
    assert d["a"]["off"] == 1 and d["a"]["size"] == 150 and d["a"]["scale"] == scale
    assert d["b"] == {"max_abs": 0.0, "max_rel": 0.0, "scale": np.abs(want[:, 0]).max(), "off": 0, "size": 50}
    assert d["all"]["max_abs"] == d["a"]["max_abs"] and d["all"]["off"] == 1 and d["all"]["size"] == 200
    with pytest.raises(ValueError, match="shape"):
        table.difference({"a": got[:3]}, {"a": want})
