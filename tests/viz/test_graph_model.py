"""viz/graph_model.py on live tapes: collapsing a scope draws it as one node that hides the arrays only it
writes and uses, a search outlines matches and greys the rest, labels from user data stay text, and the DOT
always renders with GraphViz."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import gradkit as gk
from gradkit.viz.graph_model import HIGHLIGHT, scopes, to_dot
from gradkit.viz.tape_graph import tape_model


@gk.kernel
def double(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


@gk.kernel
def total(x: gk.array(dtype=float), s: gk.array(dtype=float)):
    gk.atomic_add(s, 0, x[gk.tid()])


def _recorded(label0: str = "x"):
    x = gk.array(np.arange(4, dtype=np.float32), requires_grad=True, label=label0)
    s = gk.zeros(1, requires_grad=True, label="s")
    tape = gk.Tape()
    with tape:
        with tape.scope("body"):
            y = x
            for k in range(3):
                z = gk.zeros(4, requires_grad=True, label=f"h{k}")
                gk.launch(double, 4, [y], [z])
                y = z
        with tape.scope("loss"):
            gk.launch(total, 4, [y], [s])
    tape.backward(loss=s)
    return tape


def _render(dot: str) -> bytes:
    graphviz = pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        pytest.skip("GraphViz's dot is not installed")
    return graphviz.Source(dot).pipe(format="svg")


def test_collapsed_scope_is_one_node_hiding_its_intermediates():
    model = tape_model(_recorded(), show_gradients=True)
    assert scopes(model) == [("body",), ("loss",)]
    dot = to_dot(model, show_gradients=True, collapsed=[("body",)])
    assert re.search(r'label="body \(collapsed\)\\n3 launches: double\\n2 intermediate arrays inside"', dot)
    labels = re.findall(r'^\s*a\d+ \[label="([^\\"]*)', dot, re.M)
    assert labels == ["x", "h2", "s"]                     # h0, h1 live and die inside the scope
    assert len(re.findall(r"-> s0;", dot)) == 1 and len(re.findall(r"s0 -> a", dot)) == 1
    assert "double" not in re.sub(r'label="body[^"]*"', "", dot)
    _render(dot)


def test_search_outlines_matches_and_greys_the_rest():
    model = tape_model(_recorded())
    dot = to_dot(model, highlight="TOT")                  # case-insensitive
    assert re.search(rf'BGCOLOR="#ffe3c4" COLOR="{HIGHLIGHT}"><TR><TD[^>]*><B>total', dot)
    assert dot.count(f'COLOR="{HIGHLIGHT}"') == 1        # only the total launch
    assert dot.count('fontcolor="#bbbbbb"') == 3 + 5     # three double launches, five arrays greyed
    dot = to_dot(model, highlight="h1")
    assert re.search(rf'a\d+ \[label="h1\\n[^\n]*color="{HIGHLIGHT}", penwidth="3"', dot)
    _render(dot)


def test_labels_from_user_data_stay_text():
    """An array labelled like an HTML label or with quotes is quoted, never parsed as DOT/HTML."""
    tape = _recorded(label0='<B>x</B> "quoted" \\ back')
    dot = tape.visualize()
    assert '[label="<B>x</B> \\"quoted\\" \\\\ back\\n' in dot
    svg = _render(dot).decode()
    assert "&lt;B&gt;x&lt;/B&gt;" in svg
