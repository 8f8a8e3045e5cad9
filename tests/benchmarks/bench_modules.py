"""benchmarks/<name>.py loaded as a module under a name of its own (gk_bench_<name>), so the benchmark tests
can call its functions without putting benchmarks/ on sys.path for every other test."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(name: str, as_name: str | None = None):
    """A fresh module of benchmarks/<name>.py, named gk_bench_<as_name or name>."""
    spec = importlib.util.spec_from_file_location(f"gk_bench_{as_name or name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
