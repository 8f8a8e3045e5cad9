"""The debugger's data layer: bundles found and opened, their launches and kernels' code, as tables.
Gradient flow (flow_data.py), the NaN/Inf origin (nan_data.py) and the landing view (overview_data.py)
build on these.

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

from ..viz.bundle import Bundle, BundleError, BundleLimits, load_bundle
from .paths import shown_path

STAT_KEYS = ("min", "max", "mean", "norm", "nonfinite")


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


def new_nonfinite(stats: dict | None) -> dict[str, int]:
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


def partial_backward(bundle: Bundle) -> str | None:
    """What every view says first when the backward pass stopped midway (a NaN check, an error); None when
    it ran to the end (or never ran)."""
    nan = bundle.nan or {}
    if nan.get("direction") != "backward":
        return None
    ran = len(bundle.backward)
    total = sum(1 for la in bundle.launches)
    where = f" in backward launch #{nan['launch']} ({nan.get('kernel') or '?'})" if nan.get("launch") is not None \
        else ""
    return (f"The backward pass stopped{where}: {ran} of {total} adjoint launches ran, so the gradients shown "
            "are partial. Arrays it did not reach are counted as 'not reached'; no zero or vanishing alarm "
            "comes from this pass.")


def launch_rows(bundle: Bundle) -> list[dict]:
    """Every launch in execution order: the forward launches, then the adjoint launches of backward()."""
    rows = []
    for la in bundle.launches:
        gained = new_nonfinite(la.get("stats"))
        rows.append({"order": len(rows), "pass": "forward", "index": la.get("index", len(rows)),
                     "kernel": la["kernel"], "variant": la.get("variant", "forward"),
                     "dim": _dim(la["dim"]), "device": la["device"],
                     "ms": float(la.get("ms") or 0.0), "scope": "/".join(la.get("scope", [])),
                     "forward launch": la.get("index", len(rows)),
                     "new non-finite": ", ".join(f"{p} ({n})" for p, n in gained.items())})
    for b in bundle.backward:
        fwd = bundle.launches[b["record"]]
        gained = new_nonfinite(b.get("stats"))
        rows.append({"order": len(rows), "pass": "backward", "index": b["index"], "kernel": b["kernel"],
                     "variant": b.get("variant") or fwd.get("adjoint_variant") or "adjoint",
                     "dim": _dim(fwd["dim"]), "device": fwd["device"], "ms": float(b.get("ms") or 0.0),
                     "scope": "/".join(fwd.get("scope", [])), "forward launch": b["record"],
                     "new non-finite": ", ".join(f"{p}.grad ({n})" for p, n in gained.items())})
    return rows


def step_rows(bundle: Bundle) -> list[dict]:
    """The Python steps on the tape (a linear solve, record_func, a host write), not kernels: one row each
    with where it ran among the forward launches, its label (a solve's method, iterations and residual),
    the arrays it read and wrote and its other recorded facts."""
    from ..viz.bundle_steps import step_label
    rows = []
    for st in bundle.steps:
        meta = st.get("meta") or {}
        p = st["position"]
        where = "before any launch" if p == 0 else f"after forward launch #{p - 1}"
        rows.append({"step": st["index"], "kind": st["kind"], "step label": step_label(st), "name": st["name"],
                     "when": where, "scope": "/".join(st["scope"]),
                     "reads": ", ".join(label(bundle, a) for a in st["reads"]),
                     "writes": ", ".join(label(bundle, a) for a in st["writes"]),
                     "iterations": meta.get("iterations"), "residual": meta.get("residual"),
                     "facts": ", ".join(f"{k}={fmt(v)}" for k, v in meta.items())})
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
    return {"launches": len(bundle.launches), "steps": len(bundle.steps), "backward launches": len(bundle.backward),
            "arrays": len(m["arrays"]), "kernels": sorted(m["kernels"]),
            "devices": sorted({la["device"] for la in bundle.launches}),
            "total ms": sum(float(la.get("ms") or 0.0) for la in bundle.launches),
            "nan": m.get("nan") is not None or any(r["new non-finite"] for r in launch_rows(bundle)),
            "loss_history": list(m.get("loss_history") or []), "notes": list(m.get("notes") or [])}



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
