"""Check view: gradcheck (reverse mode against central differences) on one recorded forward launch,
re-run from the bundle's "before" snapshots with the kernel compiled from the source stored in the bundle,
only after the user read that source (shown with its SHA-256) and ticked "I have read this source;
compile it".
Nothing from the bundle is imported or executed."""

from __future__ import annotations

import streamlit as st

from . import checks, data
from .ui import plain, table

RESULTS = "check_results"


def render(bundle, name: str) -> None:
    rows = [r for r in data.launch_rows(bundle) if r["pass"] == "forward"]
    if not rows:
        st.warning("This bundle recorded no launches.")
        return
    titles = [data.row_title(r) for r in rows]
    title = st.selectbox("Forward launch", titles, key="check_launch")
    row = rows[titles.index(title)]
    missing = checks.missing_snapshots(bundle, row["index"])
    if missing:
        st.warning(plain(missing))
        return
    c1, c2, c3 = st.columns(3)
    eps = c1.number_input("eps", value=1e-3, format="%.1e", min_value=0.0, key="check_eps")
    atol = c2.number_input("atol", value=1e-3, format="%.1e", min_value=0.0, key="check_atol")
    rtol = c3.number_input("rtol", value=1e-2, format="%.1e", min_value=0.0, key="check_rtol")
    stored = checks.stored_source(bundle, row["kernel"])
    st.caption("Arrays are rebuilt from the launch's 'before' snapshots and the kernel is compiled from the "
               "source stored in the bundle (parsed, never run; no file is imported). A launch passes when "
               "|analytic - numeric| <= atol + rtol·|numeric| for every Jacobian entry.")
    if not stored["source"]:
        st.warning(plain(f"The bundle does not hold the source of '{row['kernel']}': gradcheck cannot "
                         "compile it."))
        return
    where = f" · {stored['file']}:{stored['first_line']}" if stored["file"] else ""
    st.markdown(f"**Source of {plain(row['kernel'])} stored in the bundle**{plain(where)}")
    st.code(stored["source"], language="python", line_numbers=True)
    st.caption(plain(f"SHA-256 {stored['sha256']}"))
    approved = st.checkbox("I have read this source; compile it", key=f"check_trust_{stored['sha256']}")
    key = (name, row["index"], eps, atol, rtol, stored["sha256"])
    results = st.session_state.setdefault(RESULTS, {})
    if st.button("Run gradcheck", key="check_run", disabled=not approved):
        with st.spinner("compiling the stored source and computing Jacobians..."):
            try:
                results[key] = checks.run_gradcheck(bundle, row["index"], approved=stored["sha256"],
                                                    eps=eps, atol=atol, rtol=rtol)
            except checks.CheckError as exc:
                results[key] = exc
    result = results.get(key)
    if result is None:
        return
    if isinstance(result, checks.CheckError):
        st.error(plain(data.redact(bundle, str(result))))
        return
    level, sentence = checks.verdict(result, row["kernel"])
    getattr(st, level)(plain(sentence))                      # the verdict first, the evidence below
    _show(result, row["kernel"])
    wide = result.float64
    if wide is None:
        return
    st.markdown("**Re-run in float64** (the kernel widened: every float32 type made float64, "
                f"eps {wide.eps:.0e})")
    _show(wide, row["kernel"], key="f64")


def _show(result, kernel: str, key: str = "") -> None:
    """One check's verdict, its notes, the per-block table and the worst entries with their FD noise."""
    for note in result.notes:
        st.info(plain(note))
    where = f"on {result.device}" + (" in float64" if result.precision == "float64" else "")
    if result.ok:
        st.markdown(plain(f"gradcheck passed for '{kernel}' {where}."))
    else:
        noise = (f"; {result.within_noise} of {result.failing} failing entries are within twice their "
                 "finite-difference noise estimate" if result.failing else "")
        st.markdown(plain(f"gradcheck {where}: {result.failing} entries outside the tolerance, the worst "
                          f"below{noise}."))
    st.markdown("**Jacobian blocks (output × input)**")
    table(result.pairs, key=f"check_pairs{key}")
    if result.worst:
        st.markdown("**Worst failing entries** (FD noise: |J(eps) − J(eps/2)| + machine-eps·|y|/eps, an "
                    "estimate of the central difference's own error)")
        table(result.worst, key=f"check_worst{key}")
