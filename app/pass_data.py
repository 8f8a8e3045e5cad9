"""The debugger's Passes tab, from a bundle's stored pass logs: each pass's IR before and after, and their diff."""

from __future__ import annotations

import difflib

from ..viz.bundle import Bundle

PASS_VARIANTS = ("forward", "adjoint")
TRUNCATED = "… [truncated: "      # how save_bundle ends a pass-log text it cut to fit its cap


def pass_variants(bundle: Bundle, kernel: str) -> list[str]:
    """The variants whose pass logs the bundle stores for `kernel`: forward and adjoint first, then those
    its launches ran (adjoint_gather, adjoint_consume, ...); the two defaults for a bundle without logs."""
    stored = bundle.manifest["kernels"][kernel].get("passes")
    if not stored:
        return list(PASS_VARIANTS)
    return [v for v in PASS_VARIANTS if v in stored] + sorted(v for v in stored if v not in PASS_VARIANTS)


def pass_steps(bundle: Bundle, kernel: str, variant: str) -> list[dict] | None:
    """The stored pass log building `variant` of `kernel`, one dict per step: {"index", "name", "text",
    "changed"} (changed: its IR differs from the step before; the first step, the typed IR, is the input).

    None when the bundle predates pass logs; [] when it holds none for this variant (a kernel declared with
    enable_backward=False has no adjoint log)."""
    meta = bundle.manifest["kernels"][kernel]
    if "passes" not in meta:
        return None
    steps, previous = [], None
    for k, (name, text) in enumerate(meta["passes"].get(variant, [])):
        steps.append({"index": k, "name": name, "text": text, "changed": text != previous})
        previous = text
    return steps


def first_change(steps: list[dict]) -> int:
    """The step the Passes tab opens on: the first pass that changed the IR (the input when none did)."""
    return next((s["index"] for s in steps if s["index"] > 0 and s["changed"]), 0)


def pass_diff(before: str, after: str, before_name: str = "before", after_name: str = "after",
              context: int = 3) -> str:
    """The unified diff (difflib) from `before` to `after`; "" when they are equal."""
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name,
                                          n=context, lineterm=""))


def pass_step(bundle: Bundle, kernel: str, variant: str, index: int) -> dict:
    """What the Passes tab shows for step `index`: {"name", "after", "before" (None for the first step),
    "before_name", "diff", "changed", "truncated"}."""
    steps = pass_steps(bundle, kernel, variant) or []
    step = steps[index]
    prev = steps[index - 1] if index > 0 else None
    out = {"name": step["name"], "after": step["text"], "before": None, "before_name": None,
           "changed": step["changed"], "diff": ""}
    if prev is not None:
        out.update(before=prev["text"], before_name=prev["name"],
                   diff=pass_diff(prev["text"], step["text"], f"{prev['index']}. {prev['name']}",
                                  f"{index}. {step['name']}"))
    out["truncated"] = any(TRUNCATED in (t or "") for t in (out["before"], out["after"]))
    return out


def pass_device(bundle: Bundle, kernel: str) -> str | None:
    """The device whose backend stage the kernel's pass logs include (None: typed IR to variant only)."""
    return bundle.manifest["kernels"][kernel].get("passes_device")
