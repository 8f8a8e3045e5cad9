"""Small Streamlit helpers the views share: number formatting for tables and the view registry."""

from __future__ import annotations

import math

import streamlit as st

# slug -> title, in sidebar order
VIEWS = {"overview": "Overview", "launches": "Launches", "graph": "Tape graph", "flow": "Gradient flow", "nan": "NaN/Inf origin",
         "code": "Code", "check": "Check", "compare": "Compare"}


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
    """Rows as a static HTML table (all text in the page, for small tables)."""
    if not rows:
        st.caption("(none)")
        return
    st.table([{k: num(v) if not isinstance(v, str) else v for k, v in r.items()} for r in rows])
