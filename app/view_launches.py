"""Launches view: every recorded launch (forward, then the adjoint launches of backward()) in a table;
selecting one shows its arguments, value statistics before/after and gradient statistics. The Python steps
on the tape (a linear solve, record_func) are listed above it as steps, not kernels."""

from __future__ import annotations

import streamlit as st

from ..viz.bundle import BundleError
from . import data, nan_data, query
from .ui import num, plain, static_table, table

PICK = "launch_pick"
TABLE = "launch_table"


def _sync_from_table(titles: list[str]) -> None:
    """Table row clicked: make the launch picker follow it."""
    rows = st.session_state[TABLE].selection.rows
    if rows:
        st.session_state[PICK] = titles[rows[0]]


def render(bundle, name: str) -> None:
    s = data.summary(bundle)
    cols = st.columns(4)
    cols[0].metric("forward launches", s["launches"])
    cols[1].metric("backward launches", s["backward launches"])
    cols[2].metric("forward time", f"{s['total ms']:.3g} ms")
    cols[3].metric("kernels", len(s["kernels"]))
    if s["nan"]:
        st.error("A launch produced NaN/Inf values: see the **NaN/Inf origin** view.")
    for note in s["notes"]:
        st.info(plain(note))
    steps = data.step_rows(bundle)
    if steps:
        _steps(steps)
    rows = data.launch_rows(bundle)
    if not rows:
        st.warning("This bundle recorded no launches.")
        return
    titles = [data.row_title(r) for r in rows]
    st.subheader("Launches")
    st.caption("Execution order: forward launches, then the adjoint launches backward() ran (in reverse). "
               "Select a row, or pick a launch below, to see its arguments and statistics.")
    table(rows, key=TABLE, on_select=lambda: _sync_from_table(titles), selection_mode="single-row",
          column_order=["order", "pass", "kernel", "variant", "dim", "device", "ms", "scope", "forward launch",
                        "new non-finite"])
    if st.session_state.get(PICK) not in titles:
        st.session_state[PICK] = titles[_first_row(bundle, len(titles))]
    title = st.selectbox("Launch", titles, key=PICK)
    _detail(bundle, rows[titles.index(title)])


def _first_row(bundle, n: int) -> int:
    """The launch shown first: the one the URL names (?launch=N), else the one that wrote the first NaN/Inf,
    else the first. A `launch` naming no launch is said in the page."""
    try:
        asked = query.launch_index(st.query_params.get("launch"), n)
    except BundleError as exc:
        st.warning(plain(f"{exc}: showing the default launch instead."))
        asked = None
    if asked is not None:
        return asked
    row = nan_data.nan_launch_row(bundle, nan_data.nan_origin(bundle))
    return row if row is not None and row < n else 0


def _detail(bundle, row: dict) -> None:
    d = data.launch_detail(bundle, row)
    st.subheader(plain(d["title"]), anchor=False)
    st.caption(plain(f"device {row['device']} · {num(row['ms'])} ms · scope {row['scope'] or '(none)'}"))
    for note in d["notes"]:          # the app's own words (no bundle text)
        st.info(note)
    st.markdown("**Arguments**")
    static_table(d["arguments"])
    st.markdown("**Values before / after the forward launch**")
    static_table(d["values"])
    st.markdown("**Gradients before / after the adjoint launch**")
    static_table(d["gradients"])
    arrays = [a["param"] for a in d["arguments"] if a["kind"] == "array"]
    if arrays:
        with st.expander("Snapshot values"):
            param = st.selectbox("Argument", arrays, key="launch_snapshot_param")
            preview = data.snapshot_preview(bundle, row, param)
            if preview:
                st.dataframe({k: v for k, v in preview.items()})
            else:
                st.caption("no snapshots stored for this argument (size cap, or recorded without snapshots)")


def _steps(rows: list[dict]) -> None:
    """The Python steps: where each ran among the launches, what it did (a solve's iterations and residual)
    and the arrays it read and wrote; their backward is Python code, not an adjoint kernel."""
    st.subheader("Python steps")
    st.caption("Steps on the tape that are not kernel launches (a linear solve, tape.record_func): "
               "each ran between the forward launches shown; its backward pass runs its own Python code.")
    static_table([{k: r[k] for k in ("step", "step label", "kind", "when", "scope", "reads", "writes", "facts")}
                  for r in rows])
