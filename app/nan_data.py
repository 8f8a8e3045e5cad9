"""The debugger's NaN/Inf data: where the first non-finite value appeared (launch, array, element, op,
line, iteration), the values around it and the source excerpt (the NaN/Inf view)."""

from __future__ import annotations

import numpy as np

from ..viz.bundle import Bundle
from ..viz.launch_folding import find_repeats
from .data import label, new_nonfinite
from .paths import redact, shown_path


def nan_launch_row(bundle: Bundle, origin: dict | None) -> int | None:
    """The `launch_rows` row (execution order) of the launch that wrote the first NaN/Inf."""
    if not origin or origin.get("launch") is None:
        return None
    if origin.get("backward") is not None:
        return len(bundle.launches) + origin["backward"]
    return origin["launch"]



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
        gained = new_nonfinite(la.get("stats"))
        if gained:
            return _inferred(bundle, la, None, next(iter(gained)), "forward")
    for b in bundle.backward:
        gained = new_nonfinite(b.get("stats"))
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


def time_step(bundle: Bundle, launch: int | None) -> str | None:
    """Where forward launch `launch` sits in the program's time loop, as the user counts: "step 49 (of the 50
    recorded; ...)" when it falls in a run of launches repeated back to back (viz/launch_folding.py finds the loop body),
    with the scope the user named (`tape.scope`) when there is one; None outside any repeat."""
    if launch is None or not 0 <= launch < len(bundle.launches):
        return None
    signatures = [(la["kernel"], tuple(la.get("scope") or ())) for la in bundle.launches]
    for r in find_repeats(signatures):
        if r.start <= launch < r.end:
            step = (launch - r.start) // r.period
            scope = "/".join(bundle.launches[launch].get("scope") or ())
            where = f" in scope '{scope}'" if scope else ""
            return (f"step {step}{where} (of the {r.count} recorded; launch {(launch - r.start) % r.period + 1} "
                    f"of the {r.period} the loop body makes)")
    return None


# op -> what to change, for the ops whose NaN/Inf comes from a point outside their domain
_HINTS = {
    "sqrt": "sqrt's derivative 0.5/sqrt(x) is infinite at x = 0: use gk.length / gk.normalize (their gradient at "
            "the zero vector is 0), or keep x away from 0 (gk.sqrt(x + 1e-12)); a negative x is NaN: clamp it",
    "rsqrt": "rsqrt is infinite at 0: add a small epsilon to its argument",
    "log": "log is -inf at 0 and NaN below it: guard the argument, gk.log(gk.max(x, 1e-12))",
    "log2": "log2 is -inf at 0 and NaN below it: guard the argument, gk.log2(gk.max(x, 1e-12))",
    "log10": "log10 is -inf at 0 and NaN below it: guard the argument, gk.log10(gk.max(x, 1e-12))",
    "div": "a division by zero: guard the denominator (x / (y + eps), or gk.where(y != 0.0, x / y, 0.0))",
    "asin": "asin's derivative is infinite at ±1: clamp its argument to (-1 + eps, 1 - eps)",
    "acos": "acos's derivative is infinite at ±1: clamp its argument to (-1 + eps, 1 - eps)",
    "pow": "pow of a non-positive base to a non-integer power (or its gradient at 0): keep the base positive",
    "exp": "exp overflows past about 88 in float32 (709 in float64): clamp its argument or rescale",
    "length": "a length of the zero vector is fine, but dividing by it is not: guard the division",
    "normalize": "normalize of the zero vector: guard it (gk.where(gk.length(v) > eps, gk.normalize(v), v))",
}


def fix_hint(op: str | None) -> str | None:
    """What to change for a NaN/Inf made by `op` (its name in the diagnosis), or None when there is no rule."""
    return _HINTS.get(op or "")
