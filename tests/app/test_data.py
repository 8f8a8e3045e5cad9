"""The debugger's data layer (no browser): launch table and detail, gradient flow flags, cut-off arrays,
NaN/Inf origin with its source line, code, bundle discovery, paths shown relative to the bundle, and
gradcheck re-run from snapshots with the kernel compiled from the bundle's stored source after opt-in."""

from __future__ import annotations

import pathlib
import re
import runpy

import numpy as np
import pytest

import gradkit as gk
from tests.app.recording import record_bundle
from gradkit.app import checks, data, flow_data, graph_data, nan_data
from gradkit.viz.bundle import BundleError


def test_find_bundles(bundle_dir, tmp_path):
    names = [p.name for p in data.find_bundles(bundle_dir)]
    assert names == ["nan", "plain", "rollout", "rope", "springs", "sqrt", "sqrt_fixed", "train"]
    assert data.find_bundles(bundle_dir / "nan") == [bundle_dir / "nan"]
    assert data.find_bundles(tmp_path) == []
    with pytest.raises(BundleError, match="no such bundle"):
        data.find_bundles(tmp_path / "missing")


def test_zip_bundle_is_found(tmp_path, record_plain):
    record_plain(tmp_path / "b.zip")
    assert data.is_bundle(tmp_path / "b.zip") and data.find_bundles(tmp_path) == [tmp_path / "b.zip"]
    assert data.launch_rows(data.open_bundle(tmp_path / "b.zip"))[0]["kernel"] == "scale"


def test_launch_rows_forward_then_backward(bundles):
    rows = data.launch_rows(bundles["train"])
    assert [(r["pass"], r["kernel"]) for r in rows] == [
        ("forward", "damp"), ("forward", "predict"), ("forward", "squared_error"),
        ("backward", "squared_error"), ("backward", "predict"), ("backward", "damp")]
    assert [r["order"] for r in rows] == list(range(6))
    assert [r["scope"] for r in rows] == ["model", "model", "loss", "loss", "model", "model"]
    assert rows[4]["forward launch"] == 1 and rows[0]["dim"] == "16" and rows[0]["device"] == "cpu"
    assert all(r["ms"] > 0 for r in rows)
    assert data.row_title(rows[4]) == "#4 backward predict [16] (of forward #1)"
    nan_rows = data.launch_rows(bundles["nan"])
    assert nan_rows[1]["new non-finite"] == "e (2)"       # log of the two negative entries


def test_launch_detail(bundles):
    b = bundles["train"]
    rows = data.launch_rows(b)
    d = data.launch_detail(b, rows[0])                   # damp(f, s, g)
    args = {a["param"]: a for a in d["arguments"]}
    assert args["f"]["array"] == "feature" and args["f"]["shape"] == "16" and args["f"]["role"] == "input"
    assert args["s"]["kind"] == "scalar" and float(args["s"]["value"]) == pytest.approx(1e-12)
    assert args["g"]["role"] == "output"
    after_g = next(v for v in d["values"] if v["param"] == "g" and v["when"] == "after")
    assert after_g["max"] == pytest.approx(1e-12, rel=1e-5)  # f < 1 scaled by 1e-12
    grads = {(g["param"], g["when"]): g for g in d["gradients"]}
    assert grads[("g", "before")]["norm"] > 0 and grads[("f", "after")]["norm"] < 1e-10
    # A backward row shows the gradients of its own adjoint launch.
    d = data.launch_detail(b, rows[3])
    assert d["title"].startswith("#3 backward squared_error")
    assert {g["backward launch"] for g in d["gradients"]} == {0}
    assert data.snapshot_preview(b, rows[3], "pred").keys() == {"value before", "value after", "grad before",
                                                                "grad after"}


def test_detail_without_snapshots_says_so(bundles):
    d = data.launch_detail(bundles["plain"], data.launch_rows(bundles["plain"])[0])
    assert d["values"] == [] and any("without snapshots" in n for n in d["notes"])


def test_gradient_flow_flags(bundles):
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(bundles["train"])}
    # intermediates (g, pred, loss) were consumed by backward, not "zero": their norm is what arrived
    assert flags == {"feature": "vanishing", "g": "consumed", "x": "ok", "w": "cut off",
                     "b": "ok", "pred": "consumed", "target": "cut off", "loss": "consumed"}
    rows = {r["array"]: r for r in flow_data.gradient_flow(bundles["train"])}
    assert rows["loss"]["grad norm"] == 1.0 and rows["g"]["grad norm"] == pytest.approx(rows["pred"]["grad norm"])
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(bundles["train"], vanishing=0, exploding=10)}
    assert flags["b"] == "exploding" and flags["feature"] == "ok"
    assert {r["flag"] for r in flow_data.gradient_flow(bundles["nan"])} == {"no backward"}
    sqrt = {r["array"]: r for r in flow_data.gradient_flow(bundles["sqrt"])}
    assert sqrt["x"]["flag"] == "NaN/Inf" and np.isnan(sqrt["x"]["grad norm"])     # no finite norm for NaN
    assert sqrt["r"]["flag"] == "consumed"
    from gradkit.viz import flow_states
    assert all(flow_data.flow_explanation(f) for f in flow_states.COLORS)


def test_an_overwritten_wind_shows_zero_with_the_hazard_named(bundles):
    """The rope's wind force is overwritten by the spring force every step before anything reads it: wind's
    gradient is zero (it was 0.35 before the tape consumed overwritten gradients) and the flow view says why,
    naming both kernels' lines; the threshold read only through a comparison is named too."""
    rows = {r["array"]: r for r in flow_data.gradient_flow(bundles["rope"])}
    assert rows["wind"]["flag"] == "zero" and rows["wind"]["grad norm"] == 0.0
    assert rows["k"]["flag"] == "ok"
    script = pathlib.Path(__file__).with_name("sample_rope.py").read_text().splitlines()
    wind_line = 1 + next(n for n, t in enumerate(script) if "f[i] = wind[0]" in t)
    spring_line = 1 + next(n for n, t in enumerate(script) if "f[i] = k[0]" in t)
    why = rows["wind"]["hazard"]
    assert "overwritten before read" in why and "wind_force" in why and "spring_force" in why
    assert f"sample_rope.py:{wind_line}" in why and f"sample_rope.py:{spring_line}" in why
    assert "/work" not in why and "/tmp" not in why           # paths relative to the bundle
    assert "comparison" in rows["limit"]["hazard"] and rows["limit"]["flag"] == "zero"
    kinds = sorted({h["kind"] for h in flow_data.hazards(bundles["rope"])})
    assert kinds == ["not differentiable", "overwritten before read"]
    assert all(not r["hazard"] for name, r in rows.items() if name not in ("wind", "limit", "f"))


def test_cut_off_arrays(bundles):
    """Issue 41 item 2: only a declared parameter (w, in gk.Tape(params=...)) without requires_grad is cut off;
    the data array `target` is a constant, listed and not alarmed."""
    cut = {c["array"]: c for c in flow_data.cut_off_arrays(bundles["train"])}
    assert set(cut) == {"w"}
    assert cut["w"]["used by"] == "predict" and "requires_grad=False" in cut["w"]["explanation"]
    assert flow_data.constant_arrays(bundles["train"]) == ["target"]
    roles = {a["label"]: a["role"] for a in bundles["train"].manifest["arrays"]}
    assert roles == {"x": "parameter", "feature": "parameter", "w": "parameter", "b": "parameter",
                     "g": "intermediate", "pred": "intermediate", "loss": "intermediate", "target": "constant"}
    rows = flow_data.gradient_flow(bundles["train"])
    assert [r["role"] for r in rows][:4] == ["parameter"] * 4                  # parameters lead
    assert flow_data.cut_off_arrays(bundles["nan"]) == []


def test_gradient_histogram(bundles):
    b = bundles["train"]
    aid = next(a["id"] for a in b.manifest["arrays"] if a["label"] == "x")
    hist = flow_data.gradient_histogram(b, aid, bins=7)
    assert len(hist["counts"]) == 7 and sum(hist["counts"]) == 16 and hist["nonfinite"] == 0
    aid = next(a["id"] for a in bundles["sqrt"].manifest["arrays"] if a["label"] == "x")
    assert flow_data.gradient_histogram(bundles["sqrt"], aid)["nonfinite"] == 1


def test_nan_origin_forward(bundles):
    b = bundles["nan"]
    o = nan_data.nan_origin(b)
    assert (o["kernel"], o["array"], o["direction"]) == ("log_energy", "e", "forward")
    assert o["launch"] == 1 and o["index"] == [0]
    assert np.isnan(o["value"]) and o["source"] == "manifest" and o["param"] == "e"
    assert o["file"] == "sample_nan.py" and "/" not in o["message"] and "sample_nan.py:18" in o["message"]
    src = nan_data.source_excerpt(b, o["kernel"], o["line"], o["file"])
    assert src["hit"].strip() == "e[i] = gk.log(y[i])"
    assert [n for n, _, hit in src["lines"] if hit] == [o["line"]]
    at = {r["param"]: r for r in nan_data.values_at(b, o)}
    assert at["y"]["value before"] == pytest.approx(1.5 * 0.1 - 0.5) and np.isnan(at["e"]["value after"])


def test_nan_origin_backward(bundles):
    b = bundles["sqrt"]
    o = nan_data.nan_origin(b)
    assert (o["kernel"], o["array"], o["direction"]) == ("root", "x.grad", "backward")
    assert o["backward"] == 1 and o["launch"] == 0 and o["index"] == [0] and o["value"] == np.inf
    assert nan_data.source_excerpt(b, "root", o["line"])["hit"].strip() == "r[i] = gk.sqrt(x[i])"
    at = {r["param"]: r for r in nan_data.values_at(b, o)}
    assert at["x"]["grad before"] == 0.0 and at["x"]["grad after"] == np.inf


def test_nan_origin_inferred_from_snapshots(tmp_path):
    """Without the NaN check (a plain gk.Tape(snapshots=True)), the origin comes from the snapshots."""
    sample = runpy.run_path(str(pathlib.Path(__file__).with_name("sample_nan.py")), run_name="sample")
    affine, log_energy = sample["affine"], sample["log_energy"]
    n = 8
    x = gk.array(np.linspace(0.1, 2.0, n, dtype=np.float32), requires_grad=True)
    w = gk.array(np.full(n, 1.5, np.float32), requires_grad=True)
    y, e = gk.zeros(n, requires_grad=True), gk.zeros(n, requires_grad=True)
    tape = gk.Tape(snapshots=True)
    with tape:
        gk.launch(affine, n, inputs=[x, w], outputs=[y])
        gk.launch(log_energy, n, inputs=[y], outputs=[e])
    tape.save(tmp_path / "b")
    b = data.open_bundle(tmp_path / "b")
    o = nan_data.nan_origin(b)
    assert o["source"] == "snapshots" and o["kernel"] == "log_energy" and o["direction"] == "forward"
    assert o["param"] == "e" and o["index"] == [0] and np.isnan(o["value"])
    assert nan_data.source_excerpt(b, o["kernel"], o["line"])["hit"].strip() == "e[i] = gk.log(y[i])"
    assert data.summary(b)["nan"]


def test_no_nan(bundles):
    assert nan_data.nan_origin(bundles["train"]) is None and not data.summary(bundles["train"])["nan"]


def test_kernel_code(bundles):
    code = data.kernel_code(bundles["train"], "predict")
    assert code["file"] == "sample_train.py"                  # outside the bundle's folder: the name only
    assert "def predict" in code["python"] and "kernel predict(" in code["ir"]
    assert "predict_adjoint" in code["adjoint_ir"] and set(code["code"]["cpu"]) == {"forward", "adjoint"}
    assert data.code_language("cpu") == "llvm" and data.code_language("opencl:0") == "c"


def test_summary(bundles):
    s = data.summary(bundles["train"])
    assert s["launches"] == 3 and s["backward launches"] == 3 and s["kernels"] == ["damp", "predict",
                                                                                    "squared_error"]
    assert len(s["loss_history"]) == 3 and s["loss_history"][0] > s["loss_history"][-1]


# Paths relative to the bundle -----------------------------------------------------------------------------
def test_paths_are_shown_relative_to_the_bundle(tmp_path, record_plain):
    from gradkit.app.paths import redact, shown_path
    b = data.open_bundle(record_plain(tmp_path / "b"))
    assert shown_path(b, str(tmp_path / "src" / "model.py")) == "src/model.py"    # inside its folder
    assert shown_path(b, "/home/someone/work/train.py") == "train.py"
    assert shown_path(b, None) is None
    file = b.manifest["kernels"]["scale"]["file"]
    assert "/" not in redact(b, f"error at {file}:12") and redact(b, f"at {file}:12").endswith(":12")


def test_source_excerpt_never_reads_files(tmp_path, record_plain):
    """A bundle naming a local file shows only its own stored source, never the file's text."""
    b = data.open_bundle(record_plain(tmp_path / "b"))
    secret = tmp_path / "secret.txt"
    secret.write_text("\n".join(f"secret {k}" for k in range(50)))
    b.manifest["kernels"]["scale"]["file"] = str(secret)
    excerpt = nan_data.source_excerpt(b, "scale", 30, str(secret))
    assert not any("secret" in text for _, text, _ in excerpt["lines"]) and excerpt["file"] == "secret.txt"


# Gradcheck on a recorded launch ------------------------------------------------------------------------
def _approved(bundle, kernel: str) -> str:
    """The SHA-256 the Check view shows for the kernel's stored source (what ticking the box approves)."""
    return checks.stored_source(bundle, kernel)["sha256"]


def test_gradcheck_passes_on_a_recorded_launch(bundles):
    b = bundles["train"]
    result = checks.run_gradcheck(b, 1, approved=_approved(b, "predict"))    # predict(x, g, w, b, pred)
    assert result.ok and result.device == "cpu" and result.worst == []
    assert {(p["output"], p["input"]) for p in result.pairs} == {("pred", "x"), ("pred", "g"), ("pred", "w"),
                                                                  ("pred", "b")}
    assert all(p["pass"] and p["failing"] == 0 for p in result.pairs)


@gk.kernel
def kink(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    if v > 0.0:
        y[i] = v
    else:
        y[i] = 0.0


def test_gradcheck_failure_table(tmp_path):
    """At the kink of relu the one-sided derivative (0) and the central difference (0.5) differ."""
    x = gk.array(np.array([-1.0, 0.0, 2.0], np.float32), requires_grad=True)
    b = data.open_bundle(record_bundle(tmp_path / "b", kink, [x], [gk.zeros(3, requires_grad=True)]))
    result = checks.run_gradcheck(b, 0, approved=_approved(b, "kink"))
    assert not result.ok
    assert result.worst[0]["row"] == 1 and result.worst[0]["col"] == 1
    assert result.worst[0]["analytic"] == 0.0 and result.worst[0]["numeric"] == pytest.approx(0.5, abs=1e-3)
    assert result.pairs[0]["failing"] == 1
    # a kink is no rounding noise: the float64 re-run fails on the same entry
    assert result.float64 is not None and not result.float64.ok and result.float64.precision == "float64"
    assert (result.float64.worst[0]["row"], result.float64.worst[0]["col"]) == (1, 1)
    assert checks.verdict(result, "kink") == ("error", "The gradient of 'kink' is wrong on cpu: it still fails "
                                              "in float64, beyond rounding (a wrong gradient, or a kink or "
                                              "discontinuity at these inputs).")


def test_gradcheck_without_snapshots(bundles):
    why = checks.missing_snapshots(bundles["plain"], 0)
    assert "no stored 'before' snapshot of x, y" in why and "gradkit debug" in why
    with pytest.raises(checks.CheckError, match="snapshot"):
        checks.run_gradcheck(bundles["plain"], 0)
    assert checks.missing_snapshots(bundles["train"], 0) is None


def test_gradcheck_needs_the_users_approval_of_the_stored_source(bundles):
    b = bundles["train"]
    shown = checks.stored_source(b, "predict")
    assert shown["source"].startswith("@gk.kernel") and shown["sha256"] == shown["recorded"]
    assert shown["file"] == "sample_train.py"
    with pytest.raises(checks.CheckError, match="I have read this source; compile it"):
        checks.run_gradcheck(b, 1)
    with pytest.raises(checks.CheckError, match="not the one you approved"):
        checks.run_gradcheck(b, 1, approved="0" * 64)


def test_gradcheck_refuses_a_source_that_does_not_match_its_hash(tmp_path):
    b = data.open_bundle(record_plain_snap(tmp_path / "b"))
    approved = _approved(b, "kink")
    meta = b.manifest["kernels"]["kink"]
    meta["python_source"] = meta["python_source"].replace("y[i] = v", "y[i] = v * 2.0")
    with pytest.raises(checks.CheckError, match="does not match its recorded SHA-256"):
        checks.run_gradcheck(b, 0, approved=approved)
    del meta["source_sha256"]
    with pytest.raises(checks.CheckError, match="records no SHA-256"):
        checks.run_gradcheck(b, 0, approved=approved)


def record_plain_snap(path: pathlib.Path) -> pathlib.Path:
    x = gk.array(np.array([-1.0, 0.5, 2.0], np.float32), requires_grad=True)
    y = gk.zeros(3, requires_grad=True)
    tape = gk.Tape(snapshots=True)
    with tape:
        gk.launch(kink, 3, inputs=[x], outputs=[y])
    tape.save(path)
    return path


@gk.func
def twice(v: float) -> float:
    return 2.0 * v


@gk.kernel
def uses_helper(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = twice(x[i])


def test_gradcheck_refuses_a_kernel_calling_a_user_function(tmp_path):
    """The bundle stores the kernel's source only: its @gk.func helper is named in the refusal."""
    x = gk.array(np.ones(3, np.float32), requires_grad=True)
    b = data.open_bundle(record_bundle(tmp_path / "b", uses_helper, [x], [gk.zeros(3, requires_grad=True)]))
    with pytest.raises(checks.CheckError, match="'twice' is not defined in the source stored in the bundle"):
        checks.run_gradcheck(b, 0, approved=_approved(b, "uses_helper"))


def test_op_diagnosis_names_op_line_call_site_and_iteration(bundles):
    """The NaN view's headline facts, from the bundles `gradkit debug` wrote."""
    fwd = nan_data.op_diagnosis(nan_data.nan_origin(bundles["nan"]))
    assert (fwd["op"], fwd["where"], fwd["call site"], fwd["iteration"]) == \
        ("log", "sample_nan.py:18", "sample_nan.py:36", 0)
    back = nan_data.op_diagnosis(nan_data.nan_origin(bundles["sqrt"]))
    assert back["op"] == "sqrt" and "sqrt(0.0) = 0.0" in back["headline"] and "= inf" in back["headline"]
    assert (back["call site"], back["backward call"]) == ("sample_sqrt.py:31", "sample_sqrt.py:33")
    assert nan_data.op_diagnosis(nan_data.nan_origin(bundles["train"]) or {}) is None


def test_no_false_zero_alarms_on_the_bundled_examples(example_bundles):
    """Every example's gradient flow: intermediates backward consumed are 'consumed' (with the norm that
    arrived), outputs nothing reads are 'unused output'; 'zero' is left for gradients that truly are."""
    bundles = data.find_bundles(example_bundles)
    assert len(bundles) >= 10
    for path in bundles:
        rows = flow_data.gradient_flow(data.open_bundle(path))
        assert not [r["array"] for r in rows if r["flag"] == "zero"], path.name
        consumed = [r for r in rows if r["flag"] == "consumed"]
        assert all(r["grad norm"] is None or r["grad norm"] > 0 for r in consumed), path.name


def test_history_over_iterations(bundles, example_bundles):
    """The train sample runs three steps: loss and per-array norms for each; the cloth example's graph folds
    its 180 launches into a readable handful of nodes."""
    h = flow_data.history(bundles["train"])
    assert list(h["loss"]["iteration"]) == [0, 1, 2] and h["loss"]["loss"].is_monotonic_decreasing
    per_array = h["norms"].groupby("array")["iteration"].count()
    assert per_array["x"] == 3 and per_array["b"] == 3
    assert set(h["quantiles"]["array"]) >= {"x", "b"}
    assert (h["quantiles"]["min"] <= h["quantiles"]["max"]).all()
    cloth = data.open_bundle(example_bundles / "cloth_trajectory")
    assert len(cloth.launches) >= 120
    dot = graph_data.graph_dot(cloth)
    assert dot.count("shape=plaintext") <= 6 and "repeated x" in dot


def test_flow_not_reached_after_backward_stopped(tmp_path):
    """A NaN check that stops backward midway: arrays only the unreached launches use are 'not reached', not
    'zero'; the array holding the inf is 'NaN/Inf'."""
    from gradkit.app.cli import capture_script
    report = capture_script(pathlib.Path(__file__).with_name("sample_chain.py"), [], tmp_path / "chain")
    assert report.bundle is not None, report.error
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(data.open_bundle(tmp_path / "chain"))}
    assert flags == {"x": "not reached", "y": "NaN/Inf", "r": "consumed", "loss": "consumed"}


def test_check_runs_on_a_kernel_with_an_int_array(example_bundles):
    """The cloth example's spring_forces takes an int32 index array: the check differentiates the float
    arrays only (it used to raise creating a gradient for the int one)."""
    b = data.open_bundle(example_bundles / "cloth_trajectory")
    k = next(j for j, la in enumerate(b.launches) if la["kernel"] == "spring_forces")
    src = checks.stored_source(b, "spring_forces")
    result = checks.run_gradcheck(b, k, approved=src["sha256"])
    inputs = {p["input"] for p in result.pairs}
    assert "springs" not in inputs and {"x", "v"} <= inputs


def test_check_tells_float32_noise_from_a_wrong_gradient(example_bundles):
    """The gravity example's energy gradient is right, but float32 central differences of a sum over 256
    bodies miss it on most entries: each failing entry is within its finite-difference noise estimate and the
    automatic float64 re-run (the kernel widened) passes at tight tolerances."""
    b = data.open_bundle(example_bundles / "gravity_forces")
    k = next(j for j, la in enumerate(b.launches) if la["kernel"] == "potential_energy")
    result = checks.run_gradcheck(b, k, approved=_approved(b, "potential_energy"))
    assert not result.ok and result.failing > 100
    assert result.within_noise >= 0.99 * result.failing
    assert all({"FD noise", "within noise"} <= set(w) for w in result.worst)
    wide = result.float64
    assert wide is not None and wide.ok and wide.precision == "float64" and wide.eps <= 1e-6
    assert all(p["failing"] == 0 and p["max abs err"] < 1e-3 for p in wide.pairs)
    direct = checks.run_gradcheck(b, k, approved=_approved(b, "potential_energy"), float64=True, atol=1e-5,
                                  rtol=1e-5)
    assert direct.ok and direct.float64 is None
    level, sentence = checks.verdict(result, "potential_energy")                # the view leads with this
    assert level == "warning" and sentence.startswith("The gradient of 'potential_energy' is right")
    assert checks.verdict(direct, "potential_energy")[0] == "success"


def test_every_graph_node_has_facts(bundles):
    """Each node drawn in the tape graph (launch boxes, arrays) has the facts a click shows: a launch's call
    site and scope, an array's flow state; the 111-launch rollout folds to a dozen launch boxes."""
    b = bundles["rollout"]
    assert len(b.launches) == 111
    dot = graph_data.graph_dot(b)
    drawn = re.findall(r"^\s*([al]\d+) \[", dot, re.M)
    facts = graph_data.node_facts(b)
    assert drawn and set(drawn) <= set(facts)
    assert sum(n.startswith("l") for n in drawn) <= 16
    launch = dict(facts[next(n for n in drawn if n.startswith("l"))])
    assert launch["called at"].startswith("sample_rollout.py:") and launch["scope"].startswith("solve")
    array = dict(facts[next(n for n in drawn if n.startswith("a"))])
    assert array["gradient flow"] in ("ok", "consumed") and array["type"] == "float32[16]"
    assert [m["name"] for m in graph_data.matches(b, "KICK")][:1] == ["kick"]
    assert graph_data.scope_paths(b) == [("solve",), ("solve", "step"), ("loss",)]


def test_compare_before_and_after_a_fix(bundles):
    """sqrt (x[0] = 0: an inf in backward) against sqrt_fixed (x starts at 1): the status rows say what
    changed, x's gradient goes from NaN/Inf to ok, and the kernels ran as often in both."""
    from gradkit.app import compare_data
    a, b = bundles["sqrt"], bundles["sqrt_fixed"]
    status = {r["what"]: r for r in compare_data.status_rows(a, b)}
    assert status["status"]["A"] == "NaN/Inf" and status["status"]["B"] == "ok" and status["status"]["changed"]
    assert "sqrt" in status["NaN/Inf origin"]["A"] and status["NaN/Inf origin"]["B"] == "none"
    assert not status["launches"]["changed"]
    flow = {r["array"]: r for r in compare_data.flow_rows(a, b)}
    assert flow["x"]["state A"] == "NaN/Inf" and flow["x"]["state B"] == "ok" and flow["x"]["changed"]
    assert compare_data.flow_rows(a, b)[0]["changed"]                    # changes first
    x = np.arange(8, dtype=np.float64) + 1.0
    assert flow["x"]["norm B"] == pytest.approx(np.linalg.norm(0.5 / np.sqrt(x)), rel=1e-5)
    assert {r["kernel"]: (r["launches A"], r["launches B"]) for r in compare_data.kernel_rows(a, b)} == \
        {"root": (1, 1), "total": (1, 1)}


@gk.kernel(default_fp=gk.float64)
def tenth_of(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    c = 0.0
    c = 1.0 / 10.0 + float(i) * 0.0
    y[i] = c * x[i] * x[i]


def test_gradcheck_compiles_a_stored_kernel_declared_with_default_fp(tmp_path):
    """`@gk.kernel(default_fp=gk.float64)` is read from the stored source as a name (nothing evaluated):
    without it the weak float32 `c` meeting float64 would not compile."""
    x = gk.array(np.array([0.5, 1.5, -2.0]), dtype=gk.float64, requires_grad=True)
    y = gk.zeros(3, dtype=gk.float64, requires_grad=True)
    tape = gk.Tape(snapshots=True)
    with tape:
        gk.launch(tenth_of, 3, inputs=[x], outputs=[y])
    tape.save(tmp_path / "b")
    b = data.open_bundle(tmp_path / "b")
    result = checks.run_gradcheck(b, 0, approved=_approved(b, "tenth_of"))
    assert result.ok and result.pairs, result
