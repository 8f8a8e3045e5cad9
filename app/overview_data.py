"""The landing view's data: one status line per bundle, its problems first, each linking to the view that
shows it."""

from __future__ import annotations

from ..viz import flow_states as flow
from ..viz.bundle import Bundle
from .data import launch_rows, partial_backward, row_title
from .flow_data import cut_off_arrays, gradient_flow
from .nan_data import nan_launch_row, nan_origin, op_diagnosis


def bundle_status(bundle: Bundle) -> dict:
    """The landing view's line for one bundle: {"status": "NaN/Inf" | "alarms" | "cut off" | "ok", "rank"
    (problems sort first), "launches", "problems": [{"text", "view", "launch"?}]}."""
    problems, status, rank = [], "ok", 3
    origin = nan_origin(bundle)
    if origin is not None:
        d = op_diagnosis(origin)
        what = (f"{d['op']} at {d['where']}, iteration {d['iteration']}" if d else
                f"{origin.get('kernel')} wrote {origin.get('array')}")
        row = nan_launch_row(bundle, origin)
        problems.append({"text": f"NaN/Inf: {what}", "view": "nan"})
        if row is not None:
            problems.append({"text": f"the launch: {row_title(launch_rows(bundle)[row])}", "view": "launches",
                             "launch": row})
        status, rank = "NaN/Inf", 0
    if partial_backward(bundle):
        problems.append({"text": f"partial backward: {len(bundle.backward)} of {len(bundle.launches)} adjoint "
                                 "launches ran before it stopped", "view": "flow"})
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
