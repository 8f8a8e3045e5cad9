"""A hostile copy of a recorded debug bundle: every free-text field of its manifest (array labels, dtypes and
devices, kernel names, sources, IR and generated code, scopes, parameter names, devices, call sites, notes,
pass names, hazards, the NaN/Inf record and its op origin, history labels) gains text that would fetch a URL
of the author's choosing, or draw markup, if a view rendered it as Markdown, HTML or DOT instead of as text.

The copy stays valid for viz/bundle_schema.py (ids are kept; kernel names and parameter names are rewritten
the same way wherever they are referenced; source hashes are recomputed), so every view opens it."""

from __future__ import annotations

import json
import pathlib
import shutil

from gradkit.viz.bundle_schema import source_sha256


def payload(host: str, field: str) -> str:
    """Text that makes a request to `host` (http://127.0.0.1:PORT) tagged with `field` wherever it is rendered
    as Markdown (images, links, autolinks, LaTeX), HTML (img, iframe, style, comments) or DOT (quoted-string
    break-out into an HTML-like label with an IMG)."""
    url = f"{host}/leak?f={field}"
    return (f" ![x]({url}-md) <img src={url}-img> [link]({url}-link) [js](javascript:fetch('{url}-js'))"
            f" <{url}-auto> <!-- c --> <iframe src={url}-frame></iframe> <style>@import '{url}-css';</style>"
            f' $\\includegraphics{{{url}-tex}}$ "]; leak [label=<<IMG SRC="{url}-dot"/>>]; x="'
            f" \\N \\G <<B>b</B>>"
            f"\n\n![para]({url}-para)")


def literal(host: str, field: str) -> str:
    """A piece of `payload(host, field)` a view that renders text as text shows verbatim."""
    return f"![x]({host}/leak?f={field}-md) <img src={host}/leak?f={field}-img>"


def _rewrite(value, host: str, field: str):
    """`value` with every string (dict keys excluded) given the payload for `field`."""
    if isinstance(value, str):
        return value + payload(host, field)
    if isinstance(value, list):
        return [_rewrite(v, host, field) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite(v, host, field) for k, v in value.items()}
    return value


def hostile_manifest(m: dict, host: str) -> dict:
    """A copy of manifest `m` with the payload planted in every free-text field."""
    m = json.loads(json.dumps(m))

    def text(s, field):
        return s + payload(host, field)

    kernel = {name: text(name, "kernel") for name in m["kernels"]}
    for a in m["arrays"]:
        for key in ("label", "dtype", "device"):
            a[key] = text(a[key], f"array-{key}")
    kernels = {}
    for name, k in m["kernels"].items():
        k["name"] = kernel[name]
        k["python_source"] = k["python_source"] + "# " + payload(host, "source").replace("\n", " ") + "\n"
        if "source_sha256" in k:
            k["source_sha256"] = source_sha256(k["python_source"])
        for key in ("file", "ir", "adjoint_ir", "passes_device"):
            if k.get(key):
                k[key] = text(k[key], f"kernel-{key}")
        k["code"] = {text(dev, "code-device"): _rewrite(v, host, "code")
                     for dev, v in k.get("code", {}).items()}
        if "passes" in k:
            k["passes"] = {variant: [[text(n, "pass-name")[:200], text(t, "pass-ir")] for n, t in steps]
                           for variant, steps in k["passes"].items()}
        kernels[kernel[name]] = k
    m["kernels"] = kernels
    for la in m["launches"]:
        params = {p: text(p, "param") for p in la["params"]}
        la["kernel"] = kernel[la["kernel"]]
        la["device"] = text(la["device"], "device")
        la["scope"] = [text(s, "scope") for s in la["scope"]] or [text("", "scope")]
        la["params"] = [params[p] for p in la["params"]]
        la["scalars"] = [text(s, "scalar") if isinstance(s, str) else s for s in la["scalars"]]
        if la.get("site"):
            la["site"]["file"] = text(la["site"]["file"], "site")
        for when, per_param in (la.get("stats") or {}).items():
            la["stats"][when] = {params[p]: v for p, v in per_param.items()}
        la.setdefault("_params", params)
    for b in m.get("backward", []):
        params = m["launches"][b["record"]]["_params"]
        b["kernel"] = kernel[b["kernel"]]
        for when, per_param in (b.get("stats") or {}).items():
            b["stats"][when] = {params[p]: v for p, v in per_param.items()}
    for la in m["launches"]:
        del la["_params"]
    m["notes"] = [text(n, "note") for n in m.get("notes") or []] + [payload(host, "note").strip()]
    nan = m.get("nan")
    if nan:
        for key in ("message", "array", "file"):
            if nan.get(key):
                nan[key] = text(nan[key], f"nan-{key}")
        if nan.get("kernel") in kernel:
            nan["kernel"] = kernel[nan["kernel"]]
        for key in ("call_site", "backward_site"):
            if nan.get(key):
                nan[key]["file"] = text(nan[key]["file"], f"nan-{key}")
        origin = nan.get("origin") or {}
        for key in ("op", "file", "text", "grad_of", "array", "call", "description"):
            if origin.get(key):
                origin[key] = text(origin[key], f"origin-{key}")
        for key in ("operands", "result", "primal_operands", "primal_result"):
            if key in origin:
                origin[key] = _rewrite(origin[key], host, f"origin-{key}")
    for h in m.get("hazards") or []:
        h["kind"] = text(h["kind"], "hazard-kind")
        h["message"] = text(h["message"], "hazard-message")
        h["lines"] = [text(line, "hazard-line") for line in h["lines"]]
    if m.get("history"):
        for key in ("norms", "quantiles"):
            m["history"][key] = {text(label, "history-label"): v for label, v in m["history"][key].items()}
    for key in ("graph", "graph_gradients"):
        if m.get(key):
            m[key] = text(m[key], key)
    return m


def hostile_copy(src: pathlib.Path, dst: pathlib.Path, host: str) -> pathlib.Path:
    """Copy the bundle folder `src` to `dst` with `hostile_manifest` applied."""
    shutil.copytree(src, dst)
    m = json.loads((src / "manifest.json").read_text())
    (dst / "manifest.json").write_text(json.dumps(hostile_manifest(m, host), indent=1))
    return dst
