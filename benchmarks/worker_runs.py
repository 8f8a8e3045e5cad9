"""Running benchmark workers (worker.py) in child processes for run.py: one Target (a system on a device),
its JSON events read from a pipe, a watchdog that kills a worker silent for too long, and the progress
line."""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402


@dataclass
class Target:
    system: str            # worker.py's name: gradkit | warp | taichi | drjit | jax
    device: str
    label: str             # the column header, e.g. "Warp cpu"
    status: str = "ok"
    reason: str = ""
    info: dict | None = None


# --------------------------------------------------------------------------------------------

def run_worker(argv: list[str], log, env: dict, timeout: float, on_event) -> int:
    """Run worker.py with `argv`, passing each JSON event to `on_event`; kill it (and its children) after
    `timeout` seconds without an event. Returns the exit code (negative: killed by that signal)."""
    r, w = os.pipe()
    env = dict(env, BENCH_EVENTS_FD=str(w), PYTHONUNBUFFERED="1")
    log.write(f"\n$ worker.py {' '.join(argv)}\n")
    log.flush()
    proc = subprocess.Popen([sys.executable, str(HERE / "worker.py"), *argv], stdout=log,
                            stderr=subprocess.STDOUT, pass_fds=(w,), env=env, start_new_session=True)
    os.close(w)
    buf = b""
    try:
        while True:
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready:
                os.killpg(proc.pid, signal.SIGKILL)
                on_event({"event": "timeout", "seconds": timeout})
                break
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    on_event(json.loads(line))
    finally:
        os.close(r)
    return proc.wait()


class Progress:
    """A rich progress bar on a terminal; one line per finished case otherwise (logs, CI)."""

    def __init__(self, total: int) -> None:
        self.done, self.total, self.bar = 0, total, None
        if sys.stdout.isatty():
            try:
                from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
                self.bar = RichProgress(TextColumn("{task.description:<40}"), BarColumn(),
                                        MofNCompleteColumn(), TimeElapsedColumn())
                self.task = self.bar.add_task("starting", total=total)
                self.bar.start()
            except ImportError:
                pass

    def status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text)

    def advance(self, line: str) -> None:
        self.done += 1
        self.total = max(self.total, self.done)     # extras such as gradkit's W1 tangent
        if self.bar is not None:
            self.bar.update(self.task, advance=1)
            self.bar.console.print(line)
        else:
            print(f"[{self.done:>3}/{self.total}] {line}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def describe(r: dict) -> str:
    if "error" in r:
        return f"{r['system']:<16} {r['case']:<12} ERROR {r['error'][:160]}"
    unit = report.UNITS.get(r["unit"], r["unit"])
    line = f"{r['system']:<16} {r['case']:<12} min {r['min']:10.4g} {unit:<9} median {r['median']:10.4g}"
    return line + (f"  parallelism {r['parallelism']:.2f}" if "parallelism" in r else "")


class WorkerRun:
    """Collects one worker's events for a target: results, the workload under way, a timeout."""

    def __init__(self, t: Target, expected: dict, pending: list, progress: Progress, results: list):
        self.t, self.expected, self.pending = t, expected, pending
        self.progress, self.results = progress, results
        self.current: str | None = None
        self.timed_out: float | None = None

    def __call__(self, ev: dict) -> None:
        kind, t = ev["event"], self.t
        if kind == "info":
            t.info = ev
        elif kind == "fatal":
            t.status, t.reason = "n/a", ev["error"]
        elif kind == "start":
            self.current = ev["workload"]
            self.pending.remove(ev["workload"])
            self.progress.status(f"{t.label}: {ev['workload']} (checking)")
        elif kind == "case":
            self.progress.status(f"{t.label}: {ev['case']}")
        elif kind in ("result", "error"):
            workload = ev.get("workload") or ev["case"].split()[0]
            self.record([ev["case"]] if "case" in ev else list(self.expected[workload]),
                        {k: v for k, v in ev.items() if k not in ("event", "workload")})
        elif kind == "timeout":
            self.timed_out = ev["seconds"]

    def record(self, cases: list[str], fields: dict) -> None:
        for case in cases:
            r = dict(fields, system=self.t.label, case=case)
            self.results.append(r)
            remaining = self.expected.get(case.split()[0], [])
            if case in remaining:
                remaining.remove(case)
            self.progress.advance(describe(r))


def log_file(logs: pathlib.Path, t: Target):
    return open(logs / f"{t.label.replace(' ', '_').replace(':', '-')}.log", "a")
