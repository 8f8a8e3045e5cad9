"""The debugger's gradient-flow data: each array's gradient norm and flow state, the arrays cut off from
the gradient, gradient histograms and their history over iterations (the Flow and Graph views)."""

from __future__ import annotations

import math

import numpy as np

from ..viz import flow_states as flow
from ..viz.bundle import Bundle
from . import data

VANISHING = 1e-8     # default |grad| below which a gradient counts as vanishing
EXPLODING = 1e6      # default |grad| above which a gradient counts as exploding


# Cut off -------------------------------------------------------------------------------------------------
def role(a: dict) -> str:
    """An array's role (viz/bundle.py): parameter, intermediate or constant; bundles from before roles
    were recorded: a parameter when it has requires_grad, else a constant."""
    return a.get("role") or ("parameter" if a["requires_grad"] else "constant")


def events(bundle: Bundle) -> list[dict]:
    """The launches and Python steps (a solve, record_func) in tape order, each as {"kind": "launch" | "step",
    "index", "name", "reads", "writes", "uses"} (array ids), so every analysis here sees a solve's data flow as
    it sees a launch's. A launch reads what its kernel reads (older bundles: every argument) and writes what
    it writes (older bundles: its outputs)."""
    items = []
    for la in bundle.launches:
        ids = la["arrays"]
        written = written_params(la)
        read = la["read"] if "read" in la else range(len(ids))
        items.append({"kind": "launch", "index": la["index"], "name": la["kernel"], "position": la["index"],
                      "reads": {ids[j] for j in read if ids[j] is not None},
                      "writes": {ids[j] for j in written if ids[j] is not None},
                      "uses": {a for a in ids if a is not None}})
    for st in bundle.steps:
        items.append({"kind": "step", "index": st["index"], "name": st["name"], "position": st["position"] - 0.5,
                      "reads": set(st["reads"]), "writes": set(st["writes"]),
                      "uses": set(st["reads"]) | set(st["writes"])})
    return sorted(items, key=lambda e: e["position"])       # stable: steps of one position keep their order


def _breaks_a_chain(bundle: Bundle, aid: str) -> bool:
    """A launch or a step computes `aid` from an array with requires_grad and a later one reads it: without
    requires_grad there, the gradient from what reads it stops at it (an output nothing reads is no loss)."""
    needs = {a["id"] for a in bundle.manifest["arrays"] if a["requires_grad"]}
    computed = False
    for ev in events(bundle):
        if computed and aid in ev["reads"]:
            return True
        if aid in ev["writes"] and any(x in needs for x in ev["uses"] if x != aid):
            computed = True
    return False


def constant_arrays(bundle: Bundle) -> list[str]:
    """Float arrays that no launch writes and nothing trains: data and constants, listed, never alarmed."""
    return [a["label"] for a in bundle.manifest["arrays"] if role(a) == "constant" and not a["requires_grad"]
            and a["dtype"].startswith(("float", "vec", "mat")) and not _breaks_a_chain(bundle, a["id"])]


def cut_off_arrays(bundle: Bundle) -> list[dict]:
    """Float arrays lacking requires_grad where that loses a gradient: a parameter (declared, or trained by
    an optimiser), or an array a launch computes from arrays with requires_grad (the gradient stops there).
    Data and constants are not listed here (`constant_arrays`)."""
    written = set()
    for la in bundle.launches:
        n_in = la.get("n_inputs", len(la["params"]))
        written.update(a for a in la["arrays"][n_in:] if a is not None)
    written.update(a for st in bundle.steps for a in st["writes"])
    out = []
    for a in bundle.manifest["arrays"]:
        if a["requires_grad"] or not a["dtype"].startswith(("float", "vec", "mat")):
            continue
        if role(a) != "parameter" and not _breaks_a_chain(bundle, a["id"]):
            continue
        users = sorted({ev["name"] for ev in events(bundle) if a["id"] in ev["uses"]})
        why = (f"'{a['label']}' has requires_grad=False, so backward() computes no gradient for it"
               + (" and none flows back through it to the launch that wrote it" if a["id"] in written else "")
               + ". Fine for data and constants; a bug when it is a parameter you train "
               "(create it with requires_grad=True).")
        out.append({"array": a["label"], "id": a["id"], "shape": "x".join(map(str, a["shape"])),
                    "dtype": a["dtype"], "used by": ", ".join(users),
                    "written by a launch": a["id"] in written, "explanation": why})     # or by a step
    return out


# Gradient flow -----------------------------------------------------------------------------------------
def gradient_flow(bundle: Bundle, vanishing: float = VANISHING, exploding: float = EXPLODING) -> list[dict]:
    """One row per array: the norm of the gradient that reached it and its state (viz/flow_states.py: ok,
    consumed, zero, vanishing, exploding, NaN/Inf, not reached, cut off, not differentiable, no backward).

    An intermediate's gradient is cleared by the adjoint of the launch that wrote it, so its norm is the one
    its snapshots saw arrive (before that adjoint); a NaN anywhere makes the norm NaN."""
    norms = bundle.manifest.get("grad_norms") or {}
    ran_backward = bool(bundle.backward) or bool(bundle.manifest.get("loss_history")) or any(
        v for v in norms.values() if not math.isnan(v))
    arrived = _arrived(bundle)
    unreached = _unreached(bundle)
    partial = data.partial_backward(bundle) is not None
    written = _written_arrays(bundle)
    unused = _unused_outputs(bundle)
    explained = _explained(bundle)
    rows = []
    for a in bundle.manifest["arrays"]:
        aid = a["id"]
        grad = bundle.grad(aid)
        floating = grad is not None and grad.dtype.kind == "f"
        nonfinite = int(np.count_nonzero(~np.isfinite(grad))) if floating else 0
        norm = norms.get(aid)
        if norm is None and grad is not None:
            norm = _norm(grad)
        consumed = aid in written
        if consumed and aid in arrived:
            norm, bad = arrived[aid]
            nonfinite = max(nonfinite, bad)
        elif consumed and not nonfinite and norm == 0.0:
            norm = None                          # cleared and no snapshot of what arrived: just "consumed"
        if nonfinite:
            norm = math.nan
        flag = flow.classify(differentiable=flow.differentiable_dtype(a["dtype"]), requires_grad=a["requires_grad"],
                             ran_backward=ran_backward, reached=aid not in unreached, consumed=consumed,
                             norm=norm, nonfinite=nonfinite, vanishing=vanishing, exploding=exploding,
                             unused=aid in unused, partial=partial)
        if flag == flow.VANISHING and _converging(bundle, a["label"], vanishing):
            flag = flow.CONVERGING
        rows.append({"array": a["label"], "id": aid, "role": role(a), "parameter": a.get("param", ""),
                     "shape": "x".join(map(str, a["shape"])),
                     "requires_grad": a["requires_grad"], "grad norm": norm, "non-finite": nonfinite,
                     "flag": flag, "hazard": " ".join(explained.get(aid, []))})
    order = {"parameter": 0, "intermediate": 1, "constant": 2}
    return sorted(rows, key=lambda r: order[r["role"]])      # parameters first (stable within a role)


def _converging(bundle: Bundle, name: str, vanishing: float) -> bool:
    """Whether the run's history shows array `name`'s gradient above `vanishing` at an earlier pass, with a
    higher loss than the last pass's where both losses are recorded (a torch-driven run records none): a
    gradient that shrank as training converged, not one that vanished."""
    h = bundle.manifest.get("history") or {}
    norms = (h.get("norms") or {}).get(name) or []
    losses = list(h.get("loss") or [])
    losses += [None] * (len(norms) - len(losses))
    if len(norms) < 2:
        return False
    last = losses[len(norms) - 1]
    return any(_finite(n) and n >= vanishing and (not (_finite(loss) and _finite(last)) or loss > last)
               for n, loss in zip(norms[:-1], losses))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def hazards(bundle: Bundle) -> list[dict]:
    """The hazards the tape's analysis found (runtime/tape/hazards.py): steps whose gradient is zero by
    construction, each with its kind, message, the arrays it explains and the source lines."""
    return list(bundle.manifest.get("hazards") or [])


def _explained(bundle: Bundle) -> dict:
    """{array id: [hazard messages that explain its gradient]}."""
    out: dict = {}
    for h in hazards(bundle):
        for aid in h["arrays"]:
            out.setdefault(aid, []).append(f"{h['kind']}: {h['message']}.")
    return out


def _norm(grad) -> float:
    """L2 norm of a gradient; NaN when any entry is not finite (a NaN gradient has no finite norm)."""
    g = np.asarray(grad, dtype=np.float64).reshape(-1)
    return float(np.sqrt(np.dot(g, g))) if np.isfinite(g).all() else math.nan


def written_params(la: dict) -> list[int]:
    """The parameter indices a launch's kernel writes (recorded in the bundle; older bundles: its outputs)."""
    if "written" in la:
        return la["written"]
    return list(range(la.get("n_inputs", len(la["params"])), len(la["params"])))


def _written_arrays(bundle: Bundle) -> set:
    """Arrays a recorded launch or a Python step on the tape (a solve, a host copy) wrote."""
    written = {a["id"] for a in bundle.manifest["arrays"] if a.get("step_written")}
    for la in bundle.launches:
        written.update(la["arrays"][j] for j in written_params(la) if la["arrays"][j] is not None)
    return written


def _unused_outputs(bundle: Bundle) -> set:
    """Arrays a launch or a step wrote that no later launch or step reads (a launch: passes as a parameter it
    does not only write; a solve reads its right-hand side and matrix)."""
    last_write, read_after = set(), set()
    for la, ev in _with_launches(bundle):
        if la is not None and "read" not in la:      # older bundles: an argument the kernel does not only write
            w = set(written_params(la))
            reads = {la["arrays"][j] for j in set(range(len(la["arrays"]))) - w} - {None}
        else:
            reads = ev["reads"]
        read_after.update(a for a in reads if a in last_write)
        last_write.update(ev["writes"])
    return last_write - read_after


def _with_launches(bundle: Bundle) -> list:
    """(launch manifest entry or None for a step, event) in tape order."""
    return [(bundle.launches[ev["index"]] if ev["kind"] == "launch" else None, ev) for ev in events(bundle)]


def _arrived(bundle: Bundle) -> dict:
    """{array id: (norm, non-finite entries)} of the gradient that reached each array a launch wrote, read from
    the snapshots taken before the adjoint of its last writer (the first to consume it in backward order)."""
    out = {}
    for b in bundle.backward:                      # backward order: the last writer's adjoint comes first
        fwd = bundle.launches[b["record"]]
        before = (b.get("stats") or {}).get("before") or {}
        for j in written_params(fwd):
            p, aid = fwd["params"][j], fwd["arrays"][j]
            if aid is None or aid in out or p not in before:
                continue
            st = before[p]
            bad = int(st.get("nonfinite") or 0)
            norm = st.get("norm", 0.0 if st.get("size") else None)
            out[aid] = (math.nan if bad else norm, bad)
    return out


def _unreached(bundle: Bundle) -> set:
    """Arrays used only by launches whose adjoint never ran because backward stopped (a NaN in backward)."""
    nan = bundle.nan or {}
    if nan.get("direction") != "backward" or not bundle.backward:
        return set()
    ran = {b["record"] for b in bundle.backward}
    reached, used = set(), set()
    for la in bundle.launches:
        ids = {a for a in la["arrays"] if a is not None}
        used |= ids
        if la["index"] in ran:
            reached |= ids
    return used - reached


def history(bundle: Bundle) -> dict | None:
    """The captured run's history as tables: {"loss": DataFrame(iteration, loss), "norms": DataFrame(array,
    iteration, norm), "quantiles": DataFrame(array, iteration, min, p25, median, p75, max)}; older bundles
    give the loss history alone; None without any."""
    import pandas as pd
    h = bundle.manifest.get("history")
    if h is None:
        losses = bundle.manifest.get("loss_history") or []
        if not losses:
            return None
        h = {"iterations": list(range(len(losses))), "loss": losses, "norms": {}, "quantiles": {}}
    its = h["iterations"]
    loss = pd.DataFrame({"iteration": its, "loss": h["loss"]})
    norms = pd.DataFrame([{"array": lb, "iteration": k, "norm": v} for lb, vals in h["norms"].items()
                          for k, v in zip(its, vals) if v is not None and v > 0],
                         columns=["array", "iteration", "norm"])
    quantiles = pd.DataFrame([{"array": lb, "iteration": k, **dict(zip(("min", "p25", "median", "p75", "max"), v))}
                              for lb, vals in h["quantiles"].items() for k, v in zip(its, vals) if v],
                             columns=["array", "iteration", "min", "p25", "median", "p75", "max"])
    return {"loss": loss, "norms": norms, "quantiles": quantiles}


def flow_explanation(flag: str) -> str:
    return flow.EXPLAIN.get(flag, "")


def gradient_histogram(bundle: Bundle, aid: str, bins: int = 30) -> dict | None:
    """Histogram of one array's finite gradient entries: {"counts", "left", "right", "nonfinite"}."""
    grad = bundle.grad(aid)
    if grad is None:
        return None
    g = np.asarray(grad, dtype=np.float64).reshape(-1)
    finite = g[np.isfinite(g)]
    if finite.size == 0:
        return {"counts": [], "left": [], "right": [], "nonfinite": int(g.size)}
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(finite, bins=bins, range=(lo, hi))
    return {"counts": counts.tolist(), "left": edges[:-1].tolist(), "right": edges[1:].tolist(),
            "nonfinite": int(g.size - finite.size)}
