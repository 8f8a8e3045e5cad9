"""Python steps on a tape (a linear solve, `record_func`, a checkpoint block, a host write) as debug-bundle
data: `step_entries` writes them for `save_bundle`, `check_steps` validates them for `check_manifest`.

A step is not a kernel: it has no code, dims or snapshots. A bundle keeps its name, kind, scope, where it
sits among the launches (`position`: how many launches were recorded before it), the arrays it reads and
writes (ids of the manifest's arrays) and its `meta` (a solve's method, iterations, residual, tolerance,
size), which must be plain JSON scalars: a bundle is data, nothing in it is executed or unpickled."""

from __future__ import annotations

import re

STEP_NAME_MAX = 200         # characters of a step's name
META_MAX = 32               # entries of a step's meta
META_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
META_TEXT_MAX = 1000        # characters of a meta string
STEP_KIND = re.compile(r"[a-z_]{1,32}")


def step_records(tape) -> list[tuple[int, object]]:
    """(how many launches precede it, record) for every Python step on the tape, in tape order."""
    out, launches = [], 0
    for rec in tape.records:
        if getattr(rec, "kind", "") == "launch":
            launches += 1
        else:
            out.append((launches, rec))
    return out


def plain_meta(meta) -> dict:
    """A record's meta as plain JSON scalars: numbers, strings, booleans and null kept (NumPy scalars
    converted), anything else written as its str(); keys that are not identifiers are dropped."""
    out = {}
    for key, value in dict(meta or {}).items():
        if not isinstance(key, str) or not META_KEY.fullmatch(key) or len(out) >= META_MAX:
            continue
        if hasattr(value, "item") and callable(value.item):        # a NumPy scalar
            value = value.item()
        if value is not None and not isinstance(value, (bool, int, float, str)):
            value = str(value)
        out[key] = value[:META_TEXT_MAX] if isinstance(value, str) else value
    return out


def step_entries(tape, arrays: dict, names: dict) -> list[dict]:
    """The tape's Python steps as bundle entries; the arrays they use are added to `arrays` (id -> array) and
    named in `names` (id -> "<step> <the record's array_names entry>", else "<step> input|output") unless a
    launch named them first."""
    steps = []
    for position, rec in step_records(tape):
        name = str(getattr(rec, "name", "") or "record_func")[:STEP_NAME_MAX]
        short = name.split(" ")[0].split("(")[0] or "step"
        written = list(getattr(rec, "writes", ()))
        entry = {"index": len(steps), "name": name, "kind": str(getattr(rec, "kind", "func")),
                 "position": position, "scope": [str(s) for s in getattr(rec, "scope", ())],
                 "reads": [], "writes": []}
        given = list(getattr(rec, "array_names", None) or ())       # a solve's: x, b, A.values
        for j, a in enumerate(list(getattr(rec, "arrays", ())) + written):
            if not hasattr(a, "buffer"):
                continue
            aid = f"a{id(a)}"
            out = any(a is w for w in written)
            arrays.setdefault(aid, a)
            names.setdefault(aid, f"{short} {given[j] if j < len(given) else 'output' if out else 'input'}")
            side = entry["writes" if out else "reads"]
            if aid not in side:
                side.append(aid)
        meta = plain_meta(getattr(rec, "meta", None))
        if meta:
            entry["meta"] = meta
        site = getattr(rec, "site", None)
        if site:
            entry["site"] = {"file": str(site[0]), "line": int(site[1])}
        steps.append(entry)
    return steps


def step_name(step: dict) -> str:
    """A step's short name: a solve's method ("cg"), else its name up to the first space or parenthesis."""
    method = (step.get("meta") or {}).get("method")
    return method if isinstance(method, str) and method else step["name"].split(" ")[0].split("(")[0] or "step"


def step_label(step: dict) -> str:
    """A step's one-line label: a solve as "cg: 37 iterations, residual 3e-09", another step by its name."""
    meta = step.get("meta") or {}
    if isinstance(meta.get("iterations"), int) and not isinstance(meta["iterations"], bool):
        text = f"{step_name(step)}: {meta['iterations']} iterations"
        res = meta.get("residual")
        if isinstance(res, (int, float)) and not isinstance(res, bool):
            text += f", residual {res:.3g}"
        return text
    return step["name"]


def check_steps(c, steps, arrays: dict, n_launches: int) -> list:
    """Validate the manifest's `steps` with `c` (bundle_schema's checker, which names the field path):
    exactly the known fields, ids of listed arrays, a position among the launches, meta of JSON scalars."""
    keys = ("index", "name", "kind", "position", "scope", "reads", "writes")
    for k, s in enumerate(c.list(steps, "steps")):
        p = f"steps[{k}]"
        c.obj(s, p, dict.fromkeys(keys), {"meta": dict, "site": dict})
        c.int(s["index"], p + ".index", lo=k, hi=k + 1)
        c.str(s["name"], p + ".name")
        if not s["name"] or len(s["name"]) > STEP_NAME_MAX:
            c.fail(p + ".name", f"a name of {len(s['name'])} characters (expected 1 to {STEP_NAME_MAX})")
        c.str(s["kind"], p + ".kind")
        if not STEP_KIND.fullmatch(s["kind"]):
            c.fail(p + ".kind", f"{s['kind'][:40]!r} is not a step kind (1 to 32 lowercase letters and '_')")
        c.int(s["position"], p + ".position", hi=n_launches + 1)
        for j, name in enumerate(c.list(s["scope"], p + ".scope")):
            c.str(name, f"{p}.scope[{j}]")
        for side in ("reads", "writes"):
            for j, aid in enumerate(c.list(s[side], f"{p}.{side}")):
                c.str(aid, f"{p}.{side}[{j}]")
                if aid not in arrays:
                    c.fail(f"{p}.{side}[{j}]", f"names array {aid[:80]!r}, which the manifest's arrays do not list")
        if "meta" in s:
            _meta(c, s["meta"], p + ".meta")
        if "site" in s:
            c.obj(s["site"], p + ".site", {"file": str, "line": int})
            c.str(s["site"]["file"], p + ".site.file")
            c.int(s["site"]["line"], p + ".site.line", lo=1)
    return steps


def _meta(c, meta, path: str) -> None:
    """At most META_MAX entries, identifier keys, values that are JSON scalars (no lists or objects)."""
    c.obj(meta, path, {}, dict.fromkeys(meta) if isinstance(meta, dict) else {})
    if len(meta) > META_MAX:
        c.fail(path, f"has {len(meta)} entries, more than {META_MAX}")
    for key, value in meta.items():
        q = f"{path}[{key[:80]!r}]"
        if not META_KEY.fullmatch(key):
            c.fail(q, "a meta key must be an identifier of 1 to 64 ASCII letters, digits and '_'")
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            if len(value) > META_TEXT_MAX:
                c.fail(q, f"a string of {len(value)} characters (at most {META_TEXT_MAX})")
        elif not isinstance(value, (int, float)):
            c.fail(q, f"expected a number, string, boolean or null, got {_kind(value)}")


def _kind(value) -> str:
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)
