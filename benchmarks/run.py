"""Benchmarks gradkit against NVIDIA Warp, Taichi, Dr.Jit and JAX, side by side (issues 11, 24).

W1 streaming, W2 reduction, W3 n-body, W4 stencil on a tape (forward and gradient each), W5 launch
overhead (plain, taped, the tape's backward), W6 cold start (first W3 gradient in a fresh process with
an empty kernel cache, then with the cache warm), W7 compile time (straight-line kernels of 250-2000
statements, 100 nested ifs, 2000 tiny kernels, each in a fresh process with an empty cache: see
compile_time.py). float32 throughout. Every system's results are
checked against float64 NumPy references before they are timed.

Each system/device runs in its own worker process (worker.py), one after another: the frameworks each
bring their own LLVM, and a process of its own makes the CPU-time figure (parallelism) the system's
alone. A peer that is not installed or fails is reported as n/a with the reason.

    python benchmarks/run.py                          # everything found: gradkit cpu+opencl, the four peers
    python benchmarks/run.py --smoke                  # tiny sizes, 2 runs (CI)
    python benchmarks/run.py --devices cpu --peers none
    python benchmarks/run.py --devices none --peers warp --warp-device cuda   # a GPU machine
    python benchmarks/run.py --devices opencl:1 --peers taichi --taichi-arch cuda --workloads W1,W4
    python benchmarks/run.py --workloads W7 --compile-cases 1000,nested-if    # some compile-time cases
    python benchmarks/run.py --workloads P --program-sources dialect,warp      # whole programs only

P is the "Real programs" table (programs.py: DiffTaichi's and Warp's programs, sparse solves, each source in
a process of its own); full runs include it, --smoke runs only when asked.

Writes bench-results/results.json and bench-results/results.md (and logs/ with each worker's output);
--results-dir also keeps them as <dir>/<date>.json and .md (make bench: benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import signal
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compile_time
import programs
import report
from reference import copy_bandwidth, traffic
from harness import COLD_CASES, COLD_EXTRA, WORKLOAD_CASES

PEERS = {"warp": ("Warp", "warp", "pip install warp-lang (or make bench)"),
         "taichi": ("Taichi", "taichi", "pip install taichi (or make bench)"),
         "drjit": ("Dr.Jit", "drjit", "pip install drjit (or make bench)"),
         "jax": ("JAX", "jax", 'pip install "jax[cpu]" (or make bench)')}


from worker_runs import Progress, Target, WorkerRun, describe, log_file, run_worker  # noqa: E402,F401


# -- choosing what runs ---------------------------------------------------------------------------------

def gradkit_targets(spec: str) -> list[Target]:
    """--devices: "all" (every cpu/opencl device), "none", or a comma list ("cpu,opencl:1")."""
    if spec == "none":
        return []
    if spec == "all":
        try:
            import gradkit as gk
            names = [d.name for d in gk.get_devices() if d.backend in ("cpu", "opencl")]
        except Exception as exc:    # noqa: BLE001 - report rather than crash
            return [Target("gradkit", "cpu", "gradkit cpu", "n/a", f"gradkit failed to load: {exc}")]
    else:
        names = [d.strip() for d in spec.split(",") if d.strip()]
    return [Target("gradkit", n, f"gradkit {n}") for n in names]


def peer_targets(spec: str, devices: dict) -> list[Target]:
    """--peers: "all", "none", or a comma list of warp/taichi/drjit/jax."""
    names = [] if spec == "none" else list(PEERS) if spec == "all" else \
        [p.strip().lower() for p in spec.split(",") if p.strip()]
    targets = []
    for name in names:
        if name not in PEERS:
            raise SystemExit(f"run.py: unknown peer {name!r} (choose from {', '.join(PEERS)})")
        label, module, how = PEERS[name]
        t = Target(name, devices[name], f"{label} {devices[name]}")
        if importlib.util.find_spec(module) is None:
            t.status, t.reason = "n/a", f"not installed ({how})"
        targets.append(t)
    return targets


def bench_target(t: Target, args, workloads: list[str], logs: pathlib.Path, progress: Progress,
                 results: list) -> None:
    """W1-W5 for one target, restarting the worker after a crash with the workloads it had not begun."""
    pending = list(workloads)
    expected = {w: list(WORKLOAD_CASES[w]) for w in workloads}
    with log_file(logs, t) as log:
        while pending and t.status == "ok":
            run = WorkerRun(t, expected, pending, progress, results)
            argv = [t.system, t.device, "--size", args.size, "--repeat", str(args.repeat),
                    "--warmup", str(args.warmup), "--workloads", ",".join(pending)]
            rc = run_worker(argv, log, os.environ, args.timeout, run)
            if t.status != "ok":
                break
            if rc == 0 and run.timed_out is None:
                break                 # done (a workload the system lacks stays pending: no row)
            why = f"no progress for {run.timed_out:.0f} s, killed" if run.timed_out is not None else \
                f"worker exited with code {rc}" + (f" ({signal.Signals(-rc).name})" if rc < 0 else "")
            why += f"; see {log.name}"
            if t.info is None:        # died before it could report anything
                t.status, t.reason = "n/a", why
                break
            if run.current is not None:
                run.record(list(expected[run.current]), {"error": why})


def compile_bytecode() -> None:
    """Write gradkit's and the benchmarks' .pyc files, as any installed package has them (pip compiles
    the peers' at install time; an editable gradkit under PYTHONDONTWRITEBYTECODE=1 would otherwise
    recompile every module in each W6 process, ~90 ms here). Kernel caches stay empty for W6 cold."""
    import compileall
    root = HERE.parent
    compileall.compile_file(str(root / "__init__.py"), quiet=1)
    for sub in ("core", "ad", "runtime", "backends", "viz", "benchmarks"):
        compileall.compile_dir(str(root / sub), quiet=1)


def cold_target(t: Target, args, logs: pathlib.Path, progress: Progress, results: list) -> None:
    """W6: the first W3 gradient in a fresh process, with an empty cache (cold) and then a warm one."""
    if t.system == "gradkit":
        compile_bytecode()
    runs = {case: [] for case in COLD_CASES}
    over_numpy: dict = {}
    walls = {case: [] for case in COLD_CASES}
    errors, failure = {}, None
    with log_file(logs, t) as log:
        for _ in range(args.cold_repeat):
            with tempfile.TemporaryDirectory(prefix="gk-bench-cold-") as tmp:
                # Every cache the stack keeps under the user's cache dir (pyopencl, PoCL, ...) starts empty.
                env = dict(os.environ, XDG_CACHE_HOME=f"{tmp}/xdg", POCL_CACHE_DIR=f"{tmp}/pocl",
                           GRADKIT_CACHE_DIR=f"{tmp}/cache")
                for case in COLD_CASES:                  # cold, then warm on the cache it filled
                    progress.status(f"{t.label}: {case}")
                    events = []
                    t0 = time.perf_counter()
                    rc = run_worker([t.system, t.device, "--size", args.size, "--cold", f"{tmp}/cache"],
                                    log, env, args.timeout, events.append)
                    wall = time.perf_counter() - t0
                    got = next((e for e in events if e["event"] in ("cold", "error", "timeout")), {})
                    if got.get("event") != "cold" or rc != 0:
                        failure = got.get("error") or (f"no progress for {args.timeout:.0f} s, killed"
                                                       if got.get("event") == "timeout" else
                                                       f"worker exited with code {rc}") + f"; see {log.name}"
                        break
                    runs[case].append(got["seconds"])
                    over_numpy.setdefault(case, []).append(got["seconds"] - got.get("numpy_s", 0.0))
                    walls[case].append(wall)
                    errors = got.get("errors", errors)
            if failure:
                break
    for case in COLD_CASES:
        if failure or not runs[case]:
            r = {"system": t.label, "case": case, "error": failure or "not run"}
        else:
            xs = sorted(runs[case])
            r = {"system": t.label, "case": case, "min": xs[0], "median": xs[len(xs) // 2], "unit": "s",
                 "runs": len(xs), "process_wall_s": walls[case], "errors": errors,
                 "note": "seconds of `import numpy`, the framework's import and the first gradient in a fresh "
                         "process (the harness's own imports and input generation left out)"}
        results.append(r)
        progress.advance(describe(r))
    if not failure and over_numpy.get("W6 warm"):
        xs = sorted(over_numpy["W6 warm"])
        r = {"system": t.label, "case": COLD_EXTRA[0], "min": xs[0], "median": xs[len(xs) // 2], "unit": "s",
             "runs": len(xs), "note": "W6 warm less the time `import numpy` took in the same process"}
        results.append(r)
        progress.advance(describe(r))


def compile_target(t: Target, args, cases: list[str], logs: pathlib.Path, progress: Progress,
                   results: list) -> None:
    """W7: each compile-time case in a fresh process with an empty kernel cache (compile_time.py)."""
    if t.system == "gradkit":
        compile_bytecode()
    with log_file(logs, t) as log:
        for case in cases:
            progress.status(f"{t.label}: {case}")
            times, memory, failure, errors = [], [], None, {}
            for _ in range(args.compile_repeat):
                with tempfile.TemporaryDirectory(prefix="gk-bench-w7-") as tmp:
                    env = dict(os.environ, XDG_CACHE_HOME=f"{tmp}/xdg", POCL_CACHE_DIR=f"{tmp}/pocl")
                    events = []
                    rc = run_worker([t.system, t.device, "--compile", case, "--folder", tmp], log, env,
                                    args.compile_timeout, events.append)
                got = next((e for e in events if e["event"] in ("compiled", "error", "timeout")), {})
                if got.get("event") == "timeout":
                    failure = f"> {args.compile_timeout:.0f} s (killed)"
                elif got.get("event") != "compiled" or rc != 0:
                    failure = got.get("error") or f"worker exited with code {rc}; see {log.name}"
                if failure:
                    break
                times.append(got["seconds"])
                memory.append(got["rss_mb"])
                errors = got.get("errors", errors)
            rows = [(case, times, "s")] + ([(compile_time.MEMORY_CASE, memory, "MB")]
                                           if compile_time.CASES[case][0] == "tiny" else [])
            for name, xs, unit in rows:
                if failure:
                    r = {"system": t.label, "case": name, "error": failure}
                else:
                    xs = sorted(xs)
                    r = {"system": t.label, "case": name, "min": xs[0], "median": xs[len(xs) // 2],
                         "unit": unit, "runs": len(xs), "errors": errors,
                         "note": "fresh process, empty kernel cache: first forward launch and gradient"}
                results.append(r)
                progress.advance(describe(r))


# -- main -----------------------------------------------------------------------------------------------

def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes and 2 runs (CI)")
    ap.add_argument("--devices", "--device-filter", dest="devices", default="all",
                    help="gradkit devices: all (default), none, or a comma list such as cpu,opencl:1")
    ap.add_argument("--peers", default="all", help="all (default), none, or a comma list of warp,taichi,drjit,jax")
    ap.add_argument("--warp-device", default="cpu", help="Warp's device: cpu (default) or cuda[:N]")
    ap.add_argument("--jax-device", default="cpu", help="JAX's device: cpu (default) or cuda (JAX with CUDA)")
    ap.add_argument("--taichi-arch", default="cpu", help="Taichi's arch: cpu (default), cuda, vulkan, gpu")
    ap.add_argument("--workloads", default=None,
                    help="comma-separated subset of W1..W7 and P (whole programs); default all (smoke: W1..W7)")
    ap.add_argument("--program-sources", default="all",
                    help="P: all, or a comma list of dialect,warp,sparse and name=path/to/module.py")
    ap.add_argument("--program-timeout", type=float, default=None,
                    help="P: seconds per program source before it is killed (default 3600; smoke 300)")
    ap.add_argument("--results-dir", default=None,
                    help="also write <dir>/<date>.json and <date>.md (make bench: benchmarks/results)")
    ap.add_argument("--compile-cases", default="all",
                    help="W7 cases: all, or a comma list of sizes/names such as 250,1000,nested-if,2000 kernels")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per case (default 7; smoke 2)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 2; smoke 1)")
    ap.add_argument("--cold-repeat", type=int, default=None, help="fresh processes per W6 figure (default 3)")
    ap.add_argument("--timeout", type=float, default=None, help="kill a worker silent this long (s)")
    ap.add_argument("--compile-repeat", type=int, default=None, help="fresh processes per W7 figure (default 1)")
    ap.add_argument("--compile-timeout", type=float, default=None,
                    help="W7: kill a case's process after this long (s; default 600, smoke 120)")
    ap.add_argument("--out", default="bench-results", help="output folder (default bench-results)")
    args = ap.parse_args(argv)
    args.size = "smoke" if args.smoke else "full"
    args.repeat = args.repeat or (2 if args.smoke else 7)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.smoke else 2)
    args.cold_repeat = args.cold_repeat or (1 if args.smoke else 3)
    args.timeout = args.timeout or (120.0 if args.smoke else 900.0)
    args.compile_repeat = args.compile_repeat or 1
    args.compile_timeout = args.compile_timeout or (120.0 if args.smoke else 600.0)
    args.workloads = args.workloads or ("W1,W2,W3,W4,W5,W6,W7" + ("" if args.smoke else ",P"))
    chosen = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in chosen if w not in WORKLOAD_CASES and w not in ("W6", "W7", "P")]
    if unknown:
        ap.error(f"unknown workloads {unknown} (choose from W1..W7 and P)")
    program_sources = programs.pick(args.program_sources) if "P" in chosen else {}
    compile_cases = pick_compile_cases(args.compile_cases, args.smoke) if "W7" in chosen else []
    workloads = [w for w in WORKLOAD_CASES if w in chosen]

    targets = gradkit_targets(args.devices) + \
        peer_targets(args.peers, {"warp": args.warp_device, "taichi": args.taichi_arch, "drjit": "cpu",
                                  "jax": args.jax_device})
    out = pathlib.Path(args.out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for f in logs.glob("*.log"):
        f.unlink()
    n_cases = sum(len(WORKLOAD_CASES[w]) for w in workloads) + (len(COLD_CASES) + 1 if "W6" in chosen else 0)
    n_compile = len(compile_cases) + any(compile_time.CASES[c][0] == "tiny" for c in compile_cases)
    runnable = [t for t in targets if t.status == "ok"]
    extras = 2 * sum(t.system == "gradkit" for t in runnable) if "W1" in workloads else 0  # tangent, ones_like
    progress = Progress(n_cases * len(runnable) + extras +
                        n_compile * sum(t.system in compile_time.DIALECTS for t in runnable))
    for t in targets:
        if t.status != "ok":
            print(f"{t.label}: n/a ({t.reason})", flush=True)
    results: list[dict] = []
    started = time.time()
    program_rows = None
    try:
        for t in runnable:
            if workloads:
                bench_target(t, args, workloads, logs, progress, results)
            if "W6" in chosen and t.status == "ok":
                cold_target(t, args, logs, progress, results)
            if compile_cases and t.status == "ok" and t.system in compile_time.DIALECTS:   # W7: not Dr.Jit, JAX
                compile_target(t, args, compile_cases, logs, progress, results)
            if t.status != "ok":
                print(f"{t.label}: n/a ({t.reason})", flush=True)
        if program_sources:
            progress.status("P: real programs")
            with open(logs / "programs.log", "a") as log:
                program_rows = programs.run_sources(program_sources, quick=args.smoke,
                                                    timeout=args.program_timeout or (300.0 if args.smoke else 3600.0),
                                                    log=log)
            for r in program_rows:
                print(f"P {r['source']:<8} {r['program']:<20} {r['system']:<16} " +
                      (f"n/a ({r['error'][:160]})" if "error" in r else
                       f"first {programs._fmt(r['first_s'])}, per iteration {programs._fmt(r['per_iter_s'])}"),
                      flush=True)
    finally:
        progress.close()

    doc = {
        "meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
                 "cpus": os.cpu_count(), "size": args.size, "sizes": _sizes(args.size),
                 "copy_gbs": round(copy_bandwidth(), 1), "traffic": traffic(_sizes(args.size)),
                 "cases": [c for w in workloads for c in WORKLOAD_CASES[w]] +
                          (COLD_CASES + COLD_EXTRA if "W6" in chosen else []) + compile_cases,
                 "repeat": args.repeat, "warmup": args.warmup, "cold_repeat": args.cold_repeat,
                 "elapsed_s": round(time.time() - started, 1),
                 "argv": sys.argv[1:] if argv is None else argv},
        "systems": [{"label": t.label, "system": t.system, "device": t.device, "status": t.status,
                     "reason": t.reason, "version": (t.info or {}).get("version"),
                     "device_desc": (t.info or {}).get("device")} for t in targets],
        "results": results,
    }
    if program_rows is not None:
        doc["programs"] = program_rows
    js, md = report.write(doc, out)
    if args.results_dir:
        keep = pathlib.Path(args.results_dir)
        keep.mkdir(parents=True, exist_ok=True)
        day = doc["meta"]["date"][:10]
        (keep / f"{day}.json").write_text(js.read_text())
        (keep / f"{day}.md").write_text(md.read_text())
        print(f"kept as {keep / day}.json and .md")
    print()
    print(md.read_text())
    print(f"wrote {js} and {md} ({doc['meta']['elapsed_s']} s)")
    return 0


def pick_compile_cases(spec: str, smoke: bool) -> list[str]:
    """--compile-cases: "all" (smoke runs: the smallest straight-line kernel only) or a
    comma list naming cases by their suffix (250, n=1000, nested-if, 2000 kernels)."""
    cases = list(compile_time.CASES)
    if spec == "all":
        return cases[:1] if smoke else cases
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        match = [c for c in cases if c.split(" ", 1)[1] in (part, f"n={part}")]
        if not match:
            raise SystemExit(f"run.py: unknown W7 case {part!r} (choose from "
                             f"{', '.join(c.split(' ', 1)[1] for c in cases)})")
        out += match
    return out


def _sizes(size: str) -> dict:
    from reference import SIZES
    return SIZES[size]


if __name__ == "__main__":
    sys.exit(main())
