"""Tape graphs (structure read back from the DOT text), kernel IR graphs, rendering with `dot`, and debug
bundles (round trip, and clear errors for malformed ones)."""

import json
import re
import shutil
import zipfile

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def add(a: gk.array(dtype=float), b: gk.array(dtype=float), c: gk.array(dtype=float)):
    i = gk.tid()
    c[i] = a[i] + b[i]


def _warp_example(device):
    """Warp's documented visualisation example: `add` three times, a scope inside a timer, c without grad."""
    a = gk.array([1.0, 2.0], device=device, requires_grad=True, label="a")
    b = gk.array([3.0, 4.0], device=device, requires_grad=True, label="b")
    c = gk.zeros(2, device=device, label="c")                          # no requires_grad
    d = gk.zeros(2, device=device, requires_grad=True, label="d")
    e = gk.zeros(2, device=device, requires_grad=True, label="e")
    tape = gk.Tape()
    with tape:
        with gk.ScopedTimer("Adder", print=False):
            gk.launch(add, 2, inputs=[a, b], outputs=[c], device=device)
            with tape.scope("Custom Scope"):
                gk.launch(add, 2, inputs=[a, c], outputs=[d], device=device)
        gk.launch(add, 2, inputs=[d, b], outputs=[e], device=device)
    return tape, (a, b, c, d, e)


def _nodes(dot):
    return dict(re.findall(r'^\s*(a\d+) \[label="([^"]*)"', dot, re.M))


def test_tape_graph_structure(device):
    tape, arrays = _warp_example(device)
    dot = tape.visualize()
    nodes = _nodes(dot)
    assert len(nodes) == 5                                             # one node per array object
    assert sum(1 for line in dot.splitlines() if re.match(r"\s*l\d+ \[shape=plaintext", line)) == 3
    clusters = re.findall(r'label="([^"]*)"; style=rounded', dot)
    assert clusters == ["Adder", "Custom Scope"]
    assert dot.index("Custom Scope") > dot.index("Adder")             # nested as recorded
    edges = re.findall(r"(a\d+|l\d+(?::p\d+)?) -> (a\d+|l\d+(?::p\d+)?)", dot)
    assert len(edges) == 9                                             # 3 launches x 3 arguments
    c_line = next(line for line in dot.splitlines() if '[label="c\\n' in line)
    assert 'style="filled,dashed"' in c_line                           # cut off from gradients
    assert all('style="filled"' in line for line in dot.splitlines() if '[label="a\\n' in line)


def test_gradient_flow_view(device):
    tape, (a, b, c, d, e) = _warp_example(device)
    tape.backward(grads={e: gk.array([1.0, 1.0], device=device)})
    dot = tape.visualize(show_gradients=True)
    leaves = {line.split('"')[1].split("\\n")[0]: line for line in dot.splitlines() if "ok |grad| =" in line}
    assert set(leaves) == {"a", "b"}
    assert "|grad| = 1.41" in leaves["a"]                              # via d = a + c
    assert "|grad| = 1.41" in leaves["b"]                              # only via e: the path through c is cut
    assert "\\nok |grad| = 1.41" in leaves["a"]
    assert "\\nconsumed" in dot and "zero" not in dot                 # intermediates (d, e) are consumed


def test_gradient_flow_states_with_snapshots(device):
    """A snapshotting tape tells what reached each intermediate before backward consumed it; a NaN gradient is
    coloured as one and gets no finite norm."""
    tape, (a, b, c, d, e) = _warp_example(device)
    tape.snapshotting = True
    tape.backward(grads={e: gk.array([1.0, 1.0], device=device)})
    dot = tape.visualize(show_gradients=True)
    assert dot.count("consumed |grad| = ") >= 1
    from gradkit.viz import flow_states
    a.grad.assign(np.array([np.nan, 1.0], dtype=np.float32))
    node = _nodes(tape.visualize(show_gradients=True))
    line = next(v for v in node.values() if v.startswith("a\\n"))
    assert "NaN/Inf |grad| = nan" in line
    assert flow_states.FILLS[flow_states.NONFINITE] in tape.visualize(show_gradients=True)


@pytest.mark.skipif(shutil.which("dot") is None, reason="GraphViz `dot` not installed")
def test_render_svg_and_kernel_graph(tmp_path, device):
    tape, _ = _warp_example(device)
    tape.visualize(tmp_path / "tape.svg")
    assert (tmp_path / "tape.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    dot = gk.viz.kernel_graph(add, adjoint=True, filename=tmp_path / "adj.svg")
    assert "atomic" in dot and "line" not in dot.split("\n")[0]
    assert (tmp_path / "adj.svg").stat().st_size > 0


def test_bundle_round_trip_and_malformed(tmp_path, device):
    tape, (a, *_rest) = _warp_example(device)
    tape.save(tmp_path / "bundle")
    tape.save(tmp_path / "bundle.zip")
    for path in (tmp_path / "bundle", tmp_path / "bundle.zip"):
        bundle = gk.viz.load_bundle(path)
        assert [r["kernel"] for r in bundle.launches] == ["add"] * 3
        assert bundle.launches[1]["scope"] == ["Adder", "Custom Scope"]
        aid = bundle.launches[0]["arrays"][0]
        np.testing.assert_array_equal(bundle.value(aid), a.numpy())
        assert "kernel add" in bundle.manifest["kernels"]["add"]["ir"]
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    manifest["schema"] = 99
    (tmp_path / "bundle" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="schema 99"):
        gk.viz.load_bundle(tmp_path / "bundle")
    (tmp_path / "bundle" / "manifest.json").write_text("{ not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        gk.viz.load_bundle(tmp_path / "bundle")
    data = (tmp_path / "bundle.zip").read_bytes()
    (tmp_path / "cut.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.zip"):
        gk.viz.load_bundle(tmp_path / "cut.zip")
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("manifest.json", json.dumps({"schema": 2, "launches": [], "kernels": {}, "graph": "",
                                                 "arrays": [{"id": "x", "shape": [3], "label": "x",
                                                             "dtype": "float32", "requires_grad": False,
                                                             "device": "cpu"}]}))
        z.writestr("arrays.npz", b"not an npz")
    with pytest.raises(ValueError, match="damaged"):
        gk.viz.load_bundle(tmp_path / "bad.zip")


def test_bundles_store_no_absolute_paths(tmp_path):
    """A shared bundle does not carry the recording machine's folders: kernel files are stored relative to the
    bundle's folder when inside it, else by name; the NaN origin's message too."""
    import os
    from gradkit.viz.bundle import _portable_paths
    inside = tmp_path / "proj" / "model.py"
    manifest = {"kernels": {"k": {"file": str(inside)}, "j": {"file": "/elsewhere/deep/other.py"}},
                "nan": {"file": str(inside), "message": f"NaN in 'k' at {inside}:12"}}
    _portable_paths(manifest, tmp_path / "bundle")
    assert manifest["kernels"]["k"]["file"] == "proj/model.py"
    assert manifest["kernels"]["j"]["file"] == "other.py"
    assert manifest["nan"] == {"file": "proj/model.py", "message": "NaN in 'k' at proj/model.py:12"}
    assert os.sep + "elsewhere" not in str(manifest)


def test_save_refuses_what_the_loader_would_refuse(tmp_path, device):
    """save_bundle validates the manifest it is about to write: an extra key in `nan` is a BundleError at save,
    and nothing is written (it used to write a bundle that then would not open)."""
    from gradkit.viz.bundle import BundleError, save_bundle
    a, b = (gk.array(np.linspace(0.1, 1.0, 8).astype(np.float32), device=device, requires_grad=True)
            for _ in range(2))
    c = gk.zeros(8, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(add, 8, inputs=[a, b], outputs=[c], device=device)
    with pytest.raises(BundleError, match="nan"):
        save_bundle(tape, tmp_path / "b", nan={"message": "m", "launch": 0, "colour": "red"})
    assert not (tmp_path / "b").exists()
