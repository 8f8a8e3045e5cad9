"""Compare view: the open bundle (A) beside another of the folder (B), e.g. before and after a fix: what
changed in status, which arrays changed gradient-flow state and by how much their gradient norms moved,
launches and time per kernel, and both loss curves on one log axis."""

from __future__ import annotations

import altair as alt
import streamlit as st

from ..viz.bundle import BundleError
from . import compare_data, query
from .ui import plain, table


def render(bundle, name: str, others: dict) -> None:
    """`others`: bundle name -> a function loading it (a loaded Bundle, or the message it failed with)."""
    names = [n for n in others if n != name]
    if not names:
        st.info("Open a folder holding two or more bundles to compare them "
                "(e.g. `gradkit open runs/` with the bundles of a script before and after a fix).")
        return
    if "compare_other" not in st.session_state:
        try:
            wanted = query.choice("other", st.query_params.get("other"), names, "other bundle of this folder")
        except BundleError as exc:
            st.warning(plain(f"{exc}: showing the default instead."))
            wanted = None
        if wanted is not None:
            st.session_state["compare_other"] = wanted
    other = st.selectbox("Compare with (B)", names, key="compare_other")
    st.query_params["other"] = other
    b = others[other]()
    if isinstance(b, str):
        st.error(plain(b))
        return
    st.caption(plain(f"A = {name} · B = {other}"))
    st.subheader("Status")
    rows = compare_data.status_rows(bundle, b)
    changed = [r["what"] for r in rows if r["changed"]]
    if changed:
        st.markdown("**Changed:** " + plain(", ".join(changed)))
    else:
        st.success("The two runs agree on every fact below.")
    table(rows, key="compare_status")
    st.subheader("Gradient flow by array (changes first)")
    table(compare_data.flow_rows(bundle, b), key="compare_flow")
    loss = compare_data.losses(bundle, b, f"A: {name}", f"B: {other}")
    if loss is not None:
        st.subheader("Loss")
        positive = bool((loss["loss"] > 0).all())
        st.altair_chart(alt.Chart(loss).mark_line(point=True).encode(
            x=alt.X("iteration:Q", title="iteration (backward pass)", axis=alt.Axis(format="d", tickMinStep=1)),
            y=alt.Y("loss:Q", scale=alt.Scale(type="log" if positive else "linear"),
                    title="loss (log scale)" if positive else "loss"),
            color=alt.Color("run:N", title="run"), tooltip=["run:N", "iteration:Q", "loss:Q"]), width="stretch")
    st.subheader("Launches and time per kernel")
    table(compare_data.kernel_rows(bundle, b), key="compare_kernels")
