"""Tiny helpers for writing DOT text (quoting, attributes) and rendering it with GraphViz's `dot`, bounded in
time and size: a graph `dot` cannot lay out in a few seconds is refused with a hint (fold or collapse it),
and a `dot` that overruns its time, or whose caller went away (`cancelled`: the debugger's browser tab
closed), is killed, never left running."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import time
from collections.abc import Callable

RENDER_TIMEOUT = 20.0      # seconds `dot` may take before it is killed (RenderError)
RENDER_MAX_ITEMS = 4000    # nodes + edges past which `dot` is not started at all (layout grows superlinearly)
CANCEL_POLL = 0.1          # seconds between checks of `cancelled` while `dot` runs

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
    """`dot` is missing, failed, took longer than its time, was cancelled, or the graph is too large to try
    (`kind`: "missing", "failed", "too_slow", "cancelled", "too_large")."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def graph_items(dot: str) -> int:
    """Nodes plus edges of DOT text as the viz modules write it (one statement per line)."""
    return sum(1 for line in dot.splitlines() if line.rstrip().endswith(("]", ";")) and not line.lstrip().startswith(
        ("graph ", "node ", "edge ", "digraph", "subgraph", "}", "label=", "rankdir")))


def render(dot: str, fmt: str = "svg", timeout: float | None = None, max_items: int | None = None,
           cancelled: Callable[[], bool] | None = None) -> bytes:
    """`dot` rendered to `fmt` by GraphViz's `dot` program, killed after `timeout` seconds or as soon as
    `cancelled()` is true (checked every CANCEL_POLL s); RenderError naming why it did not render (missing
    program, failure, too slow, cancelled, more than `max_items` nodes and edges)."""
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
    out, err, code = _run(exe, fmt, dot.encode("utf-8"), timeout, cancelled)
    if code != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise RenderError(f"dot failed on this graph (exit {code}{': ' + lines[-1] if lines else ''})",
                          "failed")
    return out


def _run(exe: str, fmt: str, source: bytes, timeout: float, cancelled) -> tuple[bytes, bytes, int]:
    """Run `dot` on `source`: (stdout, stderr, exit code); killed and reaped past `timeout` or on
    `cancelled()` (RenderError "too_slow" / "cancelled")."""
    proc = subprocess.Popen([exe, f"-T{fmt}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    source_left, finished = source, False
    try:
        while True:
            step = min(CANCEL_POLL, max(deadline - time.monotonic(), 0.0)) if cancelled else \
                max(deadline - time.monotonic(), 0.0)
            try:
                # the input goes with the first call only; a retry after TimeoutExpired loses no output
                out, err = proc.communicate(source_left, timeout=step)
                finished = True
                return out, err, proc.returncode
            except subprocess.TimeoutExpired:
                source_left = None
            if cancelled is not None and cancelled():
                raise RenderError("the graph's page was closed, so dot was stopped", "cancelled")
            if time.monotonic() >= deadline:
                raise RenderError(f"dot did not lay the graph out in {timeout:g} s and was stopped: fold "
                                  "repeated launches (simplify_graph=True) or collapse scopes", "too_slow")
    finally:
        if not finished:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()                  # reap it and close its pipes


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
