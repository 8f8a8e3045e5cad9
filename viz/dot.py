"""Tiny helpers for writing DOT text (quoting, attributes) and rendering it with the graphviz package."""

from __future__ import annotations

import pathlib
import re

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


def write(dot: str, filename) -> None:
    """Write DOT text (.dot/.gv) or render it (.svg/.png/.pdf) with the `dot` program via the graphviz package."""
    if filename is None:
        return
    path = pathlib.Path(filename)
    fmt = path.suffix.lstrip(".").lower()
    if fmt in ("dot", "gv", ""):
        path.write_text(dot)
        return
    try:
        import graphviz
    except ImportError:
        raise RuntimeError("rendering needs the 'graphviz' Python package: pip install 'gradkit[viz]' (or pip install graphviz)") from None
    try:
        data = graphviz.Source(dot).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RuntimeError("rendering needs GraphViz's 'dot' program (apt-get install graphviz)") from None
    path.write_bytes(data)
