"""Overview (the landing view): every bundle of the folder with its status — the NaN/Inf origin (op, line,
iteration), arrays cut off from the gradient, gradient-flow alarms — each linking straight to the view
and launch that shows the problem."""

from __future__ import annotations

import urllib.parse

import streamlit as st

from . import overview_data
from .ui import plain_html

STATUS_STYLE = {"NaN/Inf": "#d62728", "alarms": "#e45756", "cut off": "#f58518", "ok": "#54a24b",
                "unreadable": "#7f7f7f"}


def link(name: str, view: str, text: str, launch: int | None = None) -> str:
    """An anchor that reopens the debugger on bundle `name` at `view` (and launch row `launch`)."""
    query = {"bundle": name, "view": view}
    if launch is not None:
        query["launch"] = str(launch)
    return (f'<a class="gk-link" href="?{urllib.parse.urlencode(query)}" target="_self">'
            f'{plain_html(text)}</a>')


def render_all(entries: list[tuple[str, object]]) -> None:
    """`entries`: (bundle name, a loaded Bundle or the error message it failed with)."""
    st.caption("Every bundle of this folder; problems first. Each link opens the view that shows it.")
    rows = []
    for name, bundle in entries:
        status = overview_data.bundle_status(bundle) if not isinstance(bundle, str) else {
            "status": "unreadable", "rank": 9, "problems": [], "launches": 0, "detail": bundle}
        rows.append((name, status))
    rows.sort(key=lambda r: (r[1]["rank"], r[0]))
    cells = []
    for name, s in rows:
        colour = STATUS_STYLE.get(s["status"], "#7f7f7f")
        problems = "<br>".join(link(name, p["view"], p["text"], p.get("launch")) for p in s["problems"]) or \
            plain_html(s.get("detail") or "no problem found")
        cells.append(f'<tr class="gk-bundle-row"><td>{link(name, "launches", name)}</td>'
                     f'<td><span class="gk-status" style="color:{colour};font-weight:bold">'
                     f'{plain_html(s["status"])}</span></td><td>{s["launches"]}</td><td>{problems}</td></tr>')
    st.markdown('<table class="gk-overview" style="width:100%"><tr><th>bundle</th><th>status</th>'
                '<th>launches</th><th>what to look at</th></tr>' + "".join(cells) + "</table>",
                unsafe_allow_html=True)
