"""Whole programs in `make bench` (issue 43 item 4): the "Real programs" rows beside W1-W7.

Each source is a benchmark module of its own exposing `run(quick: bool = False) -> list[dict]`:

    dialect   dialect_programs.py   Taichi-syntax programs (DiffTaichi's mass_spring, diffmpm, ...) under
                                    Taichi and gradkit.taichi
    warp      warp_programs.py      Warp's example_sph, example_dem, example_diffray, example_mesh under Warp
                                    and gradkit.warp
    sparse    sparse_bench.py       sparse matrix-vector products and CG, taped and its adjoint

Each source runs in a process of its own (`python programs.py --one NAME`), imported lazily there, so a
missing or broken one reads n/a with the reason and the others still run. Their rows, whatever their
own field names, become {source, program, system, first_s, per_iter_s} (seconds; first_s: the first
iteration with its compiles, per_iter_s: the steady state). `markdown(rows)` is the "Real programs"
table: per program, gradkit's and the peer's times and the peer's time over gradkit's (above 1: gradkit
is faster; the issue's goals are 3x per iteration and 5x on the first).

    python benchmarks/programs.py [--quick] [--sources dialect,warp,sparse] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = {"dialect": "dialect_programs", "warp": "warp_programs", "sparse": "sparse_bench"}


def normalise(source: str, row: dict) -> dict:
    """One source row in the common form (see the module docstring)."""
    if "error" in row:
        return {"source": source, "program": row.get("program", source), "system": row.get("system", "—"),
                "error": str(row["error"])}
    first = row.get("first_s", row.get("first_iter_s", row.get("first_step_s")))
    per = row.get("per_iter_s", row.get("per_step_s"))
    program = row.get("program")
    note = None
    if per is None and "ms" in row:                  # sparse_bench: one row per case and library, in ms
        per, program = row["ms"] / 1e3, f"sparse {row['case']}"
        note = "per iter is one call of the case (a product, or a whole solve of the source's iterations)"
    out = {"source": source, "program": program or source, "system": str(row.get("system", "?")),
           "first_s": _number(first), "per_iter_s": _number(per)}
    for key in ("size", "steps"):
        if key in row:
            out[key] = row[key]
    if note:
        out["note"] = note
    return out


def _number(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def load(name: str, spec: str):
    """The module of source `name`: a module name in benchmarks/, or a path to a .py file."""
    if spec.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(f"gk_bench_program_{name}", spec)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return module
    sys.path.insert(0, str(HERE))
    return importlib.import_module(spec)


def run_one(name: str, spec: str, quick: bool) -> list[dict]:
    """Source `name`'s rows, in this process (what `--one` runs)."""
    module = load(name, spec)
    run = getattr(module, "run", None)
    if run is None:
        raise AttributeError(f"{spec} has no run(quick) function")
    return [normalise(name, r) for r in run(quick=quick)]


def run_sources(sources: dict[str, str], quick: bool = False, timeout: float = 3600.0, log=None) -> list[dict]:
    """Every source's rows, each source in a fresh process; a source that cannot be loaded, fails or
    outlasts `timeout` seconds gives one row {source, program, error} instead."""
    rows = []
    for name, spec in sources.items():
        argv = [sys.executable, str(pathlib.Path(__file__).resolve()), "--one", name, "--module", spec]
        if quick:
            argv.append("--quick")
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1"))
        except subprocess.TimeoutExpired:
            rows.append({"source": name, "program": name, "system": "—", "error": f"> {timeout:.0f} s (killed)"})
            continue
        if log is not None:
            log.write(f"\n$ programs.py --one {name}\n{proc.stdout}{proc.stderr}")
        got = [json.loads(line[len("ROW "):]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
        if proc.returncode != 0 or not got:
            tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no rows"])[-1]
            rows.append({"source": name, "program": name, "system": "—",
                         "error": f"{spec}: {tail[:300]}" if proc.returncode else f"{spec}: returned no rows"})
            continue
        rows += got
    return rows


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def markdown(rows: list[dict]) -> str:
    """The "Real programs" table: a line per program (gradkit's system against the other one)."""
    lines = ["### Real programs", "",          # a section of the run's report, beside its ### sections
             "Whole programs as users write them (benchmarks/programs.py): first iteration (with compiles) "
             "and per iteration (steady state). Speed-up: the peer's time over gradkit's (above 1: gradkit "
             "is faster).", "",
             "| program | source | peer | gradkit first | peer first | first speed-up | gradkit per iter | "
             "peer per iter | per-iter speed-up |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    programs: dict[tuple, dict] = {}
    notes = []
    for r in rows:
        key = (r["source"], r["program"])
        if r.get("note") and f"{r['source']}: {r['note']}" not in notes:
            notes.append(f"{r['source']}: {r['note']}")
        if "error" in r:
            notes.append(f"{r['source']}: n/a ({r['error']})")
            lines.append(f"| {r['program']} | {r['source']} | n/a | n/a | n/a | — | n/a | n/a | — |")
            continue
        programs.setdefault(key, {})[r["system"]] = r
    for (source, program), by in programs.items():
        ours = [s for s in by if s.startswith("gradkit")]
        others = [s for s in by if not s.startswith("gradkit")]
        g = by[ours[0]] if ours else {}
        for peer in others or ["—"]:
            p = by.get(peer, {})
            lines.append(f"| {program} | {source} | {peer} | {_fmt(g.get('first_s'))} | {_fmt(p.get('first_s'))} | "
                         f"{_ratio(p.get('first_s'), g.get('first_s'))} | {_fmt(g.get('per_iter_s'))} | "
                         f"{_fmt(p.get('per_iter_s'))} | {_ratio(p.get('per_iter_s'), g.get('per_iter_s'))} |")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _ratio(peer: float | None, ours: float | None) -> str:
    return f"{peer / ours:.2f}x" if peer and ours else "—"


def pick(spec: str) -> dict[str, str]:
    """--sources: "all", or a comma list of names from SOURCES and name=path/to/module.py entries."""
    if spec == "all":
        return dict(SOURCES)
    out = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, path = part.partition("=")
        if path:
            out[name] = path
        elif name in SOURCES:
            out[name] = SOURCES[name]
        else:
            raise SystemExit(f"programs.py: unknown source {name!r} (choose from {', '.join(SOURCES)}, "
                             "or name=path/to/module.py)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="each source's quick sizes")
    ap.add_argument("--sources", default="all", help="all, or a comma list (dialect,warp,sparse,name=file.py)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per source before it is killed")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)       # worker: one source, rows on stdout
    ap.add_argument("--module", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        for row in run_one(args.one, args.module or SOURCES[args.one], args.quick):
            print("ROW " + json.dumps(row), flush=True)
        return 0
    rows = run_sources(pick(args.sources), args.quick, args.timeout)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
