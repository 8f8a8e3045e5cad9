"""Gradient checks on a recorded launch: re-import the kernel from its file, rebuild the launch's arguments
from the bundle's "before" snapshots, and compare reverse-mode and central-difference Jacobians.

No Streamlit here; `run_gradcheck` returns a `CheckResult` the Check view lays out.
"""

from __future__ import annotations

import inspect
import pathlib
import runpy
import sys
from dataclasses import dataclass, field

import numpy as np

from ..runtime.autograd import mismatches
from ..viz.bundle import Bundle

MODULE_NAME = "gradkit_debugger_check"     # the run_name the kernel's file is imported under (not __main__)
_modules: dict[tuple, dict] = {}


class CheckError(Exception):
    """The launch cannot be re-run (missing snapshots, kernel not importable, ...); the message says why."""


@dataclass
class CheckResult:
    ok: bool
    pairs: list[dict]              # one row per (output, input) pair: worst error, tolerance, pass
    worst: list[dict]              # the worst failing entries (like gk.autograd.gradcheck's table)
    device: str
    notes: list[str] = field(default_factory=list)


def load_kernel(file: str, name: str):
    """The @gk.kernel whose `.key` is `name`, found at module level of `file` imported as a module
    (run_name != "__main__", so the script's main block does not run). Cached per file and mtime."""
    path = pathlib.Path(file or "")
    if not file or not path.is_file():
        raise CheckError(f"the kernel's file {file!r} does not exist here: gradcheck needs to import "
                         f"'{name}' from it")
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key not in _modules:
        sys.path.insert(0, str(path.resolve().parent))
        try:
            _modules[key] = runpy.run_path(str(path), run_name=MODULE_NAME)
        except BaseException as exc:        # a script that exits or fails on import
            raise CheckError(f"importing {file} failed: {type(exc).__name__}: {exc}") from None
        finally:
            sys.path.pop(0)
    for obj in _modules[key].values():
        if getattr(obj, "_gk_kernel", False) and getattr(obj, "key", None) == name:
            return obj
    raise CheckError(f"no @gk.kernel named '{name}' at module level of {file} "
                     "(kernels defined inside functions cannot be re-imported)")


def _device(wanted: str) -> tuple[str, list[str]]:
    import gradkit as gk
    names = [d.name for d in gk.get_devices()]
    if wanted in names:
        return wanted, []
    fallback = "cpu" if "cpu" in names else names[0]
    return fallback, [f"device {wanted} is not available here: checked on {fallback}"]


def rebuild_arguments(bundle: Bundle, index: int, kernel, device: str) -> tuple[list, list]:
    """The launch's inputs and outputs: arrays from their "before" snapshots, scalars from the record."""
    import gradkit as gk
    la = bundle.launches[index]
    types = dict(kernel.params)
    why = missing_snapshots(bundle, index)
    if why:
        raise CheckError(why)
    args = []
    for p, aid, scalar in zip(la["params"], la["arrays"], la["scalars"]):
        ptype = types.get(p)
        if aid is not None:
            data = np.array(bundle.snapshot(index, aid, "before"), copy=True)
            dtype = ptype.dtype if ptype is not None and ptype.is_array else None
            args.append(gk.array(data, dtype=dtype, device=device, requires_grad=True))
        else:
            args.append(ptype(scalar) if ptype is not None and callable(ptype) else scalar)
    n_in = la.get("n_inputs", len(args))
    return args[:n_in], args[n_in:]


def run_gradcheck(bundle: Bundle, index: int, eps: float = 1e-3, atol: float = 1e-3, rtol: float = 1e-2,
                  show_worst: int = 10) -> CheckResult:
    """Check forward launch `index` like gk.autograd.gradcheck (|analytic - numeric| <= atol + rtol*|numeric|
    everywhere), keeping a per-pair table instead of raising."""
    import gradkit as gk
    la = bundle.launches[index]
    meta = bundle.manifest["kernels"].get(la["kernel"], {})
    kernel = load_kernel(meta.get("file"), la["kernel"])
    notes = []
    try:
        if meta.get("python_source") and inspect.getsource(kernel.pyfunc) != meta["python_source"]:
            notes.append(f"the source of '{la['kernel']}' in {meta.get('file')} changed since the bundle was "
                         "recorded: checking the current code")
    except (OSError, TypeError):
        pass
    device, why = _device(la["device"])
    notes += why
    inputs, outputs = rebuild_arguments(bundle, index, kernel, device)
    dim = tuple(la["dim"])
    analytic = gk.autograd.jacobian(kernel, dim, inputs, outputs, device=device)
    numeric = gk.autograd.jacobian_fd(kernel, dim, inputs, outputs, eps=eps, device=device)
    names = [n for n, _ in kernel.params]
    n_in = len(inputs)
    pairs, worst, ok = [], [], True
    for (o, i), a in analytic.items():
        n = numeric[(o, i)]
        err, bad = mismatches(a, n, atol, rtol)
        ok &= not bad.any()
        pairs.append({"output": names[n_in + o], "input": names[i], "entries": int(a.size),
                      "max |analytic|": float(np.abs(a).max(initial=0.0)),
                      "max |numeric|": float(np.abs(n).max(initial=0.0)),
                      "max abs err": float(err.max(initial=0.0)), "failing": int(bad.sum()),
                      "pass": not bad.any()})
        for r, c in zip(*np.nonzero(bad)):
            worst.append({"output": names[n_in + o], "input": names[i], "row": int(r), "col": int(c),
                          "analytic": float(a[r, c]), "numeric": float(n[r, c]), "abs err": float(err[r, c])})
    worst.sort(key=lambda w: -w["abs err"])
    if not pairs:
        notes.append("no float array inputs and outputs: nothing to differentiate")
    return CheckResult(bool(ok), pairs, worst[:show_worst], device, notes)


def missing_snapshots(bundle: Bundle, index: int) -> str | None:
    """Why launch `index` cannot be re-run from the bundle (None when every array has a 'before' snapshot)."""
    la = bundle.launches[index]
    missing = [p for p, aid in zip(la["params"], la["arrays"])
               if aid is not None and bundle.snapshot(index, aid, "before") is None]
    if not missing:
        return None
    return (f"launch #{index} ({la['kernel']}) has no stored 'before' snapshot of {', '.join(missing)}: "
            "record it with snapshots (`gradkit debug script.py`, or gk.Tape(snapshots=True)) and keep the "
            "arrays under gk.config.snapshot_max_bytes to run gradcheck on it")
