"""README's benchmark table from one `make bench` run: each workload a row, forward / backward (or W5's three
cases, W6's cold / warm, W7's sizes) in one cell per system, and gradkit cpu's ratio to the best peer.

    python benchmarks/readme_table.py bench-results/results.json > table.md
"""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from report import fmt  # noqa: E402

ROWS = [
    ("W1 streaming 2^24 (`sin`), forward / backward", ["W1 forward", "W1 backward"]),
    ("W1 backward seeded as users write it, grads={y: ones_like(y)}", ["W1 backward: grads=ones_like"]),
    ("W2 atomic sum 2^24, forward / backward", ["W2 forward", "W2 backward"]),
    ("W3 n-body 2048, forward / backward", ["W3 forward", "W3 backward"]),
    ("W4 heat 1024² × 16 steps, forward / backward", ["W4 forward", "W4 backward"]),
    ("floors: W1 copy / accumulate, W4 17 gradients / 2 buffers (the bytes alone)",
     ["W1 floor: copy", "W1 floor: accumulate", "W4 floor: 17 gradients", "W4 floor: 2 buffers"]),
    ("W5 1-thread launch, plain / taped / backward (µs)", ["W5 plain", "W5 taped", "W5 backward"]),
    ("W6 first W3 gradient in a fresh process, cold / warm cache (s)", ["W6 cold", "W6 warm"]),
    ("W7 compile, n = 250 / 500 / 1000 / 2000 statements (s)", ["W7 n=250", "W7 n=500", "W7 n=1000", "W7 n=2000"]),
    ("W7 100 nested ifs (s)", ["W7 nested-if"]),
    ("W7 2000 tiny kernels: s / memory growth (MB)", ["W7 2000 kernels", "W7 2000 kernels memory"]),
]
OURS = "gradkit cpu"


def table(doc: dict) -> str:
    systems = [s for s in doc["systems"] if s["status"] == "ok"]
    labels = [s["label"] for s in systems]
    by = {(r["system"], r["case"]): r for r in doc["results"]}

    def figure(label: str, case: str) -> str:
        r = by.get((label, case))
        if r is None:
            return "—"
        return "error" if "error" in r else fmt(r["min"])

    def ratio(cases: list[str]) -> str:
        """gradkit cpu's time over the fastest peer's, per case (below 1: gradkit is faster)."""
        out = []
        for case in cases:
            ours = by.get((OURS, case), {}).get("min")
            peers = [(by[(p, case)]["min"], p.split()[0]) for p in labels
                     if not p.startswith("gradkit") and "min" in by.get((p, case), {})]
            if ours is None or not peers or case.endswith("memory"):
                out.append("—")
                continue
            best, who = min(peers)
            out.append(f"{ours / best:.2f} ({who})")
        return " / ".join(out)

    head = ["workload"] + [f"{s['label']} ({s.get('version') or '?'})" for s in systems] + [f"{OURS} ÷ best peer"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for title, cases in ROWS:
        if not any((label, case) in by for label in labels for case in cases):
            continue
        cells = [" / ".join(figure(label, c) for c in cases) for label in labels]
        lines.append("| " + " | ".join([title, *cells, ratio(cases)]) + " |")
    meta = doc["meta"]
    lines += ["", f"One `make bench` run, {meta['date'][:10]}: {meta['machine']}; minimum of {meta['repeat']} runs "
              f"(ms unless noted), every result checked against float64 NumPy first; copy bandwidth "
              f"{meta.get('copy_gbs', '?')} GB/s."]
    if doc.get("programs"):                       # the run's "Real programs" rows (programs.py)
        from programs import markdown as programs_table
        lines += ["", programs_table(doc["programs"]).replace("### Real programs", "**Real programs**", 1).rstrip()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(json.loads(open(sys.argv[1] if len(sys.argv) > 1 else "bench-results/results.json").read())), end="")
