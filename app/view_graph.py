"""Tape graph view: the recorded launches and arrays as a graph, coloured by gradient flow, with the arrays
cut off from the gradient (no requires_grad) listed and explained."""

from __future__ import annotations

import streamlit as st

from . import data
from .ui import static_table

LEGEND = ("**Colours** (the gradient-flow view's states) — ok: blue; consumed (an intermediate whose gradient "
          "backward passed on and cleared): teal; **cut off (no `requires_grad`): pink dashed**; zero: yellow "
          "bold; NaN/Inf: red bold; unused output: grey. Boxes are launches, one port per argument; clusters "
          "are `tape.scope(...)` blocks.")


def render(bundle, name: str) -> None:
    has_coloured = bool(bundle.manifest.get("graph_gradients"))
    mode = st.radio("Colouring", ["gradient flow", "plain"] if has_coloured else ["plain"], horizontal=True,
                    key="graph_mode")
    dot = data.graph_dot(bundle, gradients=mode == "gradient flow")
    st.markdown(LEGEND)
    st.graphviz_chart(dot, width="stretch")
    cut = data.cut_off_arrays(bundle)
    st.subheader("Arrays cut off from the gradient")
    if not cut:
        st.success("Every float array the launches use has requires_grad=True.")
    for c in cut:
        st.warning(f"**{c['array']}** ({c['dtype']}[{c['shape']}], used by {c['used by']}): "
                   f"{c['explanation']}")
    static_table([{k: v for k, v in c.items() if k not in ("id", "explanation")} for c in cut])
    st.download_button("Download DOT", dot, file_name=f"{name}-tape.dot", mime="text/vnd.graphviz")
