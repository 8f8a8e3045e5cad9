"""Tape graph view: the recorded launches and arrays as a graph, coloured by gradient flow, that scales: repeats
folded, scopes collapsible, a search that outlines matching kernels and arrays, zoom and pan, and a click on a
node for its facts (app/graph_component.py); the arrays cut off from the gradient are listed and explained."""

from __future__ import annotations

import streamlit as st

from ..viz.bundle import FOLD_OVER
from . import flow_data, graph_component, graph_data
from .ui import plain, static_table, table

LEGEND = ("**Colours** (the gradient-flow view's states) — ok: blue; consumed (an intermediate whose gradient "
          "backward passed on and cleared): teal; **cut off (no `requires_grad`): pink dashed**; zero: yellow "
          "bold; NaN/Inf: red bold; unused output: grey. Boxes are launches, one port per argument; clusters "
          "are `tape.scope(...)` blocks; rounded lilac boxes are Python steps (a linear solve with its iterations "
          "and residual, record_func); 'repeated xN' folds launches repeated back to back.")


def render(bundle, name: str) -> None:
    c1, c2, c3 = st.columns([1, 1, 2])
    mode = c1.radio("Colouring", ["gradient flow", "plain"], horizontal=True, key="graph_mode")
    fold = c2.checkbox("Fold repeated launches", value=len(bundle.launches) > FOLD_OVER, key="graph_fold",
                       help=f"on by default past {FOLD_OVER} launches")
    search = c3.text_input("Search kernels and arrays", key="graph_search", placeholder="e.g. spring or loss")
    paths = graph_data.scope_paths(bundle)
    collapsed = []
    if paths:
        shown = {" / ".join(p): p for p in paths}
        picked = st.multiselect("Collapse scopes (each drawn as one node)", list(shown), key="graph_collapse")
        collapsed = [shown[p] for p in picked]
    dot = graph_data.graph_dot(bundle, gradients=mode == "gradient flow", collapsed=collapsed, search=search,
                               simplify=fold)
    found = graph_data.matches(bundle, search)
    if search.strip():
        kinds = [f['kind'] for f in found]
        steps = f", {kinds.count('step')} steps" if "step" in kinds else ""
        st.caption(plain(f"'{search.strip()}': {kinds.count('launch')} launches{steps} and {kinds.count('array')} "
                         "arrays match (outlined in orange; the view opens on the first)" if found else
                         f"nothing named like '{search.strip()}'"))
    st.markdown(LEGEND)
    try:
        svg = graph_component.render_svg(dot)
    except graph_component.NoRenderer as exc:
        if exc.kind == "cancelled":                    # the tab closed: nobody is left to show anything to
            return
        if exc.kind in ("too_large", "too_slow"):      # the browser's own layout would hang the tab as well
            st.warning(plain(f"Not drawn: {exc}."))
        else:
            st.caption(plain(f"Static graph ({exc}): zoom, pan and node facts need GraphViz's dot."))
            st.graphviz_chart(dot, width="stretch")
    else:
        focus = [f"l{f['index']}" if f["kind"] == "launch" else f"f{f['index']}" if f["kind"] == "step" else None
                 for f in found]
        focus += [f"a{k}" for k, a in graph_data.bundle_model(bundle, gradients=False).arrays.items()
                  if search.strip() and search.strip().lower() in a.label.lower()]
        st.iframe(graph_component.page(svg, graph_data.node_facts(bundle), [f for f in focus if f],
                                       home=graph_data.loss_node(bundle)),
                  height=graph_component.HEIGHT)
    if found:
        with st.expander(f"Search matches ({len(found)})"):
            table(found, key="graph_matches")
    cut = flow_data.cut_off_arrays(bundle)
    st.subheader("Arrays cut off from the gradient")
    if not cut:
        st.success("Every parameter has requires_grad=True, and no launch computes an array without it from "
                   "arrays with it.")
    constants = flow_data.constant_arrays(bundle)
    if constants:
        st.caption(plain("Constants and data (no gradient needed): " + ", ".join(constants[:20])
                         + (f" and {len(constants) - 20} more" if len(constants) > 20 else "")))
    for c in cut:
        facts = f"({c['dtype']}[{c['shape']}], used by {c['used by']}): {c['explanation']}"
        st.warning(f"**{plain(c['array'])}** {plain(facts)}")
    static_table([{k: v for k, v in c.items() if k not in ("id", "explanation")} for c in cut])
    st.download_button("Download DOT", dot, file_name=f"{name}-tape.dot", mime="text/vnd.graphviz")
