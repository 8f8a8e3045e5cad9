"""The debugger's data layer: tables, flags and source excerpts computed from a debug bundle.

No Streamlit here (the views only lay these out), so everything the app shows is unit-tested without a
browser. Rows are plain dicts (one per table row) and keep the manifest's numbers unformatted.
"""

from __future__ import annotations

import math
import os
import pathlib
import stat
import zipfile

import numpy as np

from ..viz import flow_states as flow
from ..viz.bundle import Bundle, BundleError, BundleLimits, load_bundle
from .paths import redact, shown_path

STAT_KEYS = ("min", "max", "mean", "norm", "nonfinite")
VANISHING = 1e-8     # default |grad| below which a gradient counts as vanishing
EXPLODING = 1e6      # default |grad| above which a gradient counts as exploding


# Finding and opening bundles ---------------------------------------------------------------------------
def is_bundle(path) -> bool:
    """A folder with a manifest.json entry (of any kind: `load_bundle` then says what is wrong with it) or a
    regular file that is a zip holding manifest.json. Looks with stat only: a FIFO is never opened."""
    path = pathlib.Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISDIR(mode):
        return os.path.lexists(path / "manifest.json")
    if not stat.S_ISREG(mode):
        return False
    try:
        with zipfile.ZipFile(path) as z:
            return "manifest.json" in z.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return False


def find_bundles(path) -> list[pathlib.Path]:
    """The bundle at `path`, or the bundles directly inside the folder `path` (sorted by name)."""
    path = pathlib.Path(path)
    if is_bundle(path):
        return [path]
    if not path.is_dir():
        raise BundleError(f"{path}: no such bundle or folder")
    return sorted(p for p in path.iterdir() if is_bundle(p))


def open_bundle(path, limits: BundleLimits | None = None) -> Bundle:
    """The validated bundle at `path` (BundleError naming the file or field otherwise)."""
    return load_bundle(path, limits)


# Arrays and launches -----------------------------------------------------------------------------------
def array_meta(bundle: Bundle) -> dict[str, dict]:
    """Array id -> manifest entry (id, label, shape, dtype, requires_grad, device)."""
    return {a["id"]: a for a in bundle.manifest["arrays"]}


def label(bundle: Bundle, aid: str | None) -> str:
    meta = array_meta(bundle).get(aid)
    return meta["label"] if meta else str(aid)


def _dim(dim) -> str:
    return "x".join(str(d) for d in dim)


def _new_nonfinite(stats: dict | None) -> dict[str, int]:
    """{param: non-finite entries gained between 'before' and 'after'} for one launch's stats."""
    if not stats:
        return {}
    out = {}
    for p, after in stats.get("after", {}).items():
        before = stats.get("before", {}).get(p, {})
        gained = after.get("nonfinite", 0) - before.get("nonfinite", 0)
        if gained > 0:
            out[p] = gained
    return out


def launch_rows(bundle: Bundle) -> list[dict]:
    """Every launch in execution order: the forward launches, then the adjoint launches of backward()."""
    rows = []
    for la in bundle.launches:
        gained = _new_nonfinite(la.get("stats"))
        rows.append({"order": len(rows), "pass": "forward", "index": la.get("index", len(rows)),
                     "kernel": la["kernel"], "dim": _dim(la["dim"]), "device": la["device"],
                     "ms": float(la.get("ms") or 0.0), "scope": "/".join(la.get("scope", [])),
                     "forward launch": la.get("index", len(rows)),
                     "new non-finite": ", ".join(f"{p} ({n})" for p, n in gained.items())})
    for b in bundle.backward:
        fwd = bundle.launches[b["record"]]
        gained = _new_nonfinite(b.get("stats"))
        rows.append({"order": len(rows), "pass": "backward", "index": b["index"], "kernel": b["kernel"],
                     "dim": _dim(fwd["dim"]), "device": fwd["device"], "ms": float(b.get("ms") or 0.0),
                     "scope": "/".join(fwd.get("scope", [])), "forward launch": b["record"],
                     "new non-finite": ", ".join(f"{p}.grad ({n})" for p, n in gained.items())})
    return rows


def row_title(row: dict) -> str:
    """A one-line name of a launch row, e.g. '#3 backward squared_error [16] (of forward #2)'."""
    title = f"#{row['order']} {row['pass']} {row['kernel']} [{row['dim']}]"
    if row["pass"] == "backward":
        title += f" (of forward #{row['forward launch']})"
    return title


def backward_of(bundle: Bundle, forward_index: int) -> list[dict]:
    """The backward records (adjoint launches) of forward launch `forward_index`."""
    return [b for b in bundle.backward if b["record"] == forward_index]


def _stats_row(param: str, role: str, what: str, when: str, stats: dict | None) -> dict:
    row = {"param": param, "role": role, "of": what, "when": when}
    for k in STAT_KEYS:
        row[k] = (stats or {}).get(k)
    return row


def launch_detail(bundle: Bundle, row: dict) -> dict:
    """What the launch detail panel shows for one `launch_rows` row.

    Returns {"title", "arguments": [...], "values": [...], "gradients": [...], "notes": [...]}: arguments
    with their shapes (or scalar values), value statistics before/after the forward launch and gradient
    statistics before/after its adjoint launch(es)."""
    meta = array_meta(bundle)
    fwd = bundle.launches[row["forward launch"]]
    n_in = fwd.get("n_inputs", len(fwd["params"]))
    arguments = []
    for j, (p, aid) in enumerate(zip(fwd["params"], fwd["arrays"])):
        role = "input" if j < n_in else "output"
        if aid is None:
            arguments.append({"param": p, "role": role, "kind": "scalar", "array": "", "shape": "",
                              "dtype": "", "requires_grad": None, "value": fmt(fwd["scalars"][j])})
            continue
        m = meta.get(aid, {})
        arguments.append({"param": p, "role": role, "kind": "array", "array": m.get("label", aid),
                          "shape": "x".join(map(str, m.get("shape", []))), "dtype": m.get("dtype", ""),
                          "requires_grad": m.get("requires_grad"), "value": ""})
    roles = {a["param"]: a["role"] for a in arguments}
    values, gradients, notes = [], [], []
    stats = fwd.get("stats")
    if stats:
        for p in fwd["params"]:
            for when in ("before", "after"):
                if p in stats.get(when, {}):
                    values.append(_stats_row(p, roles[p], "value", when, stats[when][p]))
    else:
        notes.append("This launch has no value snapshots: the tape was recorded without snapshots "
                     "(run the script under `gradkit debug`, or use gk.Tape(snapshots=True)).")
    if row["pass"] == "backward":
        records = [b for b in bundle.backward if b["index"] == row["index"]]
    else:
        records = backward_of(bundle, row["forward launch"])
    for b in records:
        for p in fwd["params"]:
            for when in ("before", "after"):
                if p in b.get("stats", {}).get(when, {}):
                    r = _stats_row(p, roles[p], "gradient", when, b["stats"][when][p])
                    r["backward launch"] = b["index"]
                    gradients.append(r)
    if not records:
        notes.append("No gradient statistics: no backward pass of this launch was recorded with snapshots.")
    return {"title": row_title(row), "arguments": arguments, "values": values, "gradients": gradients,
            "notes": notes}


def snapshot_preview(bundle: Bundle, row: dict, param: str, limit: int = 64) -> dict:
    """Flattened leading entries of one argument's stored snapshots ({column: values}, NaN-padded)."""
    fwd = bundle.launches[row["forward launch"]]
    aid = dict(zip(fwd["params"], fwd["arrays"])).get(param)
    cols = {}
    if aid is None:
        return cols
    for when in ("before", "after"):
        data = bundle.snapshot(fwd["index"], aid, when)
        if data is not None:
            cols[f"value {when}"] = data
    if row["pass"] == "backward":
        for when in ("before", "after"):
            data = bundle.grad_snapshot(row["index"], aid, when)
            if data is not None:
                cols[f"grad {when}"] = data
    flat = {k: np.asarray(v, dtype=np.float64).reshape(-1)[:limit] for k, v in cols.items()}
    n = max((len(v) for v in flat.values()), default=0)
    return {k: np.pad(v, (0, n - len(v)), constant_values=np.nan) for k, v in flat.items()}


def summary(bundle: Bundle) -> dict:
    m = bundle.manifest
    return {"launches": len(bundle.launches), "backward launches": len(bundle.backward),
            "arrays": len(m["arrays"]), "kernels": sorted(m["kernels"]),
            "devices": sorted({la["device"] for la in bundle.launches}),
            "total ms": sum(float(la.get("ms") or 0.0) for la in bundle.launches),
            "nan": m.get("nan") is not None or any(r["new non-finite"] for r in launch_rows(bundle)),
            "loss_history": list(m.get("loss_history") or []), "notes": list(m.get("notes") or [])}


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


def nan_launch_row(bundle: Bundle, origin: dict | None) -> int | None:
    """The `launch_rows` row (execution order) of the launch that wrote the first NaN/Inf."""
    if not origin or origin.get("launch") is None:
        return None
    if origin.get("backward") is not None:
        return len(bundle.launches) + origin["backward"]
    return origin["launch"]


# Tape graph --------------------------------------------------------------------------------------------
def cut_off_arrays(bundle: Bundle) -> list[dict]:
    """Float arrays the launches use that lack requires_grad: no gradient is computed for them, and none
    flows back through them to whatever produced them."""
    written = set()
    for la in bundle.launches:
        n_in = la.get("n_inputs", len(la["params"]))
        written.update(a for a in la["arrays"][n_in:] if a is not None)
    out = []
    for a in bundle.manifest["arrays"]:
        if a["requires_grad"] or not a["dtype"].startswith(("float", "vec", "mat")):
            continue
        users = sorted({la["kernel"] for la in bundle.launches if a["id"] in la["arrays"]})
        why = (f"'{a['label']}' has requires_grad=False, so backward() computes no gradient for it"
               + (" and none flows back through it to the launch that wrote it" if a["id"] in written else "")
               + ". Fine for data and constants; a bug when it is a parameter you train "
               "(create it with requires_grad=True).")
        out.append({"array": a["label"], "id": a["id"], "shape": "x".join(map(str, a["shape"])),
                    "dtype": a["dtype"], "used by": ", ".join(users),
                    "written by a launch": a["id"] in written, "explanation": why})
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
    written = _written_arrays(bundle)
    unused = _unused_outputs(bundle)
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
                             unused=aid in unused)
        rows.append({"array": a["label"], "id": aid, "shape": "x".join(map(str, a["shape"])),
                     "requires_grad": a["requires_grad"], "grad norm": norm, "non-finite": nonfinite,
                     "flag": flag})
    return rows


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
    written = set()
    for la in bundle.launches:
        written.update(la["arrays"][j] for j in written_params(la) if la["arrays"][j] is not None)
    return written


def _unused_outputs(bundle: Bundle) -> set:
    """Arrays a launch wrote that no later launch reads (passes as a parameter it does not only write)."""
    last_write, read_after = {}, set()
    for la in bundle.launches:
        w = set(written_params(la))
        reads = set(la["read"]) if "read" in la else set(range(len(la["arrays"]))) - w
        for j, aid in enumerate(la["arrays"]):
            if aid is None:
                continue
            if j in reads and aid in last_write:
                read_after.add(aid)
        for j in w:
            if la["arrays"][j] is not None:
                last_write[la["arrays"][j]] = la["index"]
    return set(last_write) - read_after


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


# NaN / Inf origin --------------------------------------------------------------------------------------
def _first_bad_index(data: np.ndarray | None) -> tuple[list[int] | None, float | None]:
    if data is None or data.dtype.kind != "f":
        return None, None
    bad = np.argwhere(~np.isfinite(data))
    if not len(bad):
        return None, None
    return [int(i) for i in bad[0]], float(data[tuple(bad[0])])


def nan_origin(bundle: Bundle) -> dict | None:
    """Where the first non-finite value came from: the manifest's record (a gk.NaNError caught by
    `gradkit debug`), else the first launch, forward or backward, whose snapshots gained a NaN/Inf.

    Returns the record with "launch" (forward index), "backward" (backward index or None), "kernel",
    "array", "param", "direction", "index", "value", "file", "line", "message", "source" ("manifest" or
    "snapshots")."""
    rec = bundle.nan
    if rec:
        out = dict(rec)
        out["source"] = "manifest"
        out["file"], out["message"] = shown_path(bundle, rec.get("file")), redact(bundle, rec.get("message"))
        out["backward"] = None
        launch = rec.get("launch")
        if rec.get("direction") == "backward" and launch is not None and launch < len(bundle.backward):
            out["backward"] = launch
            out["launch"] = bundle.backward[launch]["record"]
        elif launch is None:
            matches = [la["index"] for la in bundle.launches if la["kernel"] == rec.get("kernel")]
            out["launch"] = matches[-1] if matches else None
        out["param"] = _param_of(bundle, out)
        if isinstance(out.get("origin"), dict):
            op = out["origin"] = dict(out["origin"])
            op["description"] = redact(bundle, op.get("description"))
            op["file"] = shown_path(bundle, op.get("file"))
        return out
    for la in bundle.launches:
        gained = _new_nonfinite(la.get("stats"))
        if gained:
            return _inferred(bundle, la, None, next(iter(gained)), "forward")
    for b in bundle.backward:
        gained = _new_nonfinite(b.get("stats"))
        if gained:
            return _inferred(bundle, bundle.launches[b["record"]], b["index"], next(iter(gained)), "backward")
    return None


def _param_of(bundle: Bundle, origin: dict) -> str | None:
    """The kernel parameter an origin's array label refers to ('y.grad' -> the param bound to y)."""
    if origin.get("launch") is None:
        return None
    la = bundle.launches[origin["launch"]]
    name = (origin.get("array") or "").removesuffix(".grad")
    for p, aid in zip(la["params"], la["arrays"]):
        if aid is not None and (label(bundle, aid) == name or p == name):
            return p
    return None


def _inferred(bundle: Bundle, la: dict, backward: int | None, param: str, direction: str) -> dict:
    aid = dict(zip(la["params"], la["arrays"]))[param]
    data = (bundle.snapshot(la["index"], aid, "after") if backward is None
            else bundle.grad_snapshot(backward, aid, "after"))
    index, value = _first_bad_index(data)
    name = label(bundle, aid) + (".grad" if direction == "backward" else "")
    kernel = bundle.manifest["kernels"].get(la["kernel"], {})
    line = _write_line(kernel, param)
    where = f" at index {index}" if index is not None else ""
    return {"kernel": la["kernel"], "array": name, "param": param, "direction": direction, "index": index,
            "value": value, "launch": la["index"], "backward": backward,
            "file": shown_path(bundle, kernel.get("file")),
            "line": line, "source": "snapshots",
            "message": f"kernel '{la['kernel']}' ({direction} launch) wrote a non-finite value into "
                       f"'{name}'{where} (found in the launch snapshots)"}


def _write_line(kernel: dict, param: str) -> int | None:
    """The first source line of the kernel that stores into `param` (a textual guess: `param[`...`] =`)."""
    first = kernel.get("first_line")
    for k, text in enumerate((kernel.get("python_source") or "").splitlines()):
        stripped = text.strip()
        if (stripped.startswith(f"{param}[") and "=" in stripped.split("]", 1)[-1]) or \
                f"atomic_add({param}," in stripped.replace(" ", ""):
            return first + k if first else None
    return None


def source_excerpt(bundle: Bundle, kernel: str, line: int | None, file: str | None = None) -> dict:
    """The kernel's Python source stored in the bundle as numbered lines with `line` (a file line number)
    marked; nothing is read from disk (a bundle naming /etc/passwd shows nothing of it).

    Returns {"file" (shown relative to the bundle), "first_line", "lines": [(number, text, is_hit)],
    "hit": text or None}."""
    meta = bundle.manifest["kernels"].get(kernel, {})
    lines = (meta.get("python_source") or "").splitlines()
    first = meta.get("first_line") or 1
    numbered = [(first + k, t, line is not None and first + k == line) for k, t in enumerate(lines)]
    hit = next((t for _, t, h in numbered if h), None)
    return {"file": shown_path(bundle, meta.get("file") or file), "first_line": first, "lines": numbered,
            "hit": hit}


def values_at(bundle: Bundle, origin: dict) -> list[dict]:
    """Each array argument of the origin launch at the offending element, before and after it."""
    if origin.get("launch") is None or origin.get("index") is None:
        return []
    la = bundle.launches[origin["launch"]]
    index = tuple(origin["index"])
    rows = []
    for p, aid in zip(la["params"], la["arrays"]):
        if aid is None:
            continue
        row = {"param": p, "array": label(bundle, aid)}
        for kind, when, getter, number in (("value", "before", bundle.snapshot, la["index"]),
                                           ("value", "after", bundle.snapshot, la["index"]),
                                           ("grad", "before", bundle.grad_snapshot, origin.get("backward")),
                                           ("grad", "after", bundle.grad_snapshot, origin.get("backward"))):
            data = getter(number, aid, when) if number is not None else None
            row[f"{kind} {when}"] = _element(data, index)
        rows.append(row)
    return rows


def _element(data, index):
    if data is None:
        return None
    try:
        value = np.asarray(data)[index[:np.ndim(data)]]
    except IndexError:
        return None                      # a differently shaped argument (e.g. a 1-element loss)
    value = np.asarray(value, dtype=np.float64)
    return float(value) if value.ndim == 0 else str(np.round(value, 6).tolist())


def op_diagnosis(origin: dict) -> dict | None:
    """The op-level diagnosis of a NaN origin, laid out for the view: headline, facts and operand rows.

    {"headline": "`sqrt` (its gradient: div(0.5, 0.0) = inf)", "op", "where": "s.py:8", "code": the line,
     "call site": "s.py:21", "backward call": "s.py:22" or None, "iteration": 2 or None, "thread",
     "loops": "iteration 3 of the loop at line 12", "operands": [{"operand", "value"}]}; None without one."""
    op = origin.get("origin")
    if not op:
        return None
    where = f"{op.get('file') or '?'}:{op.get('line') or '?'}"
    if op.get("op") in ("load", "argument"):
        headline = f"read {op.get('call')}: the value was already non-finite before this launch"
        name = op.get("op")
    elif op.get("grad_of"):
        name = op["grad_of"]
        primal = ""
        if op.get("primal_operands") is not None:
            primal = f"{name}({', '.join(_cell(v) for v in op['primal_operands'])}) = {_cell(op.get('primal_result'))}; "
        headline = f"`{name}` — {primal}its gradient {op.get('call')}"
    else:
        name = op.get("op")
        headline = f"`{name}` — {op.get('call')}"
    thread = op.get("thread") or []
    site = origin.get("call_site") or {}
    back = origin.get("backward_site") or {}
    operands = [{"operand": f"{op.get('op')} operand {k}", "value": _cell(v)}
                for k, v in enumerate(op.get("operands") or [])]
    if op.get("primal_operands") is not None:
        operands += [{"operand": f"forward {op.get('grad_of')} operand {k}", "value": _cell(v)}
                     for k, v in enumerate(op["primal_operands"])]
    return {"headline": headline, "op": name, "where": where, "code": (op.get("text") or "").strip(),
            "call site": f"{site['file']}:{site['line']}" if site else None,
            "backward call": f"{back['file']}:{back['line']}" if back else None,
            "iteration": origin.get("iteration"),
            "thread": str(thread[0] if len(thread) == 1 else thread),
            "loops": ", ".join(f"iteration {it} of the loop at line {ln}" for ln, it in op.get("loops") or []),
            "operands": operands, "description": op.get("description")}


def _cell(v) -> str:
    """A traced value as the op text writes it (floats in full: 0.0, 1e-45)."""
    if isinstance(v, list):
        return "(" + ", ".join(_cell(x) for x in v) + ")"
    return repr(float(v)) if isinstance(v, float) else str(v) if v is not None else "—"


# Code --------------------------------------------------------------------------------------------------
def kernel_code(bundle: Bundle, name: str) -> dict:
    """{"python", "file", "first_line", "ir", "adjoint_ir", "code": {device: {variant: text}}}."""
    meta = bundle.manifest["kernels"][name]
    return {"python": meta.get("python_source") or "(source unavailable)",
            "file": shown_path(bundle, meta.get("file")),
            "first_line": meta.get("first_line"), "ir": meta.get("ir", ""),
            "adjoint_ir": meta.get("adjoint_ir", ""),
            "code": meta.get("code") or {}}


def code_language(device: str) -> str:
    """The st.code language of a device's generated code."""
    return "c" if device.startswith("opencl") else "llvm"


def fmt(value) -> str:
    """Compact number formatting for captions."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}"
    return str(value)
