"""Tiny helpers for writing DOT text (quoting, attributes) and rendering it with GraphViz's `dot`, bounded in
time and size: a graph `dot` cannot lay out in a few seconds is refused with a hint (fold or collapse it),
and a `dot` that overruns its time is killed, never left running."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

RENDER_TIMEOUT = 20.0      # seconds `dot` may take before it is killed (RenderError)
RENDER_MAX_ITEMS = 4000    # nodes + edges past which `dot` is not started at all (layout grows superlinearly)

# Characters XML 1.0 does not allow (in an HTML-like label dot refuses the whole graph; NUL ends a quoted
# string early; in the SVG they make it invalid XML): text from a bundle shows U+FFFD in their place.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def quote(text) -> str:
    """`text` as a DOT quoted string drawn as itself: backslashes doubled (no \\N, \\G or \\l escapes), quotes
    escaped, newlines as line breaks."""
    s = _NOT_XML.sub("\ufffd", str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
    return f'"{s}"'


def attrs(**kw) -> str:
    """` [k="v", ...]` with every value quoted (a label from user data that starts with '<' stays text, never
    an HTML label); None values are left out."""
    items = [f"{k}={quote(v)}" for k, v in kw.items() if v is not None]
    return f" [{', '.join(items)}]" if items else ""


def html_escape(text) -> str:
    """`text` as the content of an HTML-like label (`<...>`), drawn as itself: no tag, entity or IMG."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return _NOT_XML.sub("\ufffd", s)


class RenderError(RuntimeError):
    """`dot` is missing, failed, took longer than its time, or the graph is too large to try (`kind`: "missing",
    "failed", "too_slow", "too_large")."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def graph_items(dot: str) -> int:
    """Nodes plus edges of DOT text as the viz modules write it (one statement per line)."""
    return sum(1 for line in dot.splitlines() if line.rstrip().endswith(("]", ";")) and not line.lstrip().startswith(
        ("graph ", "node ", "edge ", "digraph", "subgraph", "}", "label=", "rankdir")))


def render(dot: str, fmt: str = "svg", timeout: float | None = None, max_items: int | None = None) -> bytes:
    """`dot` rendered to `fmt` by GraphViz's `dot` program, killed after `timeout` seconds; RenderError naming
    why it did not render (missing program, failure, too slow, more than `max_items` nodes and edges)."""
    timeout = RENDER_TIMEOUT if timeout is None else timeout
    max_items = RENDER_MAX_ITEMS if max_items is None else max_items
    items = graph_items(dot)
    if items > max_items:
        raise RenderError(f"the graph has {items} nodes and edges, more than dot lays out in a few seconds "
                          f"(limit {max_items}): fold repeated launches (simplify_graph=True) or collapse scopes",
                          "too_large")
    exe = shutil.which("dot")
    if exe is None:
        raise RenderError("rendering needs GraphViz's 'dot' program (apt-get install graphviz)", "missing")
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=dot.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:       # subprocess.run killed it
        raise RenderError(f"dot did not lay the graph out in {timeout:g} s and was stopped: fold repeated "
                          "launches (simplify_graph=True) or collapse scopes", "too_slow") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RenderError(f"dot failed on this graph (exit {proc.returncode}{': ' + err[-1] if err else ''})",
                          "failed")
    return proc.stdout


class DotSource(str):
    """DOT text (a str: print it, write it, compare it) that Jupyter draws inline as SVG (`_repr_svg_`), when
    `dot` lays it out within its time; otherwise the notebook shows the text."""

    def _repr_svg_(self) -> str | None:
        try:
            svg = render(self, "svg").decode("utf-8")
        except RenderError:
            return None
        return svg[svg.find("<svg"):]


def write(dot: str, filename) -> None:
    """Write DOT text (.dot/.gv) or render it (.svg/.png/.pdf) with the `dot` program (bounded: `render`)."""
    if filename is None:
        return
    path = pathlib.Path(filename)
    fmt = path.suffix.lstrip(".").lower()
    if fmt in ("dot", "gv", ""):
        path.write_text(dot)
        return
    try:
        data = render(dot, fmt)
    except RenderError as exc:
        raise RuntimeError(str(exc)) from None
    path.write_bytes(data)
