"""`tape.visualize(simplify_graph=True)`: launches repeated back to back are drawn once with their count,
the arrays of the folded repetitions as the first repetition's, and nothing else changes."""

import re
import shutil

import numpy as np
import pytest

import gradkit as gk
from gradkit.viz.launch_folding import Repeat, find_repeats


@gk.kernel
def step(x: gk.array(dtype=float), v: gk.array(dtype=float), x_next: gk.array(dtype=float)):
    i = gk.tid()
    x_next[i] = x[i] + 0.1 * v[i] * x[i]


@gk.kernel
def scale(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 0.5 * x[i]


@gk.kernel
def loss(x: gk.array(dtype=float), l: gk.array(dtype=float)):
    gk.atomic_add(l, 0, x[gk.tid()] ** 2)


def _launch_nodes(dot):
    return re.findall(r"^\s*(l\d+) \[shape=plaintext, label=<.*?<B>(\w+)</B> \[\d+\]( x\d+)?<", dot, re.M)


def _array_labels(dot):
    return re.findall(r'^\s*a\d+ \[label="([^"]*)"', dot, re.M)


def _edges(dot):
    return re.findall(r"^\s*(a\d+|l\d+:p\d+) -> (a\d+|l\d+:p\d+);", dot, re.M)


def _simulation(device, steps=5):
    xs = [gk.array(np.ones(4), dtype=float, device=device, requires_grad=True, label=f"x{t}")
          for t in range(steps + 1)]
    v = gk.array(np.ones(4), dtype=float, device=device, requires_grad=True, label="v")
    l = gk.zeros(1, dtype=float, device=device, requires_grad=True, label="l")
    tape = gk.Tape()
    with tape:
        for t in range(steps):
            gk.launch(step, 4, inputs=[xs[t], v], outputs=[xs[t + 1]], device=device)
        gk.launch(loss, 4, inputs=[xs[steps]], outputs=[l], device=device)
    return tape, xs, v, l


def test_repeated_steps_fold_into_one_node(device):
    tape, xs, v, l = _simulation(device)
    full = tape.visualize()
    assert len(_launch_nodes(full)) == 6 and len(_array_labels(full)) == 8
    dot = tape.visualize(simplify_graph=True)
    assert [(name, times) for _, name, times in _launch_nodes(dot)] == [("step", " x5"), ("loss", "")]
    labels = [label.split("\\n")[0] + (" +" if "more of the repeats" in label else "") for label in _array_labels(dot)]
    # x2..x4 only appear in folded steps: drawn as x1; x5 feeds the loss, so it stays
    assert sorted(labels) == ["l", "v", "x0", "x1 +", "x5"]
    assert "(and 3 more of the repeats)" in dot
    ids = dict((label.split("\\n")[0], aid) for aid, label in re.findall(r'^\s*(a\d+) \[label="([^"]*)"', dot, re.M))
    edges = set(_edges(dot))
    assert edges == {(ids["x0"], "l0:p0"), (ids["v"], "l0:p1"), ("l0:p2", ids["x1"]), (ids["x1"], "l0:p0"),
                     ("l0:p2", ids["x5"]), (ids["x5"], "l5:p0"), ("l5:p1", ids["l"])}
    # drawing does not touch the tape: gradients are as without it
    tape.backward(loss=l)
    want = 2 * 1.1 ** 5 * 1.1 ** 4 * 5 * 0.1     # d/dv sum((1 + 0.1 v)^5)^2 per element, at v = 1, x0 = 1
    np.testing.assert_allclose(v.grad.numpy(), np.full(4, want), rtol=1e-5)


def test_a_repeated_block_of_several_kernels_is_a_cluster(device):
    x = gk.array(np.ones(3), dtype=float, device=device, requires_grad=True, label="x")
    v = gk.array(np.ones(3), dtype=float, device=device, requires_grad=True, label="v")
    arrays = [gk.zeros(3, dtype=float, device=device, requires_grad=True) for _ in range(6)]
    tape = gk.Tape()
    with tape, tape.scope("simulate"):
        prev = x
        for t in range(3):
            gk.launch(step, 3, inputs=[prev, v], outputs=[arrays[2 * t]], device=device)
            gk.launch(scale, 3, inputs=[arrays[2 * t]], outputs=[arrays[2 * t + 1]], device=device)
            prev = arrays[2 * t + 1]
    dot = tape.visualize(simplify_graph=True)
    assert re.findall(r'label="([^"]*)"; style=dashed', dot) == ["repeated x3"]
    assert [(name, times) for _, name, times in _launch_nodes(dot)] == [("step", ""), ("scale", "")]
    assert dot.index("simulate") < dot.index("repeated x3")          # inside the scope's cluster
    assert dot.count("{") == dot.count("}")


def test_nothing_to_fold_draws_the_same_graph(device):
    a = gk.array([1.0, 2.0], device=device, requires_grad=True)
    b = gk.zeros(2, device=device, requires_grad=True)
    c = gk.zeros(2, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(scale, 2, inputs=[a], outputs=[b], device=device)
        with tape.scope("other"):
            gk.launch(scale, 2, inputs=[b], outputs=[c], device=device)     # same kernel, another scope
    assert tape.visualize(simplify_graph=True) == tape.visualize()


@pytest.mark.parametrize("sequence, want", [
    ("ABABABC", [Repeat(0, 2, 3)]),
    ("AAAB", [Repeat(0, 1, 3)]),
    ("ABCABD", []),
    ("AAAAAA", [Repeat(0, 1, 6)]),                # a tie in coverage goes to the shorter block
    ("XABCABCABCYY", [Repeat(1, 3, 3), Repeat(10, 1, 2)]),
    ("", []),
])
def test_find_repeats(sequence, want):
    assert find_repeats(list(sequence)) == want


@pytest.mark.needs_dot
@pytest.mark.skipif(shutil.which("dot") is None, reason="GraphViz `dot` not installed")
def test_folded_graph_renders(tmp_path, device):
    tape, *_ = _simulation(device, steps=20)
    tape.visualize(tmp_path / "folded.svg", simplify_graph=True)
    svg = (tmp_path / "folded.svg").read_text()
    assert "step" in svg and "x20" in svg and "(and 18 more of the repeats)" in svg
    assert "x19" not in svg                                          # folded into x1


def test_visualize_folds_by_default_past_fifty_launches(device):
    """Issue 41 item 5: a 60-step rollout's graph folds unless asked not to; 50 steps stay whole."""
    long_tape, *_ = _simulation(device, steps=60)
    short_tape, *_ = _simulation(device, steps=49)
    assert len(_launch_nodes(long_tape.visualize())) == 2                      # step x60, loss
    assert len(_launch_nodes(long_tape.visualize(simplify_graph=False))) == 61
    assert len(_launch_nodes(short_tape.visualize())) == 50
    dot = long_tape.visualize()
    assert isinstance(dot, str) and dot.startswith("digraph")                  # still the DOT text


@pytest.mark.needs_dot
@pytest.mark.skipif(shutil.which("dot") is None, reason="GraphViz `dot` not installed")
def test_visualize_draws_inline_in_jupyter(device):
    tape, *_ = _simulation(device, steps=3)
    svg = tape.visualize()._repr_svg_()
    assert svg.startswith("<svg") and "step" in svg and "</svg>" in svg.rstrip()
