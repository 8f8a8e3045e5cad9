"""Writing the results: bench-results/results.json (everything measured) and results.md (the tables).

The JSON document:

    {"meta": {...machine, sizes, repeats, versions...},
     "systems": [{"label": "Warp cpu", "system": "warp", "device": "cpu", "status": "ok" | "n/a",
                  "reason": ..., "version": ..., "device_desc": ...}, ...],
     "results": [{"system": "Warp cpu", "case": "W3 backward", "min": ..., "median": ..., "unit": "ms",
                  "parallelism": ..., "runs": ..., "errors": {check: relative error}}
                 | {"system": ..., "case": ..., "error": "why it has no figure"}, ...]}
"""

from __future__ import annotations

import json
import pathlib

import compile_time
from harness import COLD_CASES, COLD_EXTRA, WORKLOAD_CASES

UNITS = {"ms": "ms", "us": "µs/launch", "s": "s", "MB": "MB"}


def case_order(results, planned=()) -> list[str]:
    """Every case planned or measured, in the canonical order (extras such as gradkit's W1 tangent after
    their workload's cases)."""
    seen = {r["case"] for r in results} | set(planned)
    order = []
    for workload, cases in WORKLOAD_CASES.items():
        order += [c for c in cases if c in seen]
        order += sorted(c for c in seen if c.startswith(workload + " ") and c not in cases)
    order += [c for c in COLD_CASES if c in seen]
    order += [c for c in COLD_EXTRA if c in seen]
    for case in compile_time.CASES:
        order += [c for c in (case, compile_time.MEMORY_CASE) if c in seen and c not in order
                  and (c == case or compile_time.CASES[case][0] == "tiny")]
    return order


def fmt(v: float) -> str:
    """A figure with three significant digits or so (no exponent above 1)."""
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def markdown(doc: dict) -> str:
    meta, systems, results = doc["meta"], doc["systems"], doc["results"]
    labels = [s["label"] for s in systems]
    is_peer = {s["label"]: s["system"] != "gradkit" for s in systems}
    ours = [s["label"] for s in systems if s["system"] == "gradkit" and s["status"] == "ok"]
    by = {(r["system"], r["case"]): r for r in results}
    na = {s["label"]: s for s in systems if s["status"] != "ok"}
    notes: list[str] = []

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    def cell(label: str, case: str, key: str = "min") -> str:
        if label in na:
            return "n/a " + note(f"{label}: {na[label]['reason']}")
        r = by.get((label, case))
        if r is None:
            return "—"
        if "error" in r:
            return "error " + note(f"{label}, {case}: {r['error']}")
        return fmt(r[key])

    def best_peer(case: str):
        figures = [(by[(p, case)]["min"], p) for p in labels
                   if is_peer[p] and "min" in by.get((p, case), {})]
        return min(figures) if figures else None

    lines = [f"# gradkit vs NVIDIA Warp, Taichi, Dr.Jit and JAX ({meta['size']} sizes)", ""]
    lines.append(f"{meta['machine']}; {meta['date']}. Every result (values and gradients) was checked "
                 f"against a float64 NumPy reference before timing; figures are the **minimum** over "
                 f"{meta['repeat']} runs after {meta['warmup']} warm-up runs (median in the second "
                 f"table). W6 is one fresh process per run ({meta['cold_repeat']} runs): `import numpy`, the "
                 f"framework's import and its first W3 gradient; W7 one fresh "
                 f"process with an empty kernel cache per case (seconds to the first gradient, framework "
                 f"import excluded).")
    lines.append("")
    lines.append("Systems: " + "; ".join(
        f"**{s['label']}** ({s.get('version', '?')}, {s.get('device_desc', s['device'])})"
        for s in systems if s["status"] == "ok") + ".")
    lines.append("")

    order = case_order(results, meta.get("cases", ()))
    head = ["case", "unit"] + labels + [f"{g} ÷ best peer" for g in ours]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for case in order:
        unit = next((by[(s, case)]["unit"] for s in labels if "unit" in by.get((s, case), {})),
                    {"W5": "us", "W6": "s", "W7": "s"}.get(case.split()[0], "ms"))
        row = [case, UNITS.get(unit, unit)] + [cell(s, case) for s in labels]
        peer = best_peer(case)
        for g in ours:
            r = by.get((g, case), {})
            if peer is None or "min" not in r:
                row.append("—")
            else:
                row.append(f"{r['min'] / peer[0]:.2f} ({peer[1].split()[0]})")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Ratios are gradkit's time over the faster peer's: below 1 gradkit is faster.", ""]

    lines += bandwidth_table(meta, labels, by, order)
    lines += ["### Median and CPU parallelism", "",
              ("Median time, and the process's CPU time ÷ wall time during the timed runs (how many of "
               f"the {meta['cpus']} cores the system kept busy)."), ""]
    head = ["case"] + [f"{s} median" for s in labels] + [f"{s} parallelism" for s in labels]
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for case in order:
        row = [case] + [cell(s, case, "median") for s in labels]
        row += [cell(s, case, "parallelism") if (s, case) in by and "parallelism" in by[(s, case)]
                else "—" for s in labels]
        lines.append("| " + " | ".join(row) + " |")
    if doc.get("programs") is not None:          # the "Real programs" table (programs.py)
        import programs
        lines += ["", programs.markdown(doc["programs"])]
    if notes:
        lines += ["", "Notes:", ""] + [f"{i + 1}. {text}" for i, text in enumerate(notes)]
    return "\n".join(lines) + "\n"


def bandwidth_table(meta: dict, labels: list[str], by: dict, order: list[str]) -> list[str]:
    """Effective bandwidth of the memory-bound cases: the least bytes each must move (reference.traffic)
    over the minimum time, beside this machine's copy bandwidth (the ceiling)."""
    traffic, copy = meta.get("traffic") or {}, meta.get("copy_gbs")
    cases = [c for c in order if c in traffic]
    if not cases or not copy:
        return []
    lines = ["### Effective bandwidth", "",
             (f"GB/s: the bytes a case must move at least (one read of every input element, one write of every "
              f"output element, per step for W4) over its minimum time. NumPy copies {copy:.1f} GB/s on this "
              f"machine (read + write); a case near that figure is memory-bound, and only moving fewer "
              f"bytes makes it faster."), ""]
    head = ["case", "MB"] + labels
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for case in cases:
        row = [case, fmt(traffic[case] / 1e6)]
        for s in labels:
            r = by.get((s, case), {})
            row.append(fmt(traffic[case] / (r["min"] * 1e-3) / 1e9) if "min" in r and r.get("unit") == "ms"
                       else "—")
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def write(doc: dict, out: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "results.json", out / "results.md"
    js.write_text(json.dumps(doc, indent=2) + "\n")
    md.write_text(markdown(doc))
    return js, md
