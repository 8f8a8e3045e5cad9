"""Pass logs in debug bundles and the debugger's Passes tab (no browser): a recorded bundle holds the IR
after every pass building the forward and adjoint variants, in the declared pipeline's order; the data layer
diffs two steps; the schema refuses a malformed `passes` field naming it; the per-kernel cap holds on a big
kernel."""

from __future__ import annotations

import copy
import importlib.util
import json

import numpy as np
import pytest

import gradkit as gk
from gradkit.ad.pipeline import REVERSE
from gradkit.app import data, pass_data
from gradkit.core.passes import LOWER
from gradkit.viz import bundle as bundle_mod
from gradkit.viz.bundle import BundleError
from gradkit.viz.bundle_schema import PASS_LOG_MAX_CHARS, PASS_STEPS_MAX, check_manifest
from tests.app.recording import record_bundle

LOWERED = ["input"] + [p.name for p in LOWER]        # the typed IR, then forward_ad's passes


@gk.kernel
def wave(x: gk.array(dtype=float), s: float, y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = s * gk.sin(v) * v + gk.erf(v)


@gk.kernel(enable_backward=False)
def doubled(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


def _inputs(n: int = 8):
    x = gk.array(np.linspace(0.1, 1.0, n, dtype=np.float32), requires_grad=True, label="x")
    return x, gk.zeros(n, requires_grad=True, label="y")


@pytest.fixture(scope="module")
def wave_bundle(tmp_path_factory):
    x, y = _inputs()
    path = record_bundle(tmp_path_factory.mktemp("passes") / "wave", wave, [x, 0.5], [y], seed=True)
    return data.open_bundle(path)


def test_bundle_holds_forward_and_adjoint_pass_logs_in_pipeline_order(wave_bundle):
    meta = wave_bundle.manifest["kernels"]["wave"]
    assert meta["passes_device"] == "cpu"
    forward = pass_data.pass_steps(wave_bundle, "wave", "forward")
    adjoint = pass_data.pass_steps(wave_bundle, "wave", "adjoint")
    assert [s["name"] for s in forward] == LOWERED
    assert [s["name"] for s in adjoint] == LOWERED + [REVERSE.name]
    assert adjoint[-1]["name"] == "reverse"
    assert adjoint[-1]["text"] == wave.ir(adjoint=True) == meta["adjoint_ir"]
    assert forward[-1]["text"] == wave.ir(lowered=True)
    assert forward[0]["text"] == wave.ir()                                # the input is the typed IR
    assert [s["changed"] for s in adjoint][-1] and adjoint[0]["changed"]


def test_kernel_without_backward_has_no_adjoint_log(tmp_path):
    x, _ = _inputs()
    b = data.open_bundle(record_bundle(tmp_path / "b", doubled, [x], [gk.zeros(8)]))
    assert set(b.manifest["kernels"]["doubled"]["passes"]) == {"forward"}
    assert pass_data.pass_steps(b, "doubled", "adjoint") == []
    assert [s["name"] for s in pass_data.pass_steps(b, "doubled", "forward")] == LOWERED
    assert not any("pass log" in n for n in b.manifest["notes"])


def test_bundle_without_pass_logs_still_loads(wave_bundle, tmp_path):
    """A bundle written before pass logs existed loads, and the Passes tab says it predates them."""
    b = tmp_path / "old"
    b.mkdir()
    m = copy.deepcopy(wave_bundle.manifest)
    for k in m["kernels"].values():
        del k["passes"], k["passes_device"]
    (b / "manifest.json").write_text(json.dumps(m))
    (b / "arrays.npz").write_bytes((wave_bundle.path / "arrays.npz").read_bytes())
    old = data.open_bundle(b)
    assert pass_data.pass_steps(old, "wave", "adjoint") is None
    assert pass_data.pass_device(old, "wave") is None


def test_diff_shows_the_lines_a_pass_changed(wave_bundle):
    names = [s["name"] for s in pass_data.pass_steps(wave_bundle, "wave", "adjoint")]
    scalarize = names.index("scalarize")
    step = pass_data.pass_step(wave_bundle, "wave", "adjoint", scalarize)
    assert step["before_name"] == "inline" and step["changed"]
    lines = step["diff"].splitlines()
    assert lines[0] == "--- 1. inline" and lines[1] == "+++ 2. scalarize"
    assert any(ln.startswith("-") and "load %x" in ln for ln in lines)            # scalarize adds comp=0
    assert any(ln.startswith("+") and "load[comp=0] %x" in ln for ln in lines)
    rev = pass_data.pass_step(wave_bundle, "wave", "adjoint", len(names) - 1)
    assert "+kernel wave_adjoint(" in rev["diff"]
    first = pass_data.pass_step(wave_bundle, "wave", "adjoint", 0)
    assert first["before"] is None and first["diff"] == ""
    assert pass_data.pass_diff("a\nb\n", "a\nb\n") == ""
    assert pass_data.pass_diff("a\nb", "a\nc", "x", "y").splitlines()[-2:] == ["-b", "+c"]


def test_the_tab_opens_on_the_first_pass_that_changed_something(wave_bundle):
    steps = pass_data.pass_steps(wave_bundle, "wave", "adjoint")
    first = pass_data.first_change(steps)
    assert first > 0 and steps[first]["changed"] and not any(s["changed"] for s in steps[1:first])
    assert pass_data.first_change(steps[:1]) == 0                 # only the input: open on it


def test_unchanged_pass_has_no_diff(wave_bundle):
    steps = pass_data.pass_steps(wave_bundle, "wave", "adjoint")
    same = next(s for s in steps if not s["changed"])           # promote changes nothing in this kernel
    step = pass_data.pass_step(wave_bundle, "wave", "adjoint", same["index"])
    assert step["diff"] == "" and step["before"] == step["after"] and not step["truncated"]


def _edit(manifest, edit):
    m = copy.deepcopy(manifest)
    edit(m["kernels"]["wave"])
    return m


MALFORMED = {
    "a list": (lambda k: k.update(passes=[]), "kernels.wave.passes: expected an object, got a list"),
    "unknown variant": (lambda k: k["passes"].update(tangent=[]),
                        "kernels.wave.passes.tangent: unknown kernel variant 'tangent'"),
    "steps not a list": (lambda k: k["passes"].update(forward="input"),
                         "kernels.wave.passes.forward: expected a list, got a string"),
    "a step of three": (lambda k: k["passes"]["forward"][0].append("x"),
                        "kernels.wave.passes.forward[0]: has 3 entries, expected 2"),
    "non-string text": (lambda k: k["passes"]["adjoint"][1].__setitem__(1, 7),
                        "kernels.wave.passes.adjoint[1][1]: expected a string, got an integer"),
    "non-string name": (lambda k: k["passes"]["adjoint"][0].__setitem__(0, None),
                        "kernels.wave.passes.adjoint[0][0]: expected a string, got null"),
    "empty name": (lambda k: k["passes"]["adjoint"][0].__setitem__(0, ""),
                   "kernels.wave.passes.adjoint[0][0]: a pass name of 0 characters"),
    "too many steps": (lambda k: k["passes"].update(forward=[["simplify", ""]] * (PASS_STEPS_MAX + 1)),
                       f"kernels.wave.passes.forward: has {PASS_STEPS_MAX + 1} entries"),
    "text over the cap": (lambda k: k["passes"].update(forward=[["input", "x" * (PASS_LOG_MAX_CHARS + 1)]]),
                          "kernels.wave.passes: holds"),
    "device not a string": (lambda k: k.update(passes_device=3),
                            "kernels.wave.passes_device: expected a string or null"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_schema_refuses_a_malformed_passes_field(wave_bundle, case):
    edit, needle = MALFORMED[case]
    with pytest.raises(BundleError, match="kernels.wave.passes") as err:
        check_manifest(_edit(wave_bundle.manifest, edit), "b")
    assert needle in str(err.value)


def test_fit_keeps_every_step_under_the_cap():
    logs = {"forward": [["input", "a\n" * 10]], "adjoint": [["input", "a\n" * 10], ["reverse", "b\n" * 10]]}
    assert bundle_mod.fit_pass_logs(logs, PASS_LOG_MAX_CHARS) == (logs, "")


def test_fit_folds_unchanged_steps_then_truncates_at_the_real_cap():
    """Thirteen steps of 300 000 characters (3.9 MB) fit the 2 MB cap: unchanged steps are folded into the
    one before, then the longest texts are cut to a common length, each with a marker."""
    text = {k: f"kernel k{k}\n" + "  %1: float32 = sin %0\n" * (300_000 // 23) for k in range(4)}
    names = ["input", "inline", "scalarize", "simplify", "promote", "simplify"]
    fwd = [[n, text[min(j, 3)]] for j, n in enumerate(names)]           # promote, simplify: no change
    logs = {"forward": fwd, "adjoint": fwd + [["reverse", text[0] * 2]]}
    fitted, note = bundle_mod.fit_pass_logs(logs, PASS_LOG_MAX_CHARS)
    assert sum(len(t) for steps in fitted.values() for _, t in steps) <= PASS_LOG_MAX_CHARS
    assert [n for n, _ in fitted["adjoint"]] == ["input", "inline", "scalarize",
                                                 "simplify (then promote, simplify: no change)", "reverse"]
    assert all(pass_data.TRUNCATED in t for _, t in fitted["adjoint"])
    assert fitted["adjoint"][0][1].startswith("kernel k0\n")
    assert "folded" in note and "truncated" in note


def _big_kernel(tmp_path, statements: int = 80):
    """A kernel of `statements` chained lines, written to a file so its source can be stored."""
    body = "".join(f"    v{j + 1} = gk.sin(v{j}) * s + v{j} * v{j}\n" for j in range(statements))
    src = ("import gradkit as gk\n\n\n@gk.kernel\n"
           "def big(x: gk.array(dtype=float), s: float, y: gk.array(dtype=float)):\n"
           f"    i = gk.tid()\n    v0 = x[i]\n{body}    y[i] = v{statements}\n")
    (tmp_path / "big_kernel.py").write_text(src)
    spec = importlib.util.spec_from_file_location("big_kernel", tmp_path / "big_kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.big


def test_cap_is_honoured_on_a_big_kernel(tmp_path, monkeypatch):
    big = _big_kernel(tmp_path)
    full = sum(len(t) for v in ("forward", "adjoint") for _, t in big.pass_log(v, "cpu"))
    cap = full // 4
    monkeypatch.setattr(bundle_mod, "PASS_LOG_MAX_CHARS", cap)
    x, y = _inputs()
    b = data.open_bundle(record_bundle(tmp_path / "big", big, [x, 0.5], [y], seed=True))
    passes = b.manifest["kernels"]["big"]["passes"]
    assert sum(len(t) for steps in passes.values() for _, t in steps) <= cap
    adjoint = pass_data.pass_steps(b, "big", "adjoint")
    assert adjoint[-1]["name"] == "reverse" and pass_data.TRUNCATED in adjoint[-1]["text"]
    assert adjoint[-1]["text"].startswith("kernel big_adjoint(")
    assert any("no change" in s["name"] for s in adjoint)
    assert pass_data.pass_step(b, "big", "adjoint", len(adjoint) - 1)["truncated"]
    assert any(f"over the {cap}-character cap" in n and "'big'" in n for n in b.manifest["notes"])


def test_fit_keeps_the_step_count_under_the_schema_bound():
    logs = {"forward": [[f"pass{j}", f"kernel k\n  step {j}\n"] for j in range(PASS_STEPS_MAX + 10)]}
    fitted, note = bundle_mod.fit_pass_logs(logs, PASS_LOG_MAX_CHARS)
    steps = fitted["forward"]
    assert len(steps) == PASS_STEPS_MAX
    assert steps[0][0] == "pass0" and steps[-1][0] == f"pass{PASS_STEPS_MAX + 9}"
    assert "10 steps after the input dropped" in note
