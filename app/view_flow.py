"""Gradient flow view: per-array gradient norms (log scale) with zero / vanishing / exploding / cut-off
arrays flagged, the histogram of one gradient, and the loss history."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from ..viz import flow_states as flow
from . import data, flow_data
from .ui import plain, table

FLAG_COLORS = flow.COLORS


def render(bundle, name: str) -> None:
    c1, c2 = st.columns(2)
    vanishing = c1.number_input("vanishing below |grad| <", value=flow_data.VANISHING, format="%.1e",
                                min_value=0.0, key="flow_vanishing")
    exploding = c2.number_input("exploding above |grad| >", value=flow_data.EXPLODING, format="%.1e",
                                min_value=0.0, key="flow_exploding")
    rows = flow_data.gradient_flow(bundle, vanishing=vanishing, exploding=exploding)
    if not rows:
        st.warning("This bundle holds no arrays.")
        return
    _norm_chart(rows)
    for h in flow_data.hazards(bundle):
        st.warning(f"Hazard ({plain(h['kind'])}): {plain(h['message'])}.")
    flagged = [r for r in rows if r["flag"] not in (flow.OK, flow.CONSUMED, flow.NOT_DIFFERENTIABLE, flow.UNUSED,
                                                     flow.NOT_REACHED, flow.PARTIAL)]
    unreached = [r["array"] for r in rows if r["flag"] == flow.NOT_REACHED]
    if unreached:                                     # one line, not one box per array
        shown = ", ".join(unreached[:8]) + (f" and {len(unreached) - 8} more" if len(unreached) > 8 else "")
        st.info(plain(f"{len(unreached)} arrays not reached (backward stopped before the launches using them): "
                      f"{shown}."))
    for r in flagged:
        text = f"**{plain(r['array'])}** — {r['flag']}: {flow_data.flow_explanation(r['flag'])}"
        if r["hazard"]:
            text += f" Why: {plain(r['hazard'])}"
        (st.error if r["flag"] in flow.ALARMS else st.warning)(text)
    params = [r for r in rows if r["role"] == "parameter"]
    st.markdown(f"**Parameters** ({len(params)}: declared with gk.Tape(params=...) or an optimiser, else the "
                "arrays with requires_grad that no launch writes)")
    table([{k: v for k, v in r.items() if k not in ("id", "role")} for r in params], key="flow_table")
    for role, title in (("intermediate", "Intermediates (written by launches)"), ("constant", "Constants and data")):
        group = [r for r in rows if r["role"] == role]
        if group:
            with st.expander(f"{title}: {len(group)}"):
                table([{k: v for k, v in r.items() if k not in ("id", "role")} for r in group],
                      key=f"flow_table_{role}")
    _histogram(bundle, rows)
    _history(bundle)


def _history(bundle) -> None:
    """Loss and per-array gradient norms over the captured run's iterations (log scales, titled axes)."""
    h = flow_data.history(bundle)
    if h is None:
        return
    st.subheader("History over iterations")
    st.caption(f"{len(h['loss'])} backward passes of the captured run (every pass of `gradkit debug`).")
    if any(v is not None for v in h["loss"]["loss"]):
        if len(h["loss"]) < 2:
            st.metric("loss (one iteration)", data.fmt(h["loss"]["loss"].iloc[0]))
        else:
            st.altair_chart(alt.Chart(h["loss"]).mark_line(point=True).encode(
                x=alt.X("iteration:Q", title="iteration (backward pass)", axis=alt.Axis(format="d", tickMinStep=1)),
                y=alt.Y("loss:Q", scale=alt.Scale(type="log"), title="loss (log scale)"),
                tooltip=["iteration:Q", "loss:Q"]), width="stretch")
    if len(h["norms"]):
        st.altair_chart(alt.Chart(h["norms"]).mark_line().encode(
            x=alt.X("iteration:Q", title="iteration (backward pass)", axis=alt.Axis(format="d", tickMinStep=1)),
            y=alt.Y("norm:Q", scale=alt.Scale(type="log"), title="‖grad‖ (log scale)"),
            color=alt.Color("array:N"), tooltip=["array:N", "iteration:Q", "norm:Q"]), width="stretch")
    if len(h["quantiles"]):
        pick = st.selectbox("Distribution over iterations of", sorted(h["quantiles"]["array"].unique()),
                            key="flow_history_array")
        q = h["quantiles"][h["quantiles"]["array"] == pick]
        band = alt.Chart(q).encode(x=alt.X("iteration:Q", title="iteration (backward pass)", axis=alt.Axis(format="d", tickMinStep=1)))
        st.altair_chart(band.mark_area(opacity=0.25).encode(y=alt.Y("min:Q", title=f"{pick}.grad"), y2="max:Q")
                        + band.mark_area(opacity=0.45).encode(y="p25:Q", y2="p75:Q")
                        + band.mark_line().encode(y="median:Q"), width="stretch")
        st.caption("Shaded: min-max and the 25-75 % band of the gradient's entries; line: the median.")


def _norm_chart(rows: list[dict]) -> None:
    st.subheader("Gradient norms")
    positive = [r["grad norm"] for r in rows if r["grad norm"]]
    floor = min(positive) / 10 if positive else 1e-12
    points = pd.DataFrame([{"array": r["array"], "norm": r["grad norm"] if r["grad norm"] else floor,
                            "base": floor / 10, "grad norm": data.fmt(r["grad norm"]), "flag": r["flag"]}
                           for r in rows])
    present = [f for f in FLAG_COLORS if any(r["flag"] == f for r in rows)]
    chart = alt.Chart(points).mark_bar().encode(
        x=alt.X("array:N", sort=None, title="array"),
        y=alt.Y("norm:Q", scale=alt.Scale(type="log"), title="‖grad‖ (log scale)"), y2="base:Q",
        color=alt.Color("flag:N", scale=alt.Scale(domain=present, range=[FLAG_COLORS[f] for f in present])),
        tooltip=["array:N", "grad norm:N", "flag:N"])
    st.altair_chart(chart, width="stretch")
    st.caption("Arrays without a gradient (or with a zero one) are drawn at a floor bar; hover for values.")


def _histogram(bundle, rows: list[dict]) -> None:
    st.subheader("Gradient histogram")
    choices = {r["array"]: r["id"] for r in rows if bundle.grad(r["id"]) is not None}
    if not choices:
        st.caption("No gradients stored in this bundle.")
        return
    pick = st.selectbox("Gradient of", list(choices), key="flow_hist_array")
    bins = st.slider("bins", 5, 100, 30, key="flow_hist_bins")
    hist = flow_data.gradient_histogram(bundle, choices[pick], bins=bins)
    if hist["nonfinite"]:
        st.error(f"{hist['nonfinite']} non-finite entries (not plotted)")
    if not hist["counts"]:
        return
    values = pd.DataFrame({"left": hist["left"], "right": hist["right"], "count": hist["counts"]})
    chart = alt.Chart(values).mark_bar().encode(
        x=alt.X("left:Q", bin="binned", title=f"{pick}.grad"), x2="right:Q", y=alt.Y("count:Q"),
        tooltip=["left:Q", "right:Q", "count:Q"])
    st.altair_chart(chart, width="stretch")
