"""Debug bundles: `tape.save(path)` writes JSON + `.npz` (never pickle) that the debugger opens;
`load_bundle(path)` reads them as untrusted data (bundle_io.py: regular files, size and ratio caps) and
validates every manifest field (bundle_schema.py), raising a `BundleError` that names the file or field.

Layout (a folder, or the same files in a .zip):
    manifest.json   schema version, launches (with per-argument statistics before/after when the tape took
                    snapshots), Python steps (a solve, record_func: bundle_steps.py), backward launches (gradient statistics before/after), arrays (shape, dtype,
                    label, requires_grad), gradient norms, kernels (source with its SHA-256, IR, adjoint IR,
                    generated code, pass logs), tape graph (DOT, plain and gradient-coloured), NaN/Inf
                    origin, loss history, notes
    arrays.npz      "value/<array id>", "grad/<array id>" (current values), "before/<launch>/<array id>",
                    "after/<launch>/<array id>" (forward snapshots), "grad_before/<backward launch>/<array id>",
                    "grad_after/<backward launch>/<array id>" (gradient snapshots); each size-capped by
                    gk.config.snapshot_max_bytes, with a note when capped

Each launch names the variant that ran (`variant`, and `adjoint_variant` once a backward pass ran it; a
backward launch its `variant`: "adjoint_gather", "adjoint_consume_shared", ...), and the kernel's generated
code and pass logs include each such variant, so the debugger shows the code that ran.

A kernel's pass logs (`passes`: {"forward" | "adjoint" | <variant>: [[pass name, IR after it], ...]}, from
`Kernel.pass_log` on the first device the kernel ran on, named in `passes_device`) hold every step verbatim,
a pass that changed nothing included, while their text stays under PASS_LOG_MAX_CHARS per kernel. Over it,
a step whose IR equals the previous step's is folded into that step (its name gains a note, e.g.
"simplify (then promote, simplify: no change)"), and if that is not enough the longest texts are cut to a
common length, each ending in a "[truncated: ...]" line; a manifest note says so. Either way every stored
step's text is the IR after the passes its name lists, so the diff between consecutive steps stays exact.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import pathlib
import zipfile

import numpy as np

from ..runtime.tape.snapshots import array_stats
from .tape_graph import tape_graph
from .bundle_io import BundleError, BundleLimits
from .bundle_steps import step_entries
from .bundle_schema import (ARRAY_ID, PASS_LOG_MAX_CHARS, PASS_NAME_MAX, PASS_STEPS_MAX, PASS_VARIANTS,
                            SCHEMA, check_manifest, source_sha256)

__all__ = ["Bundle", "BundleError", "BundleLimits", "SCHEMA", "load_bundle", "save_bundle", "source_sha256"]

# reading (untrusted) bundles is bundle_load.py's job; re-exported here, where users look for it
from .bundle_load import Bundle, load_bundle  # noqa: E402

ROLES = ("parameter", "intermediate", "constant")


def _role(aid: str, a, written: set, declared: set) -> str:
    """"parameter": declared (gk.Tape(params=...), an optimiser's) or, when none are, an array with
    requires_grad that no recorded launch writes; "intermediate": written by a launch; else "constant"."""
    if aid in declared or (not declared and a.requires_grad and aid not in written):
        return "parameter"
    return "intermediate" if aid in written else "constant"


def _array_meta(aid: str, a, names: dict, role: str = "constant", step_written: bool = False) -> dict:
    """An array as the debugger names it: its `label`, else the user's variable (`gradkit debug` finds it),
    else the kernel parameter it was first bound to; where it was created, that parameter and its role."""
    origin = getattr(a, "_origin", None) or [None, None, None]
    meta = {"id": aid, "label": getattr(a, "label", None) or origin[2] or names.get(aid, aid),
            "shape": list(a.shape), "dtype": a.dtype.name, "requires_grad": bool(a.requires_grad),
            "device": a.device.name, "param": names.get(aid, aid), "role": role}
    if origin[0]:
        meta["created"] = {"file": origin[0], "line": int(origin[1])}
    if step_written:
        meta["step_written"] = True
    return meta


def _kernel_meta(k, devices: set, first_device: str | None = None, notes: list | None = None,
                 ran: tuple = ()) -> dict:
    """What a bundle stores of kernel `k`: source, IR, generated code on each of `devices`, and the pass logs
    on `first_device` (the first device it ran on), for the forward and adjoint variants and the variants
    in `ran` (names of the other variants its launches ran); trouble building a pass log goes to `notes`."""
    extra = [v for v in dict.fromkeys(ran) if v not in PASS_VARIANTS]
    meta = {"name": k.key}
    try:
        meta["python_source"] = inspect.getsource(k.pyfunc)
        meta["source_sha256"] = source_sha256(meta["python_source"])
        meta["file"] = inspect.getsourcefile(k.pyfunc)
        meta["first_line"] = inspect.getsourcelines(k.pyfunc)[1]
    except (OSError, TypeError):
        meta["python_source"] = ""
    meta["ir"] = k.ir()
    try:
        meta["adjoint_ir"] = k.ir(adjoint=True)
    except Exception as exc:  # a kernel without backward still gets a bundle
        meta["adjoint_ir"] = f"(unavailable: {exc})"
    meta["code"] = {}
    for dev in sorted(devices):
        try:
            meta["code"][dev] = {"forward": k.source(dev), "adjoint": k.source(dev, adjoint=True)}
            for variant in extra:
                meta["code"][dev][variant] = k.source(dev, variant=variant)
        except Exception as exc:
            meta["code"][dev] = {"error": str(exc)}
    meta["passes"] = _pass_logs(k, first_device, notes if notes is not None else [], extra)
    meta["passes_device"] = first_device
    return meta


def _pass_logs(k, device: str | None, notes: list, extra: list = ()) -> dict:
    """{variant: [[pass name, printed IR after it], ...]} for the forward and adjoint variants, fitted under
    PASS_LOG_MAX_CHARS. A kernel declared with enable_backward=False has no adjoint entry; a variant whose
    passes fail is left out with a note (the bundle is still written)."""
    logs = {}
    for variant in (*PASS_VARIANTS, *extra):
        if variant != "forward" and not k.enable_backward:
            continue
        try:
            logs[variant] = [[name, text] for name, text in k.pass_log(variant, device)]
        except Exception as exc:  # as for adjoint_ir: the bundle matters more than one variant's log
            notes.append(f"kernel '{k.key}': no {variant} pass log ({type(exc).__name__}: {exc})")
    logs, note = fit_pass_logs(logs, PASS_LOG_MAX_CHARS)
    if note:
        notes.append(f"kernel '{k.key}': {note}")
    return logs


def fit_pass_logs(logs: dict, cap: int) -> tuple[dict, str]:
    """`logs` with at most `cap` characters of text in all (and the schema's step and name bounds), and a
    note saying what was folded or cut ("" when everything fits as it is)."""
    def size(lg):
        return sum(len(text) for steps in lg.values() for _, text in steps)

    logs = {v: [[name[:PASS_NAME_MAX], text] for name, text in steps] for v, steps in logs.items()}
    too_many = any(len(steps) > PASS_STEPS_MAX for steps in logs.values())
    total = size(logs)
    if total <= cap and not too_many:
        return logs, ""
    logs = {v: _fold_unchanged(steps) for v, steps in logs.items()}
    note = (f"pass logs of {total} characters over the {cap}-character cap (gk.viz.bundle.PASS_LOG_MAX_CHARS)"
            if total > cap else f"a pass log over the {PASS_STEPS_MAX}-step cap")
    note += ": steps that changed nothing folded into the one before"
    # Still too many steps (a pipeline far longer than the declared one): keep the input and the last ones.
    dropped = sum(max(0, len(steps) - PASS_STEPS_MAX) for steps in logs.values())
    if dropped:
        logs = {v: steps[:1] + steps[1 - PASS_STEPS_MAX:] if len(steps) > PASS_STEPS_MAX else steps
                for v, steps in logs.items()}
        note += f", {dropped} steps after the input dropped (the diff across that gap spans them)"
    folded = size(logs)
    if folded <= cap:
        return logs, note
    limit = _common_length([len(text) for steps in logs.values() for _, text in steps], cap)
    cut = sum(len(text) > limit for steps in logs.values() for _, text in steps)
    logs = {v: [[name, _truncate(text, limit)] for name, text in steps] for v, steps in logs.items()}
    return logs, note + f", and {cut} texts truncated to {limit} characters"


def _fold_unchanged(steps: list) -> list:
    """Consecutive steps with the same IR stored once, under the first one's name with a note naming the
    passes that changed nothing."""
    runs = []
    for name, text in steps:
        if runs and text == runs[-1][1]:
            runs[-1][2].append(name)
        else:
            runs.append([name, text, []])
    return [[(name + (f" (then {', '.join(same)}: no change)" if same else ""))[:PASS_NAME_MAX], text]
            for name, text, same in runs]


def _common_length(lengths: list[int], cap: int) -> int:
    """The largest length L such that texts cut to at most L characters total at most `cap`."""
    remaining, left = cap, len(lengths)
    for n in sorted(lengths):
        if n * left > remaining:
            return remaining // left
        remaining, left = remaining - n, left - 1
    return max(lengths, default=0)


def _truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in a line that says how much was kept."""
    if len(text) <= limit:
        return text
    def marker(kept: int) -> str:
        return f"\n… [truncated: {kept} of {len(text)} characters kept; pass log over the bundle's cap]\n"

    kept = max(0, limit - len(marker(limit)))      # a smaller count never makes the marker longer
    return (text[:kept] + marker(kept))[:limit]


FOLD_OVER = 24      # launches beyond which a bundle's tape graph folds repeats (tape.visualize(simplify_graph=True))


def _hazards(tape, arrays: dict, launch_of_record: dict, params=()) -> list[dict]:
    """The tape's hazards (runtime/tape/hazards.py; `params` the arrays the script declared as trained) as
    bundle data: kind, message, the ids of the arrays they explain (bundled ones), the launches involved
    (None: a host write) and the source lines."""
    from ..runtime.tape.hazards import find_hazards
    try:
        found = find_hazards(tape, params)
    except Exception as exc:                 # the report must never cost the bundle
        return [{"kind": "error", "message": f"hazard analysis failed: {exc}", "arrays": [], "launches": [],
                 "lines": []}]
    ids = {id(a): aid for aid, a in arrays.items()}
    out = []
    for h in found:
        explained = [ids[id(a)] for a in (h.array, *h.inputs) if id(a) in ids]
        out.append({"kind": h.kind, "message": h.message, "arrays": list(dict.fromkeys(explained)),
                    "launches": [launch_of_record.get(r) for r in h.records], "lines": list(h.lines)})
    return out


def save_bundle(tape, path, max_bytes: int | None = None, nan=None, loss_history=None, grads=None,
                history=None, params=None) -> pathlib.Path:
    """Write the tape's records, snapshots, graph, arrays, gradients and kernel code to a folder (or a .zip).

    `nan` is a dict describing a NaN/Inf origin (see `runtime.capture`); `loss_history` a list of floats;
    `grads` {id(array): NumPy gradient} as backward left them (the script may zero them afterwards: the
    capture keeps them), else the arrays' current `.grad`; `history` per-iteration gradient statistics;
    `params` arrays the script declared as trained (an optimiser's), with the tape's own `params`.
    """
    from ..core.config import config
    cap = config.snapshot_max_bytes if max_bytes is None else max_bytes
    path = pathlib.Path(path)
    trained = list(params or ())                  # `params` is reused below for each launch's parameter names
    declared = {f"a{id(a)}" for a in [*trained, *getattr(tape, "params", ())]}
    # arrays a Python step on the tape overwrote (a linear solve, a host copy): intermediates too
    step_written = {f"a{id(a)}" for rec in tape.records if getattr(rec, "kind", "") != "launch"
                    for a in getattr(rec, "writes", ())}
    arrays, names, kernels, devices = {}, {}, {}, set()
    launches, blobs, notes, capped = [], {}, [], 0
    launch_of_record, first_device, ran = {}, {}, {}
    for index, rec in enumerate(tape.records):
        if getattr(rec, "kind", "") != "launch":
            continue
        launch_of_record[index] = len(launches)
        params = [n for n, _ in rec.kernel_obj.params]
        ids = []
        for name, a in zip(params, rec.args):
            if hasattr(a, "buffer"):
                aid = f"a{id(a)}"
                arrays[aid] = a
                names.setdefault(aid, name)
                ids.append(aid)
            else:
                ids.append(None)
        kernels[rec.kernel] = rec.kernel_obj
        devices.add(rec.device)
        first_device.setdefault(rec.kernel, rec.device)
        entry = {"index": len(launches), "kernel": rec.kernel, "dim": list(rec.dim), "device": rec.device,
                 "scope": list(rec.scope), "ms": rec.ms, "params": params, "n_inputs": len(rec.inputs),
                 "arrays": ids, "scalars": [None if i is not None else _scalar(v) for i, v in zip(ids, rec.args)]}
        entry["variant"] = rec.variant
        ran.setdefault(rec.kernel, []).append(rec.variant)
        if rec.adjoint_variant is not None:
            entry["adjoint_variant"] = rec.adjoint_variant
            ran[rec.kernel].append(rec.adjoint_variant)
        facts = rec.kernel_obj.facts()
        entry["written"], entry["read"] = list(facts.written), list(facts.read)
        if getattr(rec, "site", None):
            entry["site"] = {"file": rec.site[0], "line": int(rec.site[1])}
        if rec.snapshots is not None:
            entry["stats"], n = _snapshot_entries(rec.snapshots, "", entry["index"], dict(zip(params, ids)),
                                                  blobs, cap)
            capped += n
        launches.append(entry)
    backward = []
    for b, brec in enumerate(getattr(tape, "backward_records", [])):
        fwd = launches[launch_of_record[brec.record]]
        aid_of = dict(zip(fwd["params"], fwd["arrays"]))
        entry = {"index": b, "record": fwd["index"], "kernel": brec.kernel, "ms": brec.ms}
        if brec.variant is not None:
            entry["variant"] = brec.variant
            ran.setdefault(brec.kernel, []).append(brec.variant)
        entry["stats"], n = _snapshot_entries(brec.grads, "grad_", b, aid_of, blobs, cap)
        capped += n
        backward.append(entry)
    steps = step_entries(tape, arrays, names)       # a solve, record_func: after the launches name arrays
    if capped:
        notes.append(f"{capped} launch snapshots kept statistics only: over the {cap}-byte cap "
                     "(gk.config.snapshot_max_bytes)")
    grad_norms = {}
    for aid, a in arrays.items():
        kept = grads.get(id(a)) if grads else None
        for kind, src in (("value", a), ("grad", kept if kept is not None else a.grad)):
            if src is None:
                continue
            data = np.asarray(src if isinstance(src, np.ndarray) else src._read())
            if kind == "grad":
                grad_norms[aid] = array_stats(data).get("norm", float("nan"))
            if data.nbytes > cap:
                notes.append(f"{kind} of {names[aid]} ({data.nbytes} bytes) not stored: over the "
                             f"{cap}-byte cap (gk.config.snapshot_max_bytes)")
                continue
            blobs[f"{kind}/{aid}"] = data
    written = {la["arrays"][j] for la in launches for j in la["written"] if la["arrays"][j] is not None}
    written |= step_written
    kernel_meta = {n: _kernel_meta(k, devices, first_device.get(n), notes, tuple(ran.get(n, ())))
                   for n, k in kernels.items()}
    fold = len(launches) > FOLD_OVER      # a long rollout's graph: launches repeated back to back drawn once
    if fold:
        notes.append(f"the tape graph folds launches repeated back to back ({len(launches)} launches)")
    manifest = {"schema": SCHEMA, "launches": launches, "backward": backward,
                "arrays": [_array_meta(aid, a, names, _role(aid, a, written, declared), aid in step_written)
                           for aid, a in arrays.items()],
                "grad_norms": grad_norms,
                "kernels": kernel_meta,
                "graph": tape_graph(tape, simplify_graph=fold),
                "graph_gradients": tape_graph(tape, show_gradients=True, grads=grads, simplify_graph=fold),
                "nan": nan, "loss_history": list(loss_history if loss_history is not None
                                                  else getattr(tape, "loss_history", [])),
                "notes": notes}
    if steps:
        manifest["steps"] = steps
    if history:
        manifest["history"] = history
    hazards = _hazards(tape, arrays, launch_of_record, trained)
    if hazards:
        manifest["hazards"] = hazards
    _portable_paths(manifest, path)
    text = json.dumps(manifest, indent=1, default=str)
    check_manifest(json.loads(text), str(path))       # never write a bundle the loader would refuse
    buf = io.BytesIO()
    np.savez_compressed(buf, **blobs)
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("manifest.json", text)
            z.writestr("arrays.npz", buf.getvalue())
    else:
        path.mkdir(parents=True, exist_ok=True)
        (path / "manifest.json").write_text(text)
        (path / "arrays.npz").write_bytes(buf.getvalue())
    return path


def portable_path(file: str, base: pathlib.Path | None) -> str:
    """An absolute `file` relative to the bundle's folder `base` when inside it, else its name; a relative one
    as it is. A shared bundle (and the debugger showing one) never carries a machine's folders (/home/...)."""
    normal = pathlib.PurePosixPath(os.path.normpath(file.replace("\\", "/")))
    if not normal.is_absolute():
        return normal.as_posix()
    if base is not None:
        try:
            return normal.relative_to(pathlib.PurePosixPath(base.as_posix())).as_posix()
        except ValueError:
            pass
    return normal.name or file


def _portable_paths(manifest: dict, path: pathlib.Path) -> None:
    """Replace the absolute file paths of the kernels, the launch call sites, the NaN origin (its fields,
    nested ones and messages included) and the hazards (their lines and messages) with portable ones."""
    base = pathlib.Path(os.path.abspath(path)).parent
    files = {k["file"] for k in manifest["kernels"].values() if k.get("file")}
    files |= {la["site"]["file"] for la in manifest.get("launches", []) if la.get("site")}
    files |= {s["site"]["file"] for s in manifest.get("steps", []) if s.get("site")}
    nan = manifest.get("nan")
    if nan:
        files |= set(_strings_at(nan, "file"))
    hazards = manifest.get("hazards") or []
    files |= {line.rsplit(":", 1)[0] for h in hazards for line in h["lines"] if ":" in line}
    shown = {f: portable_path(os.path.abspath(f), base) for f in files}
    for k in manifest["kernels"].values():
        if k.get("file"):
            k["file"] = shown[k["file"]]
    for la in [*manifest.get("launches", []), *manifest.get("steps", [])]:
        if la.get("site"):
            la["site"]["file"] = shown[la["site"]["file"]]
    if nan or hazards:
        ordered = sorted(shown, key=len, reverse=True)

        def rewrite(value):
            if isinstance(value, str):
                for f in ordered:
                    value = value.replace(f, shown[f])
                return value
            if isinstance(value, dict):
                return {k: rewrite(v) for k, v in value.items()}
            if isinstance(value, list):
                return [rewrite(v) for v in value]
            return value

        if nan:
            manifest["nan"] = rewrite(nan)
        if hazards:
            manifest["hazards"] = rewrite(hazards)


def _strings_at(value, key: str):
    """Every string stored under `key` in nested dicts/lists."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key and isinstance(v, str):
                yield v
            else:
                yield from _strings_at(v, key)
    elif isinstance(value, list):
        for v in value:
            yield from _strings_at(v, key)


def _snapshot_entries(snaps, prefix: str, number: int, aid_of: dict, blobs: dict, cap: int) -> tuple[dict, int]:
    """Statistics of a launch's before/after snapshots by parameter; their data into `blobs` under
    "<prefix><when>/<number>/<array id>" when under the cap. Returns (stats, how many were capped)."""
    stats, capped = {}, 0
    for when in ("before", "after"):
        taken = getattr(snaps, when)
        stats[when] = {p: sn.stats for p, sn in taken.items()}
        for p, sn in taken.items():
            if sn.data is None or sn.data.nbytes > cap:
                capped += 1
            else:
                blobs[f"{prefix}{when}/{number}/{aid_of[p]}"] = sn.data
    return stats, capped


def _scalar(v):
    try:
        return float(v) if np.ndim(v) == 0 else [float(x) for x in np.ravel(v)]
    except (TypeError, ValueError):
        return str(v)
