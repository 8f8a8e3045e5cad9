"""Runs one system on one device in this process and reports JSON events, one per line, to the file
descriptor in $BENCH_EVENTS_FD (stdout when unset). run.py starts one worker per system, so gradkit and
its peers never share a process (each brings its own LLVM), and the CPU time a worker's process
uses during a timed run is that system's alone.

    python benchmarks/worker.py SYSTEM DEVICE --size full|smoke [--repeat 7] [--workloads W1,W3]
    python benchmarks/worker.py SYSTEM DEVICE --cold CACHE_DIR --size full   # W6: one first gradient

Events: {"event": "info", ...}, {"event": "start", "workload": "W3"},
{"event": "result", "case": ..., "min": ..., ...}, {"event": "error", "workload": ..., "error": ...},
{"event": "cold", "seconds": ..., ...}.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import numpy  # noqa: E402,F401  (timed: W6 counts it, and W6 warm's goal is stated against it)

NUMPY_S = time.perf_counter() - T_START

import argparse
import importlib
import json
import os
import pathlib
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

SYSTEMS = {"gradkit": "system_gradkit", "warp": "peers_warp", "taichi": "peers_taichi", "drjit": "peers_drjit",
           "jax": "peers_jax"}


class Events:
    def __init__(self) -> None:
        fd = os.environ.get("BENCH_EVENTS_FD")
        self.out = os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout

    def __call__(self, event: str, **fields) -> None:
        self.out.write(json.dumps({"event": event, **fields}) + "\n")
        self.out.flush()


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def run_workloads(module, device: str, size_name: str, repeat: int, warmup: int, names, emit) -> None:
    from reference import SIZES, inputs
    size = SIZES[size_name]
    try:
        info = module.setup(device)
    except Exception as exc:  # noqa: BLE001 - broken framework or missing device: nothing to time
        traceback.print_exc()
        emit("fatal", error=_error_text(exc))
        return
    emit("info", system=module.NAME, **info)
    data = inputs(size)
    from harness import measure
    for name, make in module.workloads(device, size, data).items():
        if names and name not in names:
            continue
        emit("start", workload=name)
        try:
            cases = make()
        except Exception as exc:  # noqa: BLE001 - reported as this workload's error
            traceback.print_exc()
            emit("error", workload=name, error=_error_text(exc))
            continue
        for case in cases:
            emit("case", case=case.name)
            try:
                r = measure(case, repeat, warmup)
            except Exception as exc:  # noqa: BLE001 - reported as this case's error
                traceback.print_exc()
                emit("error", workload=name, case=case.name, error=_error_text(exc))
                continue
            emit("result", case=case.name, errors=case.errors, note=case.note, **r)
        del cases


def run_cold(module, device: str, size_name: str, cache_dir: str, emit) -> None:
    import numpy as np
    from reference import SIZES, check, inputs, ref_w3
    p_np = inputs(SIZES[size_name])["w3_p"]
    try:
        # `import numpy` plus the framework's import and first gradient: a user's script doing just that.
        # The harness's own imports and its inputs for every workload (a 2^24 draw, ~0.06 s) are not
        # the framework's start-up and are left out.
        t0 = time.perf_counter()
        out = module.cold_start(device, cache_dir, p_np)
        seconds = NUMPY_S + time.perf_counter() - t0
        err = check("W3 backward", np.asarray(out["grad"]).reshape(p_np.shape), ref_w3(p_np)[1])
    except Exception as exc:  # noqa: BLE001 - reported as W6's error
        traceback.print_exc()
        emit("error", workload="W6", error=_error_text(exc))
        return
    emit("cold", seconds=seconds, import_s=out["import_s"], numpy_s=NUMPY_S, errors={"W3 backward": err})


def run_compile(module, device: str, case: str, folder: str, emit) -> None:
    """W7: one compile-time case in this (fresh) process, kernel cache and generated source in `folder`."""
    import numpy as np
    import compile_time as C
    kind, n = C.CASES[case]
    x = C.inputs()
    try:
        path = C.write_module(module.DIALECT, kind, n, folder)
        out = module.compile_case(device, f"{folder}/cache", kind, n, path, x)
        y_ref, g_ref = C.reference(kind, n, x)
        errors = {}
        for name, got, ref in (("value", out["y"], y_ref), ("gradient", out["grad"], g_ref)):
            got = np.asarray(got, np.float64).reshape(ref.shape)
            err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
            if not err <= 1e-2:      # catches wrong code; float32 rounding over 2000 steps stays below
                raise AssertionError(f"{case}: {name} differs from the float64 reference by {err:.3g} "
                                     f"(relative); got {got[:4]}, expected {ref[:4]}")
            errors[f"{case} {name}"] = err
    except Exception as exc:  # noqa: BLE001 - reported as this case's error
        traceback.print_exc()
        emit("error", workload="W7", case=case, error=_error_text(exc))
        return
    emit("compiled", case=case, seconds=out["seconds"], rss_mb=out["rss_mb"], errors=errors)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("system", choices=sorted(SYSTEMS))
    ap.add_argument("device")
    ap.add_argument("--size", default="full", choices=["full", "smoke"])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--workloads", default="", help="comma-separated subset of W1..W5")
    ap.add_argument("--cold", metavar="CACHE_DIR", help="W6: time the first W3 gradient with this cache")
    ap.add_argument("--compile", metavar="CASE", help="W7: one compile-time case (compile_time.CASES)")
    ap.add_argument("--folder", help="W7: an empty folder for the generated source and the kernel cache")
    args = ap.parse_args(argv)
    emit = Events()
    module = importlib.import_module(SYSTEMS[args.system])
    if args.compile:
        run_compile(module, args.device, args.compile, args.folder, emit)
    elif args.cold:
        run_cold(module, args.device, args.size, args.cold, emit)
    else:
        names = {w for w in args.workloads.split(",") if w}
        run_workloads(module, args.device, args.size, args.repeat, args.warmup, names, emit)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
