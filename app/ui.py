"""Small Streamlit helpers the views share: bundle text made plain, number formatting for tables and the view
registry.

A bundle is data from someone else: every text it holds (labels, kernel names, scopes, devices, notes, pass
names, hazards, NaN reports, file names) reaches the page through `plain` (Markdown contexts: st.markdown,
alerts, captions, headings, metrics, tab and expander labels, st.table cells) or `plain_html` (HTML the app
writes itself), so it is drawn as the characters it holds: never an image, link, HTML tag or formula."""

from __future__ import annotations

import math
import re
import string

import streamlit as st

# slug -> title, in sidebar order
VIEWS = {"overview": "Overview", "launches": "Launches", "graph": "Tape graph", "flow": "Gradient flow", "nan": "NaN/Inf origin",
         "code": "Code", "check": "Check", "compare": "Compare"}

_PUNCTUATION = frozenset(string.punctuation)     # what plain_html writes as character references
# Characters that open inline Markdown anywhere (images, links, HTML, entities, emphasis, code, tables, LaTeX,
# strikethrough, Streamlit's :color[...] directives) and the backslash itself: always escaped.
_INLINE = re.compile(r"([\\`*_\[\]<>!|~$&])")
# At a line's start (after its indentation): a heading, list item, quote, setext underline or thematic break
_LINE_START = re.compile(r"(^[ \t]*)(?:([#+\-=])|(\d+)([.)]))", re.M)
# Streamlit's Markdown links bare URLs (http://, www.) and e-mail addresses found in the text itself, escaped
# or not, and turns :name: and :material/name: into emoji or icons: a WORD JOINER (U+2060, invisible) after a
# ':' that opens such a pattern, before each '@' and after 'www' breaks them while the text reads the same
# ('x.py:12' is left as it is).
_JOINED = re.compile(r"(?<=:)(?=[\w+\-]*[/:])|(?=@)|(?i:(?<=www)(?=\.))")
WORD_JOINER = "\u2060"


def plain(text) -> str:
    """`text` for a Markdown context (st.markdown, alerts, captions, headings, metrics, tab and expander labels,
    st.table cells), shown as itself: every character that could open Markdown, HTML, LaTeX or a directive
    backslash-escaped, and bare URLs, e-mail addresses and :codes: broken by an invisible WORD JOINER (never
    linked, never an emoji). Ordinary text ('x.npy: is a FIFO, not a regular file', 'x.py:12') is left as
    it is."""
    lines = re.sub(r"\r\n?", "\n", str(text))          # CommonMark's line endings, as '^' finds them
    escaped = _INLINE.sub(r"\\\1", _JOINED.sub(WORD_JOINER, lines))
    return _LINE_START.sub(lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2) else
                                                   m.group(3) + "\\" + m.group(4)), escaped)


def plain_html(text) -> str:
    """`text` inside HTML the app writes (st.markdown(..., unsafe_allow_html=True)), shown as itself: ASCII
    punctuation and line breaks as numeric character references, so it can neither open a tag nor end the
    HTML block with a blank line and be read as Markdown after it."""
    return "".join(f"&#{ord(ch)};" if ch in _PUNCTUATION or ch in "\r\n" else ch for ch in str(text))


def num(value) -> str:
    """A table cell for a number: 4 significant digits, '' for missing values."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}"
    return str(value)


def table(rows: list[dict], key: str | None = None, **kwargs):
    """Rows as an interactive dataframe with compact numbers (an empty caption when there are none)."""
    if not rows:
        st.caption("(none)")
        return None
    shown = [{k: (num(v) if isinstance(v, float) or v is None or isinstance(v, bool) else v)
              for k, v in r.items()} for r in rows]
    return st.dataframe(shown, hide_index=True, key=key, **kwargs)


def static_table(rows: list[dict]) -> None:
    """Rows as a static table (all text in the page, for small tables); st.table reads cells as Markdown, so
    every cell is made plain."""
    if not rows:
        st.caption("(none)")
        return
    st.table([{plain(k): plain(num(v) if not isinstance(v, str) else v) for k, v in r.items()} for r in rows])
