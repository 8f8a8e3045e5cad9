"""Warp's own example programs under `gradkit.warp` and under Warp, time per step (issue #40 item 4).

    python benchmarks/warp_programs.py [--quick] [--steps N] [--programs sph,dem,diffray,mesh] [--cold]
                                       [--device cpu|cuda] [--kernels] [--json out.json]

The programs are example_sph, example_dem, optim/example_diffray and example_mesh from the installed `warp` package,
loaded by `gradkit.warp.examples.load_example` as written (Warp) and with only their imports pointed at
gradkit.warp plus the edits docs/porting/warp.md lists (gradkit); rendering off. One step is the example's
own `step()`: a frame of simulation substeps (sph, dem: dem's constructor captures its substeps as a graph,
captured again here once their number is set, so a step runs the substeps the size says), a taped forward
and backward pass with an SGD update (diffray), or a deforming mesh's refit and 1,000 particles' closest-point queries against it (mesh). Sizes are the examples' own where a step stays near a second on a 2-core CPU, else set
from outside through the example's attributes (SIZES). example_diffray and example_mesh load bunny.usd
through OpenUSD, which need not be installed: a stand-in `pxr` gives both systems the same sphere mesh
(9,024 triangles).

Both systems run in this process, their steps alternating (Warp, gradkit, gradkit, Warp, ...) so that
load on the machine slows them alike, each under `wp.ScopedDevice(device)`: "cpu" (the default), or "cuda"
for Warp's CUDA device and gradkit.warp's GPU (its first OpenCL device), each step followed by
`wp.synchronize()`; every row names the device its system ran on. The start is reported apart: `start_s` from loading the
example's source to the end of its first step (each system's kernel compilation, or loading from its disk
cache, and first allocations; the constructors launch kernels too, diffray's a whole forward pass), and
`first_step_s` the first step alone. Both systems keep compiled kernels in a disk cache (Warp's kernel
cache, gradkit's GRADKIT_CACHE_DIR): by default the caches are as found (warm after one run), and
`--cold` points both at fresh, empty folders so that every kernel compiles; neither caches the work
before code generation (Warp's codegen to C++, gradkit's frontend and AD passes), so a warm start still
pays for it. Per step is the median of the later steps, in wall seconds and in the process's CPU seconds
(all threads: Warp runs a CPU launch on one thread, gradkit on up to one per core, so CPU time compares
the work and wall time what a user waits; on a machine shared with other work, gradkit's second thread
may find no free core, which the load average in the JSON shows). `run(quick)` returns the rows
{program, system, first_step_s, per_step_s, ...} for `make bench`; the command line prints a Markdown
table and writes JSON.

`--kernels` adds where a step's time goes (`kernel_times`): each system's launches, one kernel at a time,
each followed by `wp.synchronize()`, and its hash-grid builds, per step in wall and CPU seconds, with dem's
graph capture off (the same launches, made one by one).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import statistics
import sys
import tempfile
import time
import types

import numpy as np

PROGRAMS = ("sph", "dem", "diffray", "mesh")
SYSTEMS = ("warp", "gradkit.warp")

# per program: (full, quick) settings: sph substeps per step; dem particle block divisor and substeps (64:
# the example's own); diffray image height
SIZES = {
    "sph": ({"substeps": 2}, {"substeps": 1}),
    "dem": ({"shrink": 2, "substeps": 64}, {"shrink": 4, "substeps": 2}),
    "diffray": ({"height": 128}, {"height": 24}),
    "mesh": ({}, {}),
}


def _stand_in_pxr(n: int = 48) -> types.ModuleType:
    """`from pxr import Usd, UsdGeom` giving a closed UV sphere of n rings, radius 0.5 about (0, 0.5, 0)
    (about the bunny's size and place), for any stage and prim."""
    from gradkit.warp.examples import stand_in_pxr, uv_sphere
    points, tris = uv_sphere(n)
    points = (points * 0.5 + np.array([0.0, 0.5, 0.0])).astype(np.float32)
    return stand_in_pxr(points, tris.reshape(-1))


def _load(rel: str, system: str):
    from gradkit.warp.examples import KNOWN_EDITS, load_example
    gk = system != "warp"
    return load_example(rel, gradkit=gk, edits=KNOWN_EDITS.get(rel, ()) if gk else ())


def _make(program: str, system: str, size: dict):
    """The example object, ready to step, and a description of its size."""
    if program == "sph":
        e = _load("core/example_sph.py", system).Example(stage_path=None)
        e.sim_step_to_frame_ratio = size["substeps"]
        return e, f"{e.n} particles, {size['substeps']} substeps/step"
    if program == "dem":
        mod = _load("core/example_dem.py", system)
        full, k = mod.Example.particle_grid, size["shrink"]
        mod.Example.particle_grid = lambda self, dx, dy, dz, *rest: full(self, dx // k, dy // k, dz // k, *rest)
        e = mod.Example(stage_path=None)
        e.sim_substeps = size["substeps"]
        e.sim_dt = e.frame_dt / e.sim_substeps
        if getattr(e, "use_graph_capture", False):     # the constructor captured its own 64 substeps
            with mod.wp.ScopedCapture() as capture:
                e.simulate()
            e.graph = capture.graph
        return e, f"{len(e.x)} particles, {size['substeps']} substeps/step"
    if program == "diffray":
        sys.modules.setdefault("pxr", _stand_in_pxr())
        mod = _load("optim/example_diffray.py", system)
        ref = mod.Example(height=size["height"], train_iters=1)
        ref.ray_cast()
        rot = [0.0, (math.sqrt(3) - 1) / (2.0 * math.sqrt(2.0)), 0.0, (math.sqrt(3) + 1) / (2.0 * math.sqrt(2.0))]
        e = mod.Example(height=size["height"], train_iters=1, rot_array=rot)
        mod.wp.copy(e.target_pixels, ref.pixels)
        return e, f"{e.width}x{e.height} pixels, {e.num_rays} rays, forward+backward+SGD"
    if program == "mesh":
        sys.modules.setdefault("pxr", _stand_in_pxr())
        e = _load("core/example_mesh.py", system).Example(stage_path=None)
        return e, f"{e.num_particles} particles, {e.mesh.indices.shape[0] // 3} triangles, refit each step"
    raise ValueError(f"unknown program {program!r}: one of {', '.join(PROGRAMS)}")


def _module(system: str):
    """The `wp` of `system`: warp, or gradkit.warp."""
    import importlib
    return importlib.import_module("warp" if system == "warp" else "gradkit.warp")


def _step(e, wp, device: str) -> tuple[float, float]:
    """Wall and process CPU seconds (all threads) of one step on `device`, synchronized."""
    c0, t0 = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), wp.ScopedDevice(device):   # the examples print timers
        e.step()
        wp.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0


def time_program(program: str, quick: bool = False, steps: int | None = None, device: str = "cpu") -> list[dict]:
    """Both systems' start, first step and median later step of `program` on `device` ("cpu" or "cuda"),
    steps alternating between them."""
    import warp
    warp.config.quiet = True
    warp.init()
    size = SIZES[program][1 if quick else 0]
    steps = steps or (2 if quick else 5)
    examples, sizes, made, wps, devices = {}, {}, {}, {}, {}
    for system in SYSTEMS:
        wps[system] = wp = _module(system)
        t0 = time.perf_counter()
        with wp.ScopedDevice(device) as d:
            examples[system], sizes[system] = _make(program, system, size)
            devices[system] = str(getattr(d, "alias", d))
        made[system] = time.perf_counter() - t0
    first = {s: _step(examples[s], wps[s], device) for s in SYSTEMS}
    later: dict = {s: [] for s in SYSTEMS}
    for k in range(steps):
        for s in (SYSTEMS if k % 2 == 0 else SYSTEMS[::-1]):
            later[s].append(_step(examples[s], wps[s], device))
    rows = []
    for s in SYSTEMS:
        wall, cpu = [w for w, _ in later[s]], [c for _, c in later[s]]
        rows.append({"program": program, "system": s, "start_s": made[s] + first[s][0],
                     "first_step_s": first[s][0], "per_step_s": statistics.median(wall),
                     "min_step_s": min(wall), "first_step_cpu_s": first[s][1], "per_step_cpu_s": statistics.median(cpu),
                     "steps": steps, "size": sizes[s], "device": devices[s]})
    return rows


class _TimedWarp(types.ModuleType):
    """An example module's `wp` that times each launch to its end (`synchronize`) into `record`."""

    def __init__(self, real, record):
        super().__init__(real.__name__)
        self._real, self._record = real, record

    def __getattr__(self, name):
        return getattr(self._real, name)

    def launch(self, kernel, *args, **kwargs):
        c0, t0 = time.process_time(), time.perf_counter()
        out = self._real.launch(kernel, *args, **kwargs)
        self._real.synchronize()
        self._record(getattr(kernel, "key", None) or getattr(kernel, "__name__", str(kernel)),
                     time.perf_counter() - t0, time.process_time() - c0)
        return out


def kernel_times(program: str, quick: bool = False, steps: int | None = None, device: str = "cpu") -> list[dict]:
    """Where a step of `program` goes, per system: rows {program, system, kernel, calls, wall_s, cpu_s} with
    each kernel's launches (and `HashGrid.build`) per step, summed over `steps` steps after a first, steps
    alternating between the systems; graph capture off (dem replays the same launches one by one)."""
    import warp
    warp.config.quiet = True
    warp.init()
    size = SIZES[program][1 if quick else 0]
    steps = steps or (2 if quick else 3)
    totals: dict = {}
    examples, wps = {}, {}
    for system in SYSTEMS:
        wps[system] = wp = _module(system)
        with wp.ScopedDevice(device):
            e, _ = _make(program, system, size)
        e.use_graph_capture = False

        def record(name, wall, cpu, system=system):
            t = totals.setdefault((system, name), [0, 0.0, 0.0])
            t[0] += 1
            t[1] += wall
            t[2] += cpu
        sys.modules[type(e).__module__].wp = _TimedWarp(wps[system], record)
        grid = getattr(e, "grid", None)
        if grid is not None:
            build = grid.build

            def timed_build(*args, build=build, record=record, **kwargs):
                c0, t0 = time.process_time(), time.perf_counter()
                build(*args, **kwargs)
                record("HashGrid.build", time.perf_counter() - t0, time.process_time() - c0)
            grid.build = timed_build
        examples[system] = e
    for s in SYSTEMS:
        _step(examples[s], wps[s], device)
    totals.clear()
    for k in range(steps):
        for s in (SYSTEMS if k % 2 == 0 else SYSTEMS[::-1]):
            _step(examples[s], wps[s], device)
    return [{"program": program, "system": s, "kernel": name, "calls": n / steps, "wall_s": w / steps,
             "cpu_s": c / steps} for (s, name), (n, w, c) in totals.items()]


def markdown_kernels(rows: list[dict]) -> str:
    """One line per program and kernel: calls per step, Warp's and gradkit's wall and CPU ms per step."""
    by = {(r["program"], r["system"], r["kernel"]): r for r in rows}
    out = ["| program | kernel | calls/step | wall: Warp / gradkit | CPU: Warp / gradkit |", "|---|---|---|---|---|"]
    for program, kernel in dict.fromkeys((r["program"], r["kernel"]) for r in rows):
        w, g = by.get((program, "warp", kernel)), by.get((program, "gradkit.warp", kernel))
        ms = [(_ms(r["wall_s"]), _ms(r["cpu_s"])) if r else ("-", "-") for r in (w, g)]
        calls = (w or g)["calls"]
        out.append(f"| {program} | {kernel} | {calls:g} | {ms[0][0]} / {ms[1][0]} ms | {ms[0][1]} / {ms[1][1]} ms |")
    return "\n".join(out)


def run(quick: bool = False, programs=PROGRAMS, steps: int | None = None, device: str = "cpu") -> list[dict]:
    """Rows {program, system, start_s, first_step_s, per_step_s, min_step_s, first_step_cpu_s, per_step_cpu_s,
    steps, size, device} for every program (seconds; start_s: loading, constructing and the first step;
    *_cpu_s: the process's CPU time, all threads: Warp's CPU backend runs a launch on one thread, gradkit's on
    up to one per core), with the kernel caches as they are, on `device` ("cpu", or "cuda": Warp's CUDA
    device and gradkit.warp's OpenCL GPU)."""
    rows = []
    for program in programs:
        rows += time_program(program, quick, steps, device)
    return rows


def _ms(seconds: float) -> str:
    """Milliseconds, with two decimals below 10 ms (example_mesh's steps take a fraction of one)."""
    return f"{seconds * 1e3:.2f}" if seconds < 0.01 else f"{seconds * 1e3:.1f}"


def markdown(rows: list[dict]) -> str:
    by = {(r["program"], r["system"]): r for r in rows}
    out = ["| program | size | start: Warp / gradkit | first step: Warp / gradkit | per step (wall): Warp / gradkit "
           "| gradkit / Warp | per step (CPU): Warp / gradkit | gradkit / Warp |", "|---|---|---|---|---|---|---|---|"]
    for program in dict.fromkeys(r["program"] for r in rows):
        w, g = by[(program, "warp")], by[(program, "gradkit.warp")]
        out.append(f"| {program} | {w['size']} | {w['start_s']:.2f} s / {g['start_s']:.2f} s | "
                   f"{w['first_step_s']:.3f} s / {g['first_step_s']:.3f} s | "
                   f"{_ms(w['per_step_s'])} / {_ms(g['per_step_s'])} ms | "
                   f"{g['per_step_s'] / w['per_step_s']:.2f}x | "
                   f"{_ms(w['per_step_cpu_s'])} / {_ms(g['per_step_cpu_s'])} ms | "
                   f"{g['per_step_cpu_s'] / max(w['per_step_cpu_s'], 1e-9):.2f}x |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 2 timed steps")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per system after the first")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--cold", action="store_true",
                    help="both systems' kernel caches in fresh, empty folders: every kernel compiles")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cpu for both, or cuda: Warp's CUDA device and gradkit.warp's GPU (OpenCL)")
    ap.add_argument("--kernels", action="store_true",
                    help="also time each kernel's launches and the hash-grid builds per step (kernel_times)")
    ap.add_argument("--json", default=os.path.join("bench-results", "warp_programs.json"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="warp_programs_") as tmp:
        if args.cold:
            if "warp" in sys.modules or "gradkit" in sys.modules:
                raise SystemExit("--cold: warp or gradkit is already imported; run it as a fresh process")
            os.environ["WARP_CACHE_PATH"] = os.path.join(tmp, "warp")
            os.environ["GRADKIT_CACHE_DIR"] = os.path.join(tmp, "gradkit")
        load0 = os.getloadavg()
        programs = [p for p in args.programs.split(",") if p]
        rows = run(args.quick, programs, args.steps, args.device)
        kernels = [k for p in programs for k in kernel_times(p, args.quick, args.steps, args.device)] \
            if args.kernels else []
        load1 = os.getloadavg()
    print(markdown(rows))
    if kernels:
        print()
        print(markdown_kernels(kernels))
    print(f"devices: {', '.join(sorted({r['system'] + ' ' + r['device'] for r in rows}))}; caches: "
          f"{'cold' if args.cold else 'as found'}; load average (1 min) {load0[0]:.2f} before, {load1[0]:.2f} "
          f"after, on {os.cpu_count()} cores")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "kernels": kernels, "quick": args.quick, "cold": args.cold, "device": args.device,
                       "cpu_count": os.cpu_count(),
                       "load_before": load0, "load_after": load1}, f, indent=1)


if __name__ == "__main__":
    main()
