"""Taichi programs under `gradkit.taichi` and under Taichi: time per iteration and first iteration.

    python benchmarks/dialect_programs.py [--quick] [--programs spring_robot,mls_mpm] [--iters 4] [--rounds 2]
    python benchmarks/dialect_programs.py --src PATH/difftaichi/examples [--programs mass_spring,billiards]
                                          [--iters 4] [--rounds 2] [--modules gradkit.taichi,taichi]
                                          [--baseline PYTHONPATH] [--cache cold|warm|as-is] [--json out.json]

Without --src it times this repository's own Taichi-syntax programs (tests/dialects/difftaichi_style.py,
written for gradkit, no network needed): `spring_robot`, a DiffTaichi-style mass-spring robot (a
@ti.data_oriented class, a struct field of springs, `ti.ad.Tape`), and `mls_mpm`, a 2-D MLS-MPM (p2g / grid /
g2p over a 3x3 stencil with vector indexing, diffmpm's recompute-then-`kernel.grad()` backward), float32, at
the sizes in OWN_SIZES; one iteration = forward and backward. `run(quick=False)` does this from Python and
returns rows {program, system, first_iter_s, per_iter_s, size, steps} (what `make bench` collects).

With --src (or DIFFTAICHI_EXAMPLES) it runs DiffTaichi's own examples instead; their sources are not part of
this repository (a clone of taichi-dev/difftaichi's `examples/`). Each program runs as written with only its
import line changed (`import taichi as ti` -> `import gradkit.taichi as ti`), the GUI lines off and `arch`
set to the CPU, at its own sizes; one iteration = the program's own training step: its `forward` under
`ti.ad.Tape(loss)` (forward, then backward) and a parameter update.

Either way each run is a fresh process (so the first iteration includes translation and compilation) and
`--cache` says what each system finds on disk: `cold` (the default, and what `make bench` runs) gives every
run empty kernel caches of its own (GRADKIT_CACHE_DIR, TI_OFFLINE_CACHE_FILE_PATH), so the first iteration
compiles everything; `warm` shares one cache per system across the runs, filled by an untimed run first, so
the first iteration compiles nothing the disk holds; `as-is` leaves the user's own caches as they are. Runs of the systems alternate (round-robin) so that a busy machine
slows them alike. Reported per program and system: loading the program (imports, fields; the first
iteration's translation and compilation come after), the first iteration, and the median and minimum of the
later ones, in wall time and in the process's CPU time (robust to other load on the machine; a runtime whose
idle threads spin counts them). `--baseline [LABEL=]PATH` (repeatable) adds `gradkit.taichi` imported from another checkout
(PYTHONPATH=PATH, where PATH/gradkit is that checkout), to compare versions of gradkit; `--modules taichi`
leaves out the installed one.
DP_PROFILE=FOLDER in the environment makes each worker write cProfile statistics of its first iteration
and of iteration DP_PROFILE_ITER (default 2) to FOLDER/<program>.<iteration>.prof (where the time goes).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
import types

PROGRAMS = ("mass_spring", "billiards", "electric", "rigid_body")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWN_PROGRAMS = {"spring_robot": "SPRING_ROBOT", "mls_mpm": "MPM"}      # name -> text in difftaichi_style.py
OWN_SIZES = {"spring_robot": dict(FP="ti.f32", N_OBJ=24, STEPS=512),
             "mls_mpm": dict(FP="ti.f32", N_PART=4096, N_GRID=64, STEPS=64)}
QUICK_SIZES = {"spring_robot": dict(FP="ti.f32", N_OBJ=12, STEPS=64),
               "mls_mpm": dict(FP="ti.f32", N_PART=512, N_GRID=32, STEPS=16)}

GUI_OFF = [
    ('gui = ti.GUI("Mass Spring Robot", (512, 512), background_color=0xFFFFFF)', "gui = None"),
    ("gui = ti.GUI('Rigid Body Simulation', (512, 512), background_color=0xFFFFFF)", "gui = None"),
    ('gui = ti.GUI("Billiards", (1024, 1024), background_color=0x3C733F)', "gui = None"),
    ('gui = ti.GUI("Electric", (512, 512), background_color=0x3C733F)', "gui = None"),
]


# --------------------------------------------------------------------------- one run (a worker process)

def _program_text(src: str, prog: str, module: str) -> str:
    text = open(os.path.join(src, f"{prog}.py")).read()
    if "import taichi as ti" not in text:
        raise SystemExit(f"{prog}.py does not `import taichi as ti`")
    text = text.replace("import taichi as ti", f"import {module} as ti", 1)
    for old, new in GUI_OFF:
        text = text.replace(old, new)
    return text.replace("arch=ti.gpu", "arch=ti.cpu").replace("arch=ti.cuda", "arch=ti.cpu")


def _own_text(prog: str, module: str, quick: bool) -> str:
    """One of this repository's Taichi-syntax programs at the benchmark's sizes, importing `module`."""
    import importlib.util
    path = os.path.join(ROOT, "tests", "dialects", "difftaichi_style.py")
    spec = importlib.util.spec_from_file_location("gk_taichi_programs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = mod.program(getattr(mod, OWN_PROGRAMS[prog]), **(QUICK_SIZES if quick else OWN_SIZES)[prog])
    return text.replace("import taichi as ti", f"import {module} as ti", 1)


def own_worker(prog: str, module: str, iters: int, quick: bool) -> dict:
    """Run one of our own programs for `iters` iterations (its `iterate`: forward and backward)."""
    with tempfile.TemporaryDirectory(prefix="tp_") as work:      # kernels read their source at first call
        path = os.path.join(work, f"{prog}.py")
        with open(path, "w") as f:
            f.write(_own_text(prog, module, quick))
        wall0, cpu0 = time.perf_counter(), time.process_time()
        g = runpy.run_path(path, run_name=f"tp_{prog}")
        g["setup"](0)
        out = {"load_wall": time.perf_counter() - wall0, "load_cpu": time.process_time() - cpu0,
               "wall": [], "cpu": [], "loss": []}
        for k in range(iters):
            prof = _profiler(k)
            w, c = time.perf_counter(), time.process_time()
            out["loss"].append(float(g["iterate"]()))
            out["wall"].append(time.perf_counter() - w)
            out["cpu"].append(time.process_time() - c)
            _profiled(prof, prog, k)
    return out


def _profiler(k: int):
    """A running cProfile.Profile when DP_PROFILE (a folder) is set and iteration `k` is the first or
    DP_PROFILE_ITER (default 2): where an iteration's time goes, for the worker that runs it."""
    if not os.environ.get("DP_PROFILE") or k not in (0, int(os.environ.get("DP_PROFILE_ITER", "2"))):
        return None
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
    return prof


def _profiled(prof, prog: str, k: int) -> None:
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.path.join(os.environ["DP_PROFILE"], f"{prog}.{k}.prof"))


def worker(src: str, prog: str, module: str, iters: int) -> dict:
    """Run `prog` for `iters` training iterations; returns per-iteration wall and CPU seconds and losses."""
    import numpy as np
    for name in ("cv2", "imageio"):                 # image libraries the programs import for their GUI output
        stub = types.ModuleType(name)
        stub.imread = stub.imwrite = stub.imshow = stub.waitKey = stub.resize = lambda *a, **k: None
        sys.modules.setdefault(name, stub)
    sys.path.insert(0, src)                         # mass_spring and rigid_body import their robot configs
    work = tempfile.mkdtemp(prefix="dt_")
    path = os.path.join(work, f"{prog}.py")
    with open(path, "w") as f:
        f.write(_program_text(src, prog, module))
    sys.argv = {"mass_spring": ["x", "0", "train"], "rigid_body": ["x", "0", "train"]}.get(prog, ["x"])
    wall0, cpu0 = time.perf_counter(), time.process_time()
    ns = runpy.run_path(path, run_name=f"dt_{prog}")
    g = next(v for v in ns.values() if isinstance(v, types.FunctionType)
             and v.__module__ == f"dt_{prog}").__globals__
    ti = sys.modules[module]
    out = {"load_wall": time.perf_counter() - wall0, "load_cpu": time.process_time() - cpu0,
           "wall": [], "cpu": [], "loss": []}

    def sgd(names, lr, clip=None):
        grads = {n: g[n].grad.to_numpy() for n in names}
        scale = lr
        if clip is not None:
            scale = clip / (sum(float((v.astype(np.float64) ** 2).sum()) for v in grads.values()) ** 0.5 + 1e-6)
        for n in names:
            value = g[n].to_numpy()
            g[n].from_numpy((value - scale * grads[n]).astype(value.dtype))

    def iterate(pre, forward, loss, update):
        for k in range(iters):
            prof = _profiler(k)
            w, c = time.perf_counter(), time.process_time()
            pre()
            with ti.ad.Tape(loss):
                forward()
            out["loss"].append(float(loss[None]))
            update()
            out["wall"].append(time.perf_counter() - w)
            out["cpu"].append(time.process_time() - c)
            _profiled(prof, prog, k)

    if prog in ("mass_spring", "rigid_body"):
        g["setup_robot"](*g["robots"][0]())
        rng = np.random.RandomState(0)
        g["weights1"].from_numpy(rng.randn(g["n_hidden"], g["n_input_states"]()) * 0.3)
        g["weights2"].from_numpy(rng.randn(g["n_springs"], g["n_hidden"]) * 0.3)
        g["use_toi"] = prog == "rigid_body"
        names = ["weights1", "bias1", "weights2", "bias2"]
        iterate(g["clear"] if prog == "mass_spring" else g["clear_states"],
                lambda: g["forward"](visualize=False), g["loss"], lambda: sgd(names, 0, clip=0.2))
    elif prog == "billiards":
        g["init_x"][None] = [0.1, 0.5]
        g["init_v"][None] = [0.3, 0.0]

        def update():
            lr = g["learning_rate"]
            for d in range(2):
                g["init_x"][None][d] -= lr * g["init_x"].grad[None][d]
                g["init_v"][None][d] -= lr * g["init_v"].grad[None][d]
        iterate(g["clear"], lambda: g["forward"](visualize=False), g["loss"], update)
    elif prog == "electric":
        import random
        random.seed(0)
        g["allocate_fields"]()
        for i in range(8):
            for j in range(g["n_hidden"]):
                g["weight1"][i, j] = (random.random() - 0.5) * 0.3
        for i in range(g["n_hidden"]):
            for j in range(g["n_gravitation"]):
                g["weight2"][i, j] = (random.random() - 0.5) * 0.3
        names = ["weight1", "bias1", "weight2", "bias2"]
        iterate(g["initialize"], lambda: g["forward"](visualize=False), g["loss"],
                lambda: sgd(names, g["learning_rate"]))
    else:
        raise SystemExit(f"unknown program {prog!r}; this benchmark drives {', '.join(PROGRAMS)}")
    return out


# --------------------------------------------------------------------------- the comparison

CACHE_MODES = ("cold", "warm", "as-is")


def _cache_env(folder: str) -> dict:
    """Environment that points both systems' on-disk kernel caches into `folder` (created 0700)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return {"GRADKIT_CACHE_DIR": os.path.join(folder, "gradkit"),
            "TI_OFFLINE_CACHE_FILE_PATH": os.path.join(folder, "taichi")}


def _run(src, prog, target, iters, timeout, quick=False, env_extra=None) -> dict | None:
    module, pythonpath = target
    env = dict(os.environ)
    env.update(env_extra or {})
    if not src:
        env.pop("DIFFTAICHI_EXAMPLES", None)       # the worker's --src default: our own programs need none
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", prog, module, str(iters)]
    cmd += ["--src", src] if src else ["--quick"] if quick else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        print(f"  {prog} {module}: timed out after {timeout} s", file=sys.stderr)
        return None
    line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        print(f"  {prog} {module}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(line[len("RESULT "):])


def _summary(runs: list[dict]) -> dict:
    later_wall = [t for r in runs for t in r["wall"][1:]]
    later_cpu = [t for r in runs for t in r["cpu"][1:]]
    # steady state: the later half of each run's iterations (the CPU backend compiles a busy kernel's
    # optimised code during its first few dozen launches, which can fall in iterations 2-3)
    steady = [t for r in runs for t in r["wall"][max(1, len(r["wall"]) // 2):]]
    return {"load_wall": statistics.median(r["load_wall"] for r in runs),
            "steady_wall": statistics.median(steady) if steady else None,
            "first_wall": statistics.median(r["wall"][0] for r in runs),
            "first_cpu": statistics.median(r["cpu"][0] for r in runs),
            "iter_wall": statistics.median(later_wall) if later_wall else None,
            "iter_wall_min": min(later_wall) if later_wall else None,
            "iter_cpu": statistics.median(later_cpu) if later_cpu else None,
            "iter_cpu_min": min(later_cpu) if later_cpu else None,
            "loss": runs[0]["loss"]}


def _available(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def compare(src, programs, targets: dict, iters: int, rounds: int, timeout: float, quick: bool = False,
            cache: str = "as-is") -> dict:
    """{program: {system: summary}}, each run a fresh process, the systems alternating within a round;
    `cache` one of CACHE_MODES (module docstring)."""
    if cache not in CACHE_MODES:
        raise ValueError(f"cache={cache!r}: one of {', '.join(CACHE_MODES)}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="dp_cache_") as caches:
        for prog in programs:
            runs = {name: [] for name in targets}
            if cache == "warm":             # one untimed run per system fills its shared cache
                for k, (name, target) in enumerate(targets.items()):
                    _run(src, prog, target, 1, timeout, quick, _cache_env(os.path.join(caches, f"warm{k}")))
            for r_ in range(rounds):
                for k, (name, target) in enumerate(targets.items()):
                    env = {} if cache == "as-is" else _cache_env(
                        os.path.join(caches, f"warm{k}" if cache == "warm" else f"cold_{prog}_{r_}_{k}"))
                    r = _run(src, prog, target, iters, timeout, quick, env)
                    if r is not None:
                        runs[name].append(r)
            results[prog] = {name: _summary(rs) for name, rs in runs.items() if rs}
    return results


def run(quick: bool = False, cache: str = "cold") -> list[dict]:
    """Our own Taichi-syntax programs under gradkit.taichi and Taichi (when installed), alternating, and
    DiffTaichi's own (PROGRAMS) when $DIFFTAICHI_EXAMPLES names a clone's examples folder: rows
    {program, system, first_iter_s, per_iter_s, size, steps} (wall seconds; per_iter_s the median of the later
    iterations' later half: steady state, after the first iterations' compiles; first_iter_s with empty kernel
    caches unless `cache` says otherwise). `quick`: smaller programs, 6 iterations, one round."""
    targets = {m: (m, None) for m in ("gradkit.taichi", "taichi") if m == "gradkit.taichi" or _available(m)}
    results = compare(None, list(OWN_PROGRAMS), targets, 6 if quick else 8, 1 if quick else 2,
                      300.0 if quick else 900.0, quick, cache)
    sizes = QUICK_SIZES if quick else OWN_SIZES
    rows = [{"program": prog, "system": name, "first_iter_s": s["first_wall"], "per_iter_s": s["steady_wall"],
             "size": _size_text(prog, sizes[prog]), "steps": sizes[prog]["STEPS"]}
            for prog, by in results.items() for name, s in by.items()]
    rows += _failed(results, OWN_PROGRAMS, targets, "")
    src = os.environ.get("DIFFTAICHI_EXAMPLES")
    if src and os.path.isdir(src) and not quick:       # DiffTaichi's own programs, as written, when at hand
        theirs = compare(os.path.abspath(src), list(PROGRAMS), targets, 5, 1, 900.0, False, cache)
        rows += [{"program": f"difftaichi {prog}", "system": name, "first_iter_s": s["first_wall"],
                  "per_iter_s": s["steady_wall"], "size": "its own sizes, float32", "steps": None}
                 for prog, by in theirs.items() for name, s in by.items()]
        rows += _failed(theirs, PROGRAMS, targets, "difftaichi ")
    return rows


def _failed(results: dict, programs, targets: dict, prefix: str) -> list[dict]:
    """An error row per program and system that gave no result (its stderr was printed), so that a failed run
    reads n/a in the report instead of leaving no row."""
    return [{"program": f"{prefix}{prog}", "system": name, "error": "the run failed (see the run's stderr)"}
            for prog in programs for name in targets if name not in results.get(prog, {})]


def _size_text(prog: str, size: dict) -> str:
    if prog == "spring_robot":
        return f"{size['N_OBJ']} objects, float32"
    return f"{size['N_PART']} particles, {size['N_GRID']}^2 grid, float32"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.environ.get("DIFFTAICHI_EXAMPLES"),
                    help="folder with DiffTaichi's examples (default: $DIFFTAICHI_EXAMPLES)")
    ap.add_argument("--programs", default=None,
                    help=f"default: {','.join(OWN_PROGRAMS)}; with --src {','.join(PROGRAMS)}")
    ap.add_argument("--quick", action="store_true", help="our own programs at small sizes")
    ap.add_argument("--modules", default="gradkit.taichi,taichi")
    ap.add_argument("--baseline", action="append", default=[], metavar="[LABEL=]PYTHONPATH",
                    help="PYTHONPATH of another gradkit checkout to compare with (repeatable; LABEL names it)")
    ap.add_argument("--iters", type=int, default=4, help="iterations per run (the first includes compiles)")
    ap.add_argument("--rounds", type=int, default=2, help="fresh processes per program and system")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--cache", choices=CACHE_MODES, default="cold",
                    help="kernel caches on disk: empty per run (cold), shared and filled first (warm), or the user's")
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--worker", nargs=3, metavar=("PROG", "MODULE", "ITERS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.src and not os.path.isdir(args.src):
        ap.error(f"--src {args.src}: not a folder (DiffTaichi's examples)")
    src = os.path.abspath(args.src) if args.src else None
    if args.worker:
        prog, module, iters = args.worker
        result = worker(src, prog, module, int(iters)) if src else own_worker(prog, module, int(iters), args.quick)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    programs = [p for p in (args.programs or ",".join(PROGRAMS if src else OWN_PROGRAMS)).split(",") if p]
    known = PROGRAMS if src else tuple(OWN_PROGRAMS)
    if any(p not in known for p in programs):
        ap.error(f"--programs: choose from {', '.join(known)}" + ("" if src else " (or pass --src)"))
    targets = {m: (m, None) for m in args.modules.split(",") if m and (m == "gradkit.taichi" or _available(m))}
    for spec in args.baseline:
        label, _, path = spec.rpartition("=")
        targets[f"gradkit.taichi ({label or 'baseline'})"] = ("gradkit.taichi", os.path.abspath(path))
    results = compare(src, programs, targets, args.iters, args.rounds, args.timeout, args.quick, args.cache)
    print(f"kernel caches: {args.cache}")
    print("| program | system | program load s | first iteration s (wall / cpu) | per iteration s, median "
          "(wall / cpu) | per iteration s, min (wall / cpu) | steady s (later half, wall) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for prog, by in results.items():
        for name, s in by.items():
            print(f"| {prog} | {name} | {s['load_wall']:.2f} | {s['first_wall']:.2f} / {s['first_cpu']:.2f} | "
                  f"{s['iter_wall']:.3f} / {s['iter_cpu']:.3f} | {s['iter_wall_min']:.3f} / {s['iter_cpu_min']:.3f} "
                  f"| {s['steady_wall']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
