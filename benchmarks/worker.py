"""Runs one system on one device in this process and reports JSON events, one per line, to the file
descriptor in $BENCH_EVENTS_FD (stdout when unset). run.py starts one worker per system, so gradkit,
Warp and Taichi never share a process (each brings its own LLVM), and the CPU time a worker's process
uses during a timed run is that system's alone.

    python benchmarks/worker.py SYSTEM DEVICE --size full|smoke [--repeat 7] [--workloads W1,W3]
    python benchmarks/worker.py SYSTEM DEVICE --cold CACHE_DIR --size full   # W6: one first gradient

Events: {"event": "info", ...}, {"event": "start", "workload": "W3"},
{"event": "result", "case": ..., "min": ..., ...}, {"event": "error", "workload": ..., "error": ...},
{"event": "cold", "seconds": ..., ...}.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()   # W6 counts from here: before any framework is imported

import argparse
import importlib
import json
import os
import pathlib
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

SYSTEMS = {"gradkit": "system_gradkit", "warp": "peers_warp", "taichi": "peers_taichi"}


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
        out = module.cold_start(device, cache_dir, p_np)
        seconds = time.perf_counter() - T_START
        err = check("W3 backward", np.asarray(out["grad"]).reshape(p_np.shape), ref_w3(p_np)[1])
    except Exception as exc:  # noqa: BLE001 - reported as W6's error
        traceback.print_exc()
        emit("error", workload="W6", error=_error_text(exc))
        return
    emit("cold", seconds=seconds, import_s=out["import_s"], errors={"W3 backward": err})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("system", choices=sorted(SYSTEMS))
    ap.add_argument("device")
    ap.add_argument("--size", default="full", choices=["full", "smoke"])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--workloads", default="", help="comma-separated subset of W1..W5")
    ap.add_argument("--cold", metavar="CACHE_DIR", help="W6: time the first W3 gradient with this cache")
    args = ap.parse_args(argv)
    emit = Events()
    module = importlib.import_module(SYSTEMS[args.system])
    if args.cold:
        run_cold(module, args.device, args.size, args.cold, emit)
    else:
        names = {w for w in args.workloads.split(",") if w}
        run_workloads(module, args.device, args.size, args.repeat, args.warmup, names, emit)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
