"""The linear-solve examples in the debugger (issue 45 item 3): `gradkit examples --bundle-only` captures
examples/poisson_source.py and examples/implicit_cloth.py into bundles whose solves are Python steps with
their iteration count and residual; the Poisson bundle's step, its graph node and the gradient that crossed
it are checked against float64 NumPy (a dense Laplacian, a Jacobi-preconditioned CG of our own); a hostile
bundle with a bad step entry is refused naming the field."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from gradkit.app import cli, data, flow_data, graph_data
from gradkit.viz.bundle import BundleError, load_bundle

from tests.app.conftest import HERE

EXAMPLES = HERE.parents[1] / "examples"
N = 8                       # the Poisson grid captured here: 8 x 8 unknowns, two gradient steps


@pytest.fixture(scope="module")
def poisson(tmp_path_factory):
    """The Poisson example captured as `gradkit debug` does, on a grid small enough to solve densely."""
    out = tmp_path_factory.mktemp("poisson") / "poisson"
    report = cli.capture_script(EXAMPLES / "poisson_source.py", ["--iters", "2", "--size", str(N)], out)
    assert report.bundle is not None, report.error
    return data.open_bundle(out)


def _laplacian(n: int) -> np.ndarray:
    """-Δ on the n x n interior grid of the unit square, 5-point stencil, Dirichlet boundary (float64)."""
    h2 = 1.0 / (n + 1) ** 2
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    return (np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)) / h2


def _jacobi_cg_iterations(a: np.ndarray, b: np.ndarray, tol: float) -> int:
    """Iterations a Jacobi-preconditioned CG from x = 0 takes to ‖b - A x‖ <= tol ‖b‖ (float64)."""
    x, r = np.zeros_like(b), b.copy()
    z = r / np.diag(a)
    p, rz, k = z.copy(), r @ z, 0
    while r @ r > (tol * np.linalg.norm(b)) ** 2:
        ap = a @ p
        alpha = rz / (p @ ap)
        x, r = x + alpha * p, r - alpha * ap
        z = r / np.diag(a)
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
        k += 1
    return k


def _ids(bundle) -> dict:
    return {a["label"]: a["id"] for a in bundle.manifest["arrays"]}


def test_poisson_bundle_has_the_solve_step_with_its_iterations_and_residual(poisson):
    (step,) = poisson.steps                                       # the last tape: one solve, one launch
    ids = _ids(poisson)
    a, f, u = _laplacian(N), poisson.value(ids["source f"]), poisson.value(ids["temperature u"])
    assert step["scope"] == ["solve"] and step["position"] == 0 and step["kind"] == "func"
    assert step["reads"][0] == ids["source f"] and step["writes"] == [ids["temperature u"]]
    meta = step["meta"]
    assert meta["method"] == "cg" and meta["unknowns"] == N * N and meta["tol"] == 1e-10
    # this solve started from u = 0 (the first one solved f = 0): NumPy's Jacobi CG takes as many steps
    assert abs(meta["iterations"] - _jacobi_cg_iterations(a, f, 1e-10)) <= 1
    assert meta["residual"] <= 1e-10 * np.linalg.norm(f)
    assert np.linalg.norm(f - a @ u) == pytest.approx(meta["residual"], rel=0.5, abs=1e-9 * np.linalg.norm(f))
    row = data.step_rows(poisson)[0]
    assert row["step label"] == f"cg: {meta['iterations']} iterations, residual {meta['residual']:.3g}"
    assert row["when"] == "before any launch" and row["writes"] == "temperature u"


def test_gradient_through_the_solve_and_its_flow(poisson):
    """d loss / d f = A^-T 2 h² (u - target) reached the source through the step; u is consumed, not cut off."""
    ids = _ids(poisson)
    a, u, target = _laplacian(N), poisson.value(ids["temperature u"]), poisson.value(ids["target"])
    expect = np.linalg.solve(a.T, 2.0 / (N + 1) ** 2 * (u - target))
    np.testing.assert_allclose(poisson.grad(ids["source f"]), expect, rtol=1e-6, atol=1e-12)
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(poisson)}
    assert flags["source f"] == "ok" and flags["temperature u"] == "consumed"
    assert flow_data.cut_off_arrays(poisson) == [] and flow_data.hazards(poisson) == []
    roles = {a["label"]: a["role"] for a in poisson.manifest["arrays"]}
    assert roles["source f"] == "parameter" and roles["temperature u"] == "intermediate"


def test_poisson_graph_has_the_solve_node_and_its_edges(poisson):
    ids = {k: v[1:] for k, v in _ids(poisson).items()}
    meta = poisson.steps[0]["meta"]
    dot = graph_data.graph_dot(poisson)
    label = f"cg: {meta['iterations']} iterations, residual {meta['residual']:.3g}"
    assert re.search(rf'^\s*f0 \[label="{re.escape(label)}", shape="box"', dot, re.M)
    edges = set(re.findall(r"^\s*(\S+) -> (\S+?);", dot, re.M))
    assert (f"a{ids['source f']}", "f0") in edges and ("f0", f"a{ids['temperature u']}") in edges
    assert (f"a{ids['temperature u']}", "l0:p0") in edges              # misfit reads the solution
    facts = dict(graph_data.node_facts(poisson)["f0"])
    assert facts["Python step"] == f"#0 {label}" and "iterations=" in facts["facts"]
    assert [m["kind"] for m in graph_data.matches(poisson, "cg:")] == ["step"]
    collapsed = graph_data.graph_dot(poisson, collapsed=[("solve",)])
    assert "solve (collapsed)\\n0 launches, 1 Python steps: cg" in collapsed and "f0 [" not in collapsed
    assert ("s0", f"a{ids['temperature u']}") in set(re.findall(r"^\s*(\S+) -> (\S+?);", collapsed, re.M))


def test_examples_bundle_only_records_both_solves(tmp_path, monkeypatch):
    """`gradkit examples --bundle-only` on the two examples (--dir and --out given relative to the working
    directory): each bundle's steps are the CG solves the script printed (iterations per solve), in its last
    tape."""
    folder = tmp_path / "ex"
    folder.mkdir()
    for name in ("poisson_source.py", "implicit_cloth.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    out = tmp_path / "bundles"
    monkeypatch.chdir(tmp_path)
    assert cli.main(["examples", "--bundle-only", "--quiet", "--dir", "ex", "--out", "bundles"]) == 0
    poisson = load_bundle(out / "poisson_source")
    printed = re.findall(r"cg: (\d+) iterations, residual", (out / "poisson_source.log").read_text())
    assert [s["meta"]["iterations"] for s in poisson.steps] == [int(printed[-1])]
    cloth = load_bundle(out / "implicit_cloth")
    last = re.findall(r"cg iterations per step: \[([\d, ]+)\]", (out / "implicit_cloth.log").read_text())[-1]
    assert [s["meta"]["iterations"] for s in cloth.steps] == [int(k) for k in last.split(",")]
    assert all(s["meta"]["method"] == "cg" and s["scope"] == ["simulate"] for s in cloth.steps)
    # each solve sits between the launch writing its right-hand side and the one reading its solution
    for s in cloth.steps:
        before, after = cloth.launches[s["position"] - 1], cloth.launches[s["position"]]
        assert before["kernel"] == "step_rhs" and s["reads"][0] in before["arrays"]
        assert after["kernel"] == "advance" and s["writes"][0] in after["arrays"]
    assert len(re.findall(r"^\s*f\d+ \[label=\"cg: \d+ iterations", cloth.manifest["graph"], re.M)) == 4


HOSTILE = [
    (lambda s: s["meta"].update(iterations=[1, 2]),
     r"steps\[0\]\.meta\['iterations'\]: expected a number, string, boolean or null, got a list"),
    (lambda s: s["meta"].update(residual={"__class__": "os.system"}),
     r"steps\[0\]\.meta\['residual'\]: expected a number, string, boolean or null, got an object"),
    (lambda s: s["meta"].update({"not an identifier": 1}), r"a meta key must be an identifier"),
    (lambda s: s["meta"].update({f"k{j}": j for j in range(40)}), r"steps\[0\]\.meta: has \d+ entries, more than 32"),
    (lambda s: s.update(reads=["a999"]), r"steps\[0\]\.reads\[0\]: names array 'a999', which the manifest's arrays"),
    (lambda s: s.update(position=7), r"steps\[0\]\.position: 7 is out of range"),
    (lambda s: s.update(code="import os"), r"steps\[0\]\.code: unknown field"),
    (lambda s: s.update(kind="<script>"), r"steps\[0\]\.kind: '<script>' is not a step kind"),
    (lambda s: s.update(index=3), r"steps\[0\]\.index: 3 is out of range"),
    (lambda s: s.pop("writes"), r"steps\[0\]\.writes: missing"),
    (lambda s: s.update(name=""), r"steps\[0\]\.name: a name of 0 characters"),
]


@pytest.mark.parametrize("spoil, message", HOSTILE)
def test_hostile_step_entry_is_refused_naming_the_field(poisson, tmp_path, spoil, message):
    folder = tmp_path / "hostile"
    shutil.copytree(poisson.path, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    spoil(manifest["steps"][0])
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=message):
        load_bundle(folder)


def test_steps_must_be_a_list(poisson, tmp_path):
    folder = tmp_path / "hostile"
    shutil.copytree(poisson.path, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["steps"] = {"0": manifest["steps"][0]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"steps: expected a list, got an object"):
        load_bundle(folder)
