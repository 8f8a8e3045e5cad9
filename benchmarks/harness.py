"""What every system module hands the worker, and how the worker times it.

A system module (system_gradkit.py, peers_warp.py, peers_taichi.py) provides:

    NAME                                  display name ("gradkit", "Warp", "Taichi")
    setup(device) -> dict                 initialise the framework; {"version": ..., "device": description}
    workloads(device, size, data)         {"W1": make_w1, ...}; each make_*() builds one workload's arrays
                                          and kernels, checks every result against the float64 reference
                                          (reference.check) and returns its list of Case
    cold_start(device, cache_dir)         in a fresh process: first gradient of W3 with the kernel cache
                                          at `cache_dir` (W6)

Timing (`measure`): min and median wall time over `repeat` runs after `warmup` runs, plus the process's
CPU time divided by the wall time of the timed runs (how many cores the system kept busy).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# The cases of each workload, in the order the table shows them.
WORKLOAD_CASES = {
    "W1": ["W1 forward", "W1 backward"],
    "W2": ["W2 forward", "W2 backward"],
    "W3": ["W3 forward", "W3 backward"],
    "W4": ["W4 forward", "W4 backward"],
    "W5": ["W5 plain", "W5 taped", "W5 backward"],
}
COLD_CASES = ["W6 cold", "W6 warm"]
# W6 warm less the time `import numpy` takes in the same process (the goal: within 0.05 s of it)
COLD_EXTRA = ["W6 warm - import numpy"]


@dataclass
class Case:
    """One timed thing. `fn` runs the work and waits for the device; `before`/`after` run around each
    call untimed (e.g. recording a tape that the timed call replays). `per` divides the time (launch
    counts: W5 reports microseconds per launch)."""

    name: str
    fn: Callable[[], None]
    before: Callable[[], None] | None = None
    after: Callable[[], None] | None = None
    per: int = 1
    unit: str = "ms"
    errors: dict = field(default_factory=dict)   # check name -> error relative to the reference
    note: str = ""


def measure(case: Case, repeat: int, warmup: int = 2) -> dict:
    """Time `case`: min/median over `repeat` runs after `warmup` runs, and CPU parallelism."""
    for _ in range(warmup):
        _run_once(case)
    walls, cpu, wall = [], 0.0, 0.0
    for _ in range(repeat):
        w, c = _run_once(case)
        walls.append(w)
        wall += w
        cpu += c
    scale = 1e3 / case.per if case.unit == "ms" else 1e6 / case.per
    return {"min": min(walls) * scale, "median": statistics.median(walls) * scale,
            "runs": repeat, "unit": case.unit, "parallelism": cpu / wall if wall else 0.0}


def _run_once(case: Case) -> tuple[float, float]:
    if case.before is not None:
        case.before()
    c0, w0 = time.process_time(), time.perf_counter()
    case.fn()
    w, c = time.perf_counter() - w0, time.process_time() - c0
    if case.after is not None:
        case.after()
    return w, c


def w5_cases(plain, taped, backward, xs, ys, launches: int) -> list[Case]:
    """W5's three cases after checking them once: y = 2 after the plain launches, and the tape's backward
    gives a positive dx (xs/ys: the system's arrays, with .numpy() and .grad.zero_())."""
    plain()
    if float(ys.numpy()[0]) != 2.0:
        raise AssertionError(f"W5: y = {ys.numpy()[0]}, expected 2")
    xs.grad.zero_()
    backward()
    if float(xs.grad.numpy()[0]) <= 0.0:
        raise AssertionError(f"W5: the tape's backward gave dx = {xs.grad.numpy()[0]}")
    return [Case("W5 plain", plain, per=launches, unit="us"),
            Case("W5 taped", taped, per=launches, unit="us"),
            Case("W5 backward", backward, per=launches, unit="us")]
