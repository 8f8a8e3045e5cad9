"""The landing view's data: one status line per bundle, its problems first, each linking to the view that
shows it."""

from __future__ import annotations

from ..viz import flow_states as flow
from ..viz.bundle import Bundle
from .data import label, launch_rows, partial_backward, row_title
from .flow_data import cut_off_arrays, gradient_flow, hazards
from .nan_data import nan_launch_row, nan_origin, op_diagnosis, time_step


def bundle_status(bundle: Bundle) -> dict:
    """The landing view's line for one bundle: {"status": "NaN/Inf" | "alarms" | "cut off" | "ok", "rank"
    (problems sort first), "launches", "problems": [{"text", "view", "launch"?}]}."""
    problems, status, rank = [], "ok", 3
    origin = nan_origin(bundle)
    if origin is not None:
        d = op_diagnosis(origin)
        what = (f"{d['op']} at {d['where']}, iteration {d['iteration']}" if d else
                f"{origin.get('kernel')} wrote {origin.get('array')}")
        step = time_step(bundle, origin.get("launch"))
        if step:
            what += f", {step.split(' (', 1)[0]}"
        row = nan_launch_row(bundle, origin)
        problems.append({"text": f"NaN/Inf: {what}", "view": "nan"})
        if row is not None:
            problems.append({"text": f"the launch: {row_title(launch_rows(bundle)[row])}", "view": "launches",
                             "launch": row})
        status, rank = "NaN/Inf", 0
    if partial_backward(bundle):
        problems.append({"text": f"partial backward: {len(bundle.backward)} of {len(bundle.launches)} adjoint "
                                 "launches ran before it stopped", "view": "flow"})
    for h in hazards(bundle):
        problems.append({"text": hazard_line(bundle, h), "view": "flow"})
        if rank > 1:
            status, rank = "alarms", 1
    alarms = [r for r in gradient_flow(bundle) if r["flag"] in flow.ALARMS and r["flag"] != flow.NONFINITE]
    if alarms:
        names = ", ".join(f"{r['array']} ({r['flag']})" for r in alarms[:4]) + (" ..." if len(alarms) > 4 else "")
        problems.append({"text": f"gradient flow: {names}", "view": "flow"})
        if rank > 1:
            status, rank = "alarms", 1
    cut = cut_off_arrays(bundle)
    if cut:
        problems.append({"text": "cut off from the gradient: " + ", ".join(c["array"] for c in cut[:4])
                         + (" ..." if len(cut) > 4 else ""), "view": "graph"})
        if rank > 2:
            status, rank = "cut off", 2
    return {"status": status, "rank": rank, "problems": problems, "launches": len(bundle.launches)}


def hazard_line(bundle: Bundle, h: dict) -> str:
    """A hazard as one landing-page line: its kind, the array it is about and its lines, e.g.
    "overwritten before read: 'f' written at planted.py:13, overwritten at planted.py:22 (50 times)"."""
    if h["arrays"]:
        subject = label(bundle, h["arrays"][0])
    else:                                       # a declared parameter no launch reads: named in the message
        subject = h["message"].split("'")[1] if h["message"].count("'") >= 2 else "?"
    lines = list(h.get("lines") or [])
    if h["kind"] == "overwritten before read" and len(lines) == 2:
        where = f"written at {lines[0]}, overwritten at {lines[1]}"
    else:
        where = "at " + (", ".join(lines) or "no line recorded")
    times = h["message"].rsplit(" (", 1)[-1].rstrip(")") if h["message"].endswith(" times)") else ""
    return f"{h['kind']}: '{subject}' {where}" + (f" ({times})" if times else "")
