"""NaN/Inf origin view: the first launch (forward or backward) that wrote a non-finite value, the array and
element, the kernel source with the line that wrote it highlighted, and the arguments at that element."""

from __future__ import annotations

import streamlit as st

from . import data, nan_data
from .ui import plain, plain_html, static_table

LINE_STYLE = "display:block;white-space:pre;font-family:monospace"
HIT_STYLE = LINE_STYLE + ";background:#ffd6d6;border-left:4px solid #d62728;font-weight:bold"


def source_html(excerpt: dict) -> str:
    """Numbered source lines in a <pre>, the hit line marked with class gk-nan-line."""
    out = []
    for number, text, hit in excerpt["lines"]:
        line = f"{number:>5} │ {plain_html(text)}"
        out.append(f'<span class="gk-nan-line" style="{HIT_STYLE}">{line}</span>' if hit
                   else f'<span style="{LINE_STYLE}">{line}</span>')
    return ('<pre class="gk-source" style="font-size:0.85em;line-height:1.35;padding:0.5em;'
            'background:#f7f7f9;border-radius:4px;overflow-x:auto">' + "".join(out) + "</pre>")


def _code(text: str) -> str:
    """`text` as plain HTML, its `backticked` spans as <code> (the spans' text plain too)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:                 # an unpaired backtick: no code spans
        return plain_html(text)
    return "".join(f"<code>{plain_html(p)}</code>" if k % 2 else plain_html(p) for k, p in enumerate(parts))


def _diagnosis(d: dict) -> None:
    """The op that made the first NaN/Inf, its line, the launch's call site and the iteration, up top."""
    st.markdown(f'<div class="gk-nan-op" style="font-size:1.25em;padding:0.4em 0.6em;border-left:5px solid '
                f'#d62728;background:#fff0f0">First non-finite value made by {_code(d["headline"])}</div>',
                unsafe_allow_html=True)
    facts = [("operation", d["op"] or "?"), ("line", d["where"]), ("gk.launch call site", d["call site"] or "?"),
             ("iteration (tape)", "?" if d["iteration"] is None else str(d["iteration"]))]
    cells = "".join(f'<div class="gk-nan-fact"><div style="color:#666;font-size:0.8em">{plain_html(k)}</div>'
                    f'<div style="font-size:1.3em;overflow-wrap:anywhere">{plain_html(v)}</div></div>'
                    for k, v in facts)
    st.markdown(f'<div style="display:grid;grid-template-columns:repeat(4,1fr);gap:0.8em;margin:0.6em 0">'
                f'{cells}</div>', unsafe_allow_html=True)
    facts = [f"thread {d['thread']}"]
    if d["loops"]:
        facts.append(d["loops"])
    if d["backward call"]:
        facts.append(f"backward() called at {d['backward call']}")
    st.caption(plain(" · ".join(facts) + (f" — {d['code']}" if d["code"] else "")))
    if d["operands"]:
        static_table(d["operands"])


def render(bundle, name: str) -> None:
    origin = nan_data.nan_origin(bundle)
    if origin is None:
        st.success("No NaN or Inf was recorded: no launch, forward or backward, wrote a non-finite value "
                   "(with `gradkit debug` every launch is checked).")
        return
    diagnosis = nan_data.op_diagnosis(origin)
    if diagnosis is not None:
        _diagnosis(diagnosis)
        hint = nan_data.fix_hint(diagnosis["op"])
        if hint:
            st.info(plain(f"Fix: {hint}."))
    step = nan_data.time_step(bundle, origin.get("launch"))
    if step:
        st.markdown(f"**When:** {plain(step)}.")
    st.error(plain(origin.get("message") or "a launch wrote a non-finite value"))
    cols = st.columns(5)
    cols[0].metric("pass", plain(origin.get("direction") or "?"))
    cols[1].metric("kernel", plain(origin.get("kernel") or "?"))
    cols[2].metric("array", plain(origin.get("array") or "?"))
    index = origin.get("index")
    cols[3].metric("element", plain(index if index is None or len(index) > 1 else index[0]))
    cols[4].metric("value", plain(data.fmt(origin.get("value"))))
    launch = origin.get("launch")
    where = f"forward launch #{launch}" if launch is not None else "an unrecorded launch"
    if origin.get("backward") is not None:
        order = len(bundle.launches) + origin["backward"]
        where = f"backward launch #{order} (adjoint of forward launch #{launch})"
    if step:
        where += f", {step.split(' (')[0]}"
    how = "raised by the NaN check" if origin["source"] == "manifest" else "found in the snapshots"
    st.markdown(f"First non-finite value written by **{where}** ({how}).")
    st.subheader("Source")
    line = (origin.get("origin") or {}).get("line") or origin.get("line")    # the op's line, else the write's
    excerpt = nan_data.source_excerpt(bundle, origin.get("kernel"), line, origin.get("file"))
    if excerpt["lines"]:
        st.caption(plain(f"{excerpt['file']}:{line or '?'}"))
        st.markdown(source_html(excerpt), unsafe_allow_html=True)
        if excerpt["hit"] is None:
            st.caption("(the writing line is unknown: the whole kernel is shown)")
    else:
        st.caption("The kernel's source is not in the bundle.")
    values = nan_data.values_at(bundle, origin)
    if values:
        st.subheader(f"Arguments at element {index}")
        st.caption("Each array argument of the launch at the offending element, before and after it.")
        keep = [k for k in values[0] if any(v[k] is not None for v in values)]
        static_table([{k: v[k] for k in keep} for v in values])
