"""Rendering with GraphViz's `dot` is bounded (issue 41 item 5): a graph too large to lay out in a few
seconds is refused before `dot` starts, a `dot` that overruns its time is killed (no process is left
behind), and either way the error names the way out (fold or collapse)."""

import os
import shutil
import time

import pytest

from gradkit.viz.dot import DotSource, RenderError, graph_items, render

pytestmark = [pytest.mark.needs_dot,
              pytest.mark.skipif(shutil.which("dot") is None, reason="GraphViz `dot` not installed")]


def _chain(n: int) -> str:
    nodes = "".join(f'  n{k} [label="node {k}"];\n' for k in range(n))
    edges = "".join(f"  n{k} -> n{k + 1};\n" for k in range(n - 1))
    return "digraph g {\n  rankdir=LR;\n" + nodes + edges + "}\n"


def _dot_children() -> list[int]:
    """Pids of `dot` processes whose parent is this process."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and comm == "dot":
            out.append(int(pid))
    return out


def test_counts_nodes_and_edges():
    assert graph_items(_chain(10)) == 19


def test_a_graph_too_large_is_refused_before_dot_starts():
    t0 = time.perf_counter()
    with pytest.raises(RenderError, match="more than dot lays out") as err:
        render(_chain(3000), max_items=4000)
    assert err.value.kind == "too_large" and "simplify_graph=True" in str(err.value)
    assert time.perf_counter() - t0 < 1.0


def test_dot_past_its_time_is_killed():
    with pytest.raises(RenderError, match="was stopped") as err:
        render(_chain(1500), timeout=0.05)
    assert err.value.kind == "too_slow"
    assert _dot_children() == []                       # nothing left running


def test_a_small_graph_renders_and_draws_inline():
    svg = render(_chain(5)).decode()
    assert "node 4" in svg
    assert DotSource(_chain(5))._repr_svg_().startswith("<svg")
    assert DotSource(_chain(3000))._repr_svg_() is None        # too large: Jupyter shows the text instead


def test_dot_is_killed_as_soon_as_its_caller_cancels():
    """The debugger cancels when the browser tab closes: `dot` is stopped within a poll, not at its timeout,
    and reaped."""
    t0 = time.perf_counter()
    with pytest.raises(RenderError, match="page was closed") as err:
        render(_chain(6000), timeout=60, max_items=20_000, cancelled=lambda: time.perf_counter() - t0 > 0.2)
    assert err.value.kind == "cancelled"
    assert time.perf_counter() - t0 < 2.0
    assert _dot_children() == []


def test_a_caller_that_never_cancels_gets_the_drawing():
    svg = render(_chain(20), cancelled=lambda: False)
    assert b"node 19" in svg
