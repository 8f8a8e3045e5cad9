"""The schema of a bundle's manifest.json: every field's type, required keys, value ranges and the
cross-references between launches, backward launches, arrays and kernels.

`check_manifest` raises a `BundleError` naming the field path (`launches[3].arrays[1]`), so the debugger's
views can index the manifest without guarding every lookup.
"""

from __future__ import annotations

import hashlib
import math
import re

from .bundle_io import BundleError
from .bundle_steps import check_steps
from ..ad.variants import VariantKey

SCHEMA = 2
_SHA256 = re.compile(r"[0-9a-f]{64}")
# An array's id (save_bundle writes "a<digits>"): it names arrays.npz entries and tape-graph nodes, so no
# '/', quote, space or markup character, ever
ARRAY_ID = re.compile(r"[A-Za-z0-9_]{1,64}")
_NAN_KEYS = {"message", "kernel", "array", "direction", "index", "value", "file", "line", "launch", "origin",
             "call_site", "backward_site", "iteration"}
# runtime/launch/op_trace.py's OpOrigin.as_dict(): the op that made the first NaN/Inf
_ORIGIN_STR = ("op", "file", "text", "grad_of", "array", "call", "description")
_ORIGIN_INT = ("line", "col")
_ORIGIN_VALUES = ("operands", "result", "primal_operands", "primal_result")

# A kernel's pass log (`passes`): the printed IR after each pass building a variant (Kernel.pass_log): the
# forward and adjoint variants always, and every other variant a launch of the bundle ran (its `variant` /
# `adjoint_variant`, a backward launch's `variant`); generated code (`code`) likewise.
PASS_VARIANTS = ("forward", "adjoint")
PASS_LOG_MAX_CHARS = 2_000_000   # total IR text of one kernel's pass logs (save_bundle truncates to fit)
PASS_STEPS_MAX = 64              # steps per variant (the declared pipeline has about ten)
PASS_NAME_MAX = 200              # characters of a step's name (a pass name, or one with a note appended)


def _variant(c: "_Check", name, path: str) -> None:
    """A kernel variant's declared name (ad/variants.py VariantKey.name)."""
    c.str(name, path)
    try:
        VariantKey.parse(name)
    except ValueError as exc:
        c.fail(path, str(exc))


def source_sha256(text: str) -> str:
    """The hex SHA-256 of a kernel's stored source (UTF-8), as `save_bundle` records it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Check:
    """Type and range checks that name the field path in their error."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, path: str, message: str):
        raise BundleError(f"{self.where}: manifest.json: {path}: {message}")

    def obj(self, value, path: str, required: dict, optional: dict | None = None) -> dict:
        """A dict with exactly the `required` keys and any of the `optional` ones (key -> expected kind)."""
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_kind(value)}")
        optional = optional or {}
        for key in required:
            if key not in value:
                self.fail(_join(path, key), "missing")
        for key in value:
            if key not in required and key not in optional:
                self.fail(_join(path, key), "unknown field")
        return value

    def str(self, value, path: str, none: bool = False) -> None:
        if not (isinstance(value, str) or none and value is None):
            self.fail(path, f"expected a string{' or null' if none else ''}, got {_kind(value)}")

    def bool(self, value, path: str) -> None:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_kind(value)}")

    def int(self, value, path: str, lo: int = 0, hi: int | None = None, none: bool = False) -> None:
        if none and value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(path, f"expected an integer{' or null' if none else ''}, got {_kind(value)}")
        if value < lo or hi is not None and value >= hi:
            self.fail(path, f"{value} is out of range (expected {lo} <= value"
                            + (f" < {hi})" if hi is not None else ")"))

    def num(self, value, path: str, none: bool = True, finite_nonneg: bool = False) -> None:
        if none and value is None:
            return
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            self.fail(path, f"expected a number{' or null' if none else ''}, got {_kind(value)}")
        if finite_nonneg and not (math.isfinite(value) and value >= 0):
            self.fail(path, f"{value} is out of range (expected a finite number >= 0)")

    def list(self, value, path: str, length: int | None = None, lo: int = 0, hi: int | None = None) -> list:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_kind(value)}")
        if length is not None and len(value) != length:
            self.fail(path, f"has {len(value)} entries, expected {length}")
        if len(value) < lo or hi is not None and len(value) > hi:
            self.fail(path, f"has {len(value)} entries, expected {lo} to {hi}")
        return value


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def check_manifest(m, where: str) -> None:
    """Validate a parsed manifest.json in place; BundleError naming the first bad field."""
    c = _Check(where)
    if not isinstance(m, dict):
        c.fail("(top level)", f"expected an object, got {_kind(m)}")
    if m.get("schema") != SCHEMA:
        raise BundleError(f"{where}: unsupported bundle schema {m.get('schema')!r} "
                          f"(this gradkit reads schema {SCHEMA})")
    c.obj(m, "", {"schema": int, "launches": list, "arrays": list, "kernels": dict, "graph": str},
          {"backward": list, "grad_norms": dict, "graph_gradients": str, "nan": dict, "loss_history": list,
           "history": dict, "hazards": list, "steps": list,
           "notes": list})
    arrays = _arrays(c, m["arrays"])
    kernels = _kernels(c, m["kernels"])
    launches = _launches(c, c.list(m["launches"], "launches"), arrays, kernels)
    _backward(c, c.list(m.get("backward", []), "backward"), launches)
    check_steps(c, m.get("steps", []), arrays, len(launches))
    c.str(m["graph"], "graph")
    c.str(m.get("graph_gradients"), "graph_gradients", none=True)
    norms = m.get("grad_norms") or {}
    c.obj(norms, "grad_norms", {}, dict.fromkeys(arrays))
    for aid, v in norms.items():
        c.num(v, _join("grad_norms", aid))
    for k, v in enumerate(c.list(m.get("loss_history", []), "loss_history")):
        c.num(v, f"loss_history[{k}]", none=False)
    for k, v in enumerate(c.list(m.get("notes", []), "notes")):
        c.str(v, f"notes[{k}]")
    if m.get("nan") is not None:
        _nan(c, m["nan"], len(launches), len(m.get("backward", [])))
    if m.get("history") is not None:
        _history(c, m["history"])
    for k, h in enumerate(c.list(m.get("hazards", []), "hazards")):
        p = f"hazards[{k}]"
        c.obj(h, p, dict.fromkeys(("kind", "message", "arrays", "launches", "lines")))
        c.str(h["kind"], p + ".kind")
        c.str(h["message"], p + ".message")
        for j, aid in enumerate(c.list(h["arrays"], p + ".arrays")):
            c.str(aid, f"{p}.arrays[{j}]")
            if aid not in arrays:
                c.fail(f"{p}.arrays[{j}]", f"{aid!r} is not an array of this bundle")
        for j, la in enumerate(c.list(h["launches"], p + ".launches")):
            if la is not None:
                c.int(la, f"{p}.launches[{j}]")
                if not 0 <= la < len(launches):
                    c.fail(f"{p}.launches[{j}]", f"{la} is not a launch of this bundle")
        for j, line in enumerate(c.list(h["lines"], p + ".lines")):
            c.str(line, f"{p}.lines[{j}]")


def _arrays(c: _Check, arrays) -> dict:
    seen = {}
    for k, a in enumerate(c.list(arrays, "arrays")):
        p = f"arrays[{k}]"
        c.obj(a, p, dict.fromkeys(("id", "label", "shape", "dtype", "requires_grad", "device")),
              {"param": str, "created": dict, "role": str, "step_written": bool})
        if "role" in a and a["role"] not in ("parameter", "intermediate", "constant"):
            c.fail(p + ".role", f"{a['role']!r} is not 'parameter', 'intermediate' or 'constant'")
        if "param" in a:
            c.str(a["param"], p + ".param")
        if "created" in a:
            _site(c, a["created"], p + ".created")
        c.str(a["id"], p + ".id")
        if not ARRAY_ID.fullmatch(a["id"]) or a["id"] in seen:
            c.fail(p + ".id", f"{a['id']!r} is not 1 to 64 ASCII letters, digits and '_', or repeats an "
                              "earlier id")
        c.str(a["label"], p + ".label")
        for j, n in enumerate(c.list(a["shape"], p + ".shape", hi=32)):
            c.int(n, f"{p}.shape[{j}]")
        c.str(a["dtype"], p + ".dtype")
        c.bool(a["requires_grad"], p + ".requires_grad")
        c.str(a["device"], p + ".device")
        seen[a["id"]] = a
    return seen


def _kernels(c: _Check, kernels) -> dict:
    for name, k in kernels.items():
        p = _join("kernels", name)
        c.obj(k, p, dict.fromkeys(("name", "python_source")),
              dict.fromkeys(("file", "first_line", "source_sha256", "ir", "adjoint_ir", "code", "passes",
                             "passes_device")))
        c.str(k["name"], p + ".name")
        if k["name"] != name:
            c.fail(p + ".name", f"{k['name']!r} differs from its key {name!r}")
        c.str(k["python_source"], p + ".python_source")
        c.str(k.get("file"), p + ".file", none=True)
        c.int(k.get("first_line"), p + ".first_line", lo=1, none=True)
        for field in ("ir", "adjoint_ir"):
            c.str(k.get(field, ""), f"{p}.{field}")
        if "source_sha256" in k:
            c.str(k["source_sha256"], p + ".source_sha256")
            if not _SHA256.fullmatch(k["source_sha256"]):
                c.fail(p + ".source_sha256", "expected 64 lowercase hex digits")
            if k["source_sha256"] != source_sha256(k["python_source"]):
                c.fail(p + ".source_sha256", "does not match the stored python_source: the source was "
                                             "changed after the bundle was written")
        code = k.get("code", {})
        c.obj(code, p + ".code", {}, dict.fromkeys(code))
        for dev, variants in code.items():
            c.obj(variants, _join(p + ".code", dev), {}, dict.fromkeys(variants))
            for variant, text in variants.items():
                if variant != "error":
                    _variant(c, variant, _join(_join(p + ".code", dev), variant))
                c.str(text, f"{_join(p + '.code', dev)}.{variant}")
        if "passes" in k:
            _passes(c, k["passes"], p + ".passes")
        c.str(k.get("passes_device"), p + ".passes_device", none=True)
    return kernels


def _passes(c: _Check, passes, path: str) -> None:
    """{variant: [[pass name, IR text], ...]} with at most PASS_STEPS_MAX steps per variant, names of at most
    PASS_NAME_MAX characters and at most PASS_LOG_MAX_CHARS of text in all."""
    c.obj(passes, path, {}, dict.fromkeys(passes))
    total = 0
    for variant, steps in passes.items():
        _variant(c, variant, _join(path, variant))
        q = f"{path}.{variant}"
        for j, step in enumerate(c.list(steps, q, hi=PASS_STEPS_MAX)):
            name, text = c.list(step, f"{q}[{j}]", length=2)
            c.str(name, f"{q}[{j}][0]")
            if not name or len(name) > PASS_NAME_MAX:
                c.fail(f"{q}[{j}][0]", f"a pass name of {len(name)} characters "
                                       f"(expected 1 to {PASS_NAME_MAX})")
            c.str(text, f"{q}[{j}][1]")
            total += len(text)
    if total > PASS_LOG_MAX_CHARS:
        c.fail(path, f"holds {total} characters of IR, over the {PASS_LOG_MAX_CHARS}-character cap")


def _launches(c: _Check, launches: list, arrays: dict, kernels: dict) -> list:
    keys = ("index", "kernel", "dim", "device", "scope", "ms", "params", "n_inputs", "arrays", "scalars")
    for k, la in enumerate(launches):
        p = f"launches[{k}]"
        c.obj(la, p, dict.fromkeys(keys), {"stats": dict, "site": dict, "written": list, "read": list,
                                           "variant": str, "adjoint_variant": str})
        for key in ("variant", "adjoint_variant"):
            if key in la:
                _variant(c, la[key], f"{p}.{key}")
        for key in ("written", "read"):
            for j, w in enumerate(c.list(la.get(key, []), f"{p}.{key}")):
                c.int(w, f"{p}.{key}[{j}]", hi=len(la["params"]) if isinstance(la.get("params"), list) else None)
        if "site" in la:
            _site(c, la["site"], p + ".site")
        c.int(la["index"], p + ".index", lo=k, hi=k + 1)
        c.str(la["kernel"], p + ".kernel")
        if la["kernel"] not in kernels:
            c.fail(p + ".kernel", f"names kernel {la['kernel']!r}, which the manifest's kernels do not hold")
        for j, d in enumerate(c.list(la["dim"], p + ".dim", lo=1, hi=4)):
            c.int(d, f"{p}.dim[{j}]")
        c.str(la["device"], p + ".device")
        for j, s in enumerate(c.list(la["scope"], p + ".scope")):
            c.str(s, f"{p}.scope[{j}]")
        c.num(la["ms"], p + ".ms", finite_nonneg=True)
        params = c.list(la["params"], p + ".params")
        for j, name in enumerate(params):
            c.str(name, f"{p}.params[{j}]")
        if len(set(params)) != len(params):
            c.fail(p + ".params", "repeats a parameter name")
        c.int(la["n_inputs"], p + ".n_inputs", hi=len(params) + 1)
        for j, aid in enumerate(c.list(la["arrays"], p + ".arrays", length=len(params))):
            c.str(aid, f"{p}.arrays[{j}]", none=True)
            if aid is not None and aid not in arrays:
                c.fail(f"{p}.arrays[{j}]", f"names array {aid!r}, which the manifest's arrays do not list")
        for j, v in enumerate(c.list(la["scalars"], p + ".scalars", length=len(params))):
            _scalar(c, v, f"{p}.scalars[{j}]", la["arrays"][j] is not None)
        if "stats" in la:
            _stats(c, la["stats"], p + ".stats", params)
    return launches


def _scalar(c: _Check, v, path: str, is_array: bool) -> None:
    if is_array:
        if v is not None:
            c.fail(path, "must be null: this parameter is an array")
    elif isinstance(v, list):
        for j, x in enumerate(v):
            c.num(x, f"{path}[{j}]", none=False)
    elif not isinstance(v, str):
        c.num(v, path)


def _stats(c: _Check, stats, path: str, params: list) -> None:
    c.obj(stats, path, {}, {"before": dict, "after": dict})
    for when, per_param in stats.items():
        c.obj(per_param, f"{path}.{when}", {}, dict.fromkeys(params))
        for name, values in per_param.items():
            q = _join(f"{path}.{when}", name)
            c.obj(values, q, {}, dict.fromkeys(values))
            for key, v in values.items():
                c.num(v, _join(q, key))


def _backward(c: _Check, backward: list, launches: list) -> None:
    for k, b in enumerate(backward):
        p = f"backward[{k}]"
        c.obj(b, p, dict.fromkeys(("index", "record", "kernel", "ms")), {"stats": dict, "variant": str})
        if "variant" in b:
            _variant(c, b["variant"], p + ".variant")
        c.int(b["index"], p + ".index", lo=k, hi=k + 1)
        c.int(b["record"], p + ".record", hi=len(launches))
        c.str(b["kernel"], p + ".kernel")
        c.num(b["ms"], p + ".ms", finite_nonneg=True)
        if "stats" in b:
            _stats(c, b["stats"], p + ".stats", launches[b["record"]]["params"])


def _nan(c: _Check, nan, n_launches: int, n_backward: int) -> None:
    c.obj(nan, "nan", {}, dict.fromkeys(_NAN_KEYS))
    for key in ("message", "kernel", "array", "file"):
        c.str(nan.get(key), f"nan.{key}", none=True)
    if nan.get("direction") not in (None, "forward", "backward"):
        c.fail("nan.direction", f"{nan['direction']!r} is not 'forward', 'backward' or null")
    if nan.get("index") is not None:
        for j, i in enumerate(c.list(nan["index"], "nan.index", hi=4)):
            c.int(i, f"nan.index[{j}]")
    c.num(nan.get("value"), "nan.value")
    c.int(nan.get("line"), "nan.line", lo=1, none=True)
    limit = n_backward if nan.get("direction") == "backward" else n_launches
    c.int(nan.get("launch"), "nan.launch", hi=max(limit, 0), none=True)
    c.int(nan.get("iteration"), "nan.iteration", none=True)
    for key in ("call_site", "backward_site"):
        if nan.get(key) is not None:
            _site(c, nan[key], f"nan.{key}")
    if nan.get("origin") is not None:
        _op_origin(c, nan["origin"], "nan.origin")


def _history(c: _Check, h) -> None:
    """viz/grad_history.py's History.as_dict(): per-iteration loss, norms and quantiles by array label."""
    c.obj(h, "history", {"iterations": list, "loss": list, "norms": dict, "quantiles": dict})
    n = len(c.list(h["iterations"], "history.iterations", hi=4096))
    for j, k in enumerate(h["iterations"]):
        c.int(k, f"history.iterations[{j}]")
    for j, v in enumerate(c.list(h["loss"], "history.loss", length=n)):
        c.num(v, f"history.loss[{j}]")
    c.obj(h["norms"], "history.norms", {}, dict.fromkeys(h["norms"]))
    for label, values in h["norms"].items():
        q = _join("history.norms", label)
        for j, v in enumerate(c.list(values, q, length=n)):
            c.num(v, f"{q}[{j}]")
    c.obj(h["quantiles"], "history.quantiles", {}, dict.fromkeys(h["quantiles"]))
    for label, values in h["quantiles"].items():
        q = _join("history.quantiles", label)
        for j, v in enumerate(c.list(values, q, length=n)):
            if v is not None:
                for i, x in enumerate(c.list(v, f"{q}[{j}]", length=5)):
                    c.num(x, f"{q}[{j}][{i}]", none=False)


def _site(c: _Check, site, path: str) -> None:
    c.obj(site, path, {"file": str, "line": int})
    c.str(site["file"], path + ".file")
    c.int(site["line"], path + ".line", lo=1)


def _op_origin(c: _Check, o, path: str) -> None:
    keys = _ORIGIN_STR + _ORIGIN_INT + _ORIGIN_VALUES + ("thread", "loops", "index", "step")
    c.obj(o, path, {}, dict.fromkeys(keys))
    for key in _ORIGIN_STR:
        c.str(o.get(key), f"{path}.{key}", none=True)
    for key in _ORIGIN_INT:
        c.int(o.get(key), f"{path}.{key}", none=True)
    c.int(o.get("step"), f"{path}.step", none=True)
    for key in _ORIGIN_VALUES:
        _value(c, o.get(key), f"{path}.{key}")
    for key in ("thread", "index"):
        if o.get(key) is not None:
            for j, i in enumerate(c.list(o[key], f"{path}.{key}", hi=4)):
                c.int(i, f"{path}.{key}[{j}]")
    for j, loop in enumerate(c.list(o.get("loops", []), f"{path}.loops", hi=64)):
        c.list(loop, f"{path}.loops[{j}]", length=2)
        c.int(loop[0], f"{path}.loops[{j}][0]", none=True)
        c.int(loop[1], f"{path}.loops[{j}][1]")


def _value(c: _Check, v, path: str, depth: int = 0) -> None:
    """A traced value: a number, a string ('nan', 'inf'), null, or a (nested, short) list of those."""
    if isinstance(v, list):
        if depth >= 3:
            c.fail(path, "nests lists too deeply")
        for j, x in enumerate(c.list(v, path, hi=64)):
            _value(c, x, f"{path}[{j}]", depth + 1)
    elif not isinstance(v, str):
        c.num(v, path)
