"""Two bundles side by side (before and after a fix, TensorBoard's run comparison): their status, the
gradient-flow state and norm of each array matched by label, the launches and time per kernel, and both
loss histories. No Streamlit here."""

from __future__ import annotations

import math

from ..viz import flow_states as flow
from ..viz.bundle import Bundle
from . import data, flow_data, nan_data, overview_data


def status_rows(a: Bundle, b: Bundle) -> list[dict]:
    """One row per fact: what, A, B, and whether it changed."""
    def facts(bundle: Bundle) -> dict:
        s, st = data.summary(bundle), overview_data.bundle_status(bundle)
        origin = nan_data.nan_origin(bundle)
        d = nan_data.op_diagnosis(origin) if origin else None
        losses = s["loss_history"]
        rows = flow_data.gradient_flow(bundle)
        return {"status": st["status"], "launches": s["launches"], "backward launches": s["backward launches"],
                "NaN/Inf origin": (f"{d['op']} at {d['where']}" if d else
                                   f"{origin.get('kernel')} wrote {origin.get('array')}") if origin else "none",
                "cut off arrays": ", ".join(c["array"] for c in flow_data.cut_off_arrays(bundle)) or "none",
                "gradient-flow alarms": sum(r["flag"] in flow.ALARMS for r in rows),
                "iterations (losses recorded)": len(losses),
                "final loss": data.fmt(float(losses[-1])) if losses else "—",
                "forward time (ms)": f"{s['total ms']:.3f}"}
    fa, fb = facts(a), facts(b)
    return [{"what": k, "A": str(fa[k]), "B": str(fb[k]),
             "changed": _times_differ(fa[k], fb[k]) if k in TIMED else str(fa[k]) != str(fb[k])} for k in fa]


TIMED = ("forward time (ms)",)      # timings differ run to run: a change only past a factor TIME_FACTOR
TIME_FACTOR = 2.0


def _times_differ(a: str, b: str) -> bool:
    x, y = float(a), float(b)
    return max(x, y) > TIME_FACTOR * max(min(x, y), 1e-3)


def flow_rows(a: Bundle, b: Bundle) -> list[dict]:
    """Each array label of either bundle with its flow state and gradient norm in A and B (the k-th array of
    a label in A matched with the k-th in B), changes first."""
    def by_label(bundle: Bundle) -> dict:
        out, seen = {}, {}
        for r in flow_data.gradient_flow(bundle):
            n = seen[r["array"]] = seen.get(r["array"], 0) + 1
            out[r["array"] if n == 1 else f"{r['array']} #{n}"] = r
        return out
    ra, rb = by_label(a), by_label(b)
    rows = []
    for label in list(ra) + [k for k in rb if k not in ra]:
        x, y = ra.get(label), rb.get(label)
        na, nb = (x or {}).get("grad norm"), (y or {}).get("grad norm")
        rows.append({"array": label, "state A": x["flag"] if x else "absent", "norm A": na,
                     "state B": y["flag"] if y else "absent", "norm B": nb,
                     "norm ratio B/A": _ratio(na, nb),
                     "changed": (x or {}).get("flag") != (y or {}).get("flag")})
    rows.sort(key=lambda r: not r["changed"])
    return rows


def kernel_rows(a: Bundle, b: Bundle) -> list[dict]:
    """Per kernel: launches and total forward milliseconds in A and B."""
    def per_kernel(bundle: Bundle) -> dict:
        out: dict = {}
        for la in bundle.launches:
            n, ms = out.get(la["kernel"], (0, 0.0))
            out[la["kernel"]] = (n + 1, ms + float(la.get("ms") or 0.0))
        return out
    ka, kb = per_kernel(a), per_kernel(b)
    return [{"kernel": k, "launches A": ka.get(k, (0, 0.0))[0], "launches B": kb.get(k, (0, 0.0))[0],
             "ms A": ka.get(k, (0, 0.0))[1], "ms B": kb.get(k, (0, 0.0))[1]}
            for k in list(ka) + [k for k in kb if k not in ka]]


def losses(a: Bundle, b: Bundle, name_a: str, name_b: str):
    """Both loss histories as one long table (run, iteration, loss) for a chart; None when neither has one."""
    import pandas as pd
    rows = [{"run": name, "iteration": k, "loss": float(v)}
            for name, bundle in ((name_a, a), (name_b, b))
            for k, v in enumerate(bundle.manifest.get("loss_history") or [])]
    return pd.DataFrame(rows) if rows else None


def _ratio(na, nb):
    if na is None or nb is None or math.isnan(na) or math.isnan(nb) or na == 0:
        return None
    return nb / na
