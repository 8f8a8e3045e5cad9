"""Gradient checks on a recorded launch: compile the kernel from the source stored in the bundle (never
importing or running any file; only after the user approved the source's SHA-256), rebuild the launch's
arguments from the bundle's "before" snapshots, and compare reverse-mode and central-difference Jacobians.

No Streamlit here; `run_gradcheck` returns a `CheckResult` the Check view lays out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..runtime.tools.autograd import mismatches
from ..viz.bundle import Bundle, source_sha256
from . import stored_kernel
from .paths import shown_path

_kernels: dict[tuple, object] = {}      # (name, source SHA-256, first line) -> Kernel compiled from it
_MAX_KERNELS = 64


class CheckError(Exception):
    """The launch cannot be re-run (missing snapshots, source not approved or refused, ...); the message
    says why."""


@dataclass
class CheckResult:
    ok: bool
    pairs: list[dict]              # one row per (output, input) pair: worst error, tolerance, pass
    worst: list[dict]              # the worst failing entries (like gk.autograd.gradcheck's table)
    device: str
    notes: list[str] = field(default_factory=list)
    precision: str = "as recorded"         # or "float64": the kernel widened (core/passes/widen.py)
    eps: float = 1e-3
    within_noise: int = 0                  # failing entries whose error is within twice the FD noise estimate
    failing: int = 0
    float64: CheckResult | None = None     # the float64 re-run made when the recorded precision failed


def verdict(result: CheckResult, kernel: str) -> tuple[str, str]:
    """(level, sentence) the Check view leads with: "success", "warning" or "error". A float32 failure
    that the float64 re-run clears is float32 noise (a warning about the tolerance, not a red failure)."""
    where = f"on {result.device}"
    if result.ok:
        return "success", f"The gradient of '{kernel}' is right {where}: it passes gradcheck as recorded."
    wide = result.float64
    if wide is not None and wide.ok:
        return "warning", (f"The gradient of '{kernel}' is right: it passes in float64. The {result.failing} "
                           "entries failing in the recorded precision are float32 finite-difference noise; "
                           "raise eps or the tolerances to check at float32.")
    if wide is not None:
        return "error", (f"The gradient of '{kernel}' is wrong {where}: it still fails in float64, beyond "
                         "rounding (a wrong gradient, or a kink or discontinuity at these inputs).")
    return "error", f"The gradient of '{kernel}' fails gradcheck {where}: the worst entries are below."


def stored_source(bundle: Bundle, kernel: str) -> dict:
    """What the user must read before approving a compile: {"source", "sha256" (of the stored text),
    "recorded" (the bundle's SHA-256, or None), "file" (shown relative to the bundle), "first_line"}."""
    meta = bundle.manifest["kernels"].get(kernel, {})
    text = meta.get("python_source") or ""
    return {"source": text, "sha256": source_sha256(text) if text else None,
            "recorded": meta.get("source_sha256"), "file": shown_path(bundle, meta.get("file")),
            "first_line": meta.get("first_line")}


def load_kernel(bundle: Bundle, name: str, approved: str | None):
    """Kernel `name` compiled from the bundle's stored source, once `approved` (the SHA-256 the user saw)
    matches it; CheckError with the reason otherwise. Compiled kernels are kept per source hash."""
    meta = bundle.manifest["kernels"].get(name)
    if meta is None:
        raise CheckError(f"the bundle holds no kernel '{name}'")
    key = (name, meta.get("source_sha256"), meta.get("first_line"))
    try:
        stored_kernel.check_hash(name, meta, approved)
        if key not in _kernels:
            if len(_kernels) >= _MAX_KERNELS:
                _kernels.clear()
            _kernels[key] = stored_kernel.compile_stored(name, meta, approved,
                                                         shown_path(bundle, meta.get("file")) or "<bundle>")
    except stored_kernel.StoredSourceError as exc:
        raise CheckError(str(exc)) from None
    return _kernels[key]


def _device(wanted: str) -> tuple[str, list[str]]:
    import gradkit as gk
    names = [d.name for d in gk.get_devices()]
    if wanted in names:
        return wanted, []
    fallback = "cpu" if "cpu" in names else names[0]
    return fallback, [f"device {wanted} is not available here: checked on {fallback}"]


def rebuild_arguments(bundle: Bundle, index: int, kernel, device: str) -> tuple[list, list]:
    """The launch's inputs and outputs: arrays from their "before" snapshots (converted to the kernel's
    parameter types, so a widened kernel gets float64 copies), scalars from the record."""
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
            floating = data.dtype.kind == "f" and (dtype is None or dtype.scalar.is_float)
            if floating and dtype is not None:
                data = data.astype(dtype.scalar.np_dtype)
            # integer arrays (indices, counts) are not differentiated: no gradient is asked of them
            args.append(gk.array(data, dtype=dtype, device=device, requires_grad=floating))
        else:
            args.append(ptype(scalar) if ptype is not None and callable(ptype) else scalar)
    n_in = la.get("n_inputs", len(args))
    return args[:n_in], args[n_in:]


@dataclass
class _Jacobians:
    """Reverse-mode and central-difference Jacobians of one launch, with the finite differences' noise."""
    analytic: dict
    numeric: dict
    noise: dict                    # (output, input) -> per-entry estimate of the central difference's error
    n_inputs: int


def _jacobians(kernel, bundle: Bundle, index: int, device: str, eps: float) -> _Jacobians:
    """Both Jacobians of launch `index`, and per entry an estimate of the finite difference's own error:
    |J(eps) - J(eps/2)| (truncation and rounding, Richardson) plus the output's rounding over the step,
    machine-eps * |y| / eps."""
    import gradkit as gk
    from ..runtime.tools.jacobian_target import make_target
    la = bundle.launches[index]
    dim = tuple(la["dim"])
    inputs, outputs = rebuild_arguments(bundle, index, kernel, device)
    analytic = gk.autograd.jacobian(kernel, dim, inputs, outputs, device=device)
    numeric = gk.autograd.jacobian_fd(kernel, dim, inputs, outputs, eps=eps, device=device)
    half = gk.autograd.jacobian_fd(kernel, dim, inputs, outputs, eps=eps / 2, device=device)
    target = make_target(kernel, dim, inputs, outputs, device)
    try:
        values = target.evaluate()
    finally:
        target.restore()
    noise = {}
    for (o, i), n in numeric.items():
        y = np.abs(values[o])[:, None] if o in values else 0.0
        u = np.finfo(outputs[o].dtype.scalar.np_dtype).eps
        with np.errstate(invalid="ignore"):
            noise[(o, i)] = np.abs(n - half[(o, i)]) + u * y / eps
    return _Jacobians(analytic, numeric, noise, len(inputs))


def _compare(j: _Jacobians, names: list[str], atol: float, rtol: float) -> tuple[bool, list, list]:
    """(ok, one row per Jacobian block, every failing entry) with each entry's noise estimate."""
    pairs, worst, ok = [], [], True
    for (o, i), a in j.analytic.items():
        n, noise = j.numeric[(o, i)], j.noise[(o, i)]
        err, bad = mismatches(a, n, atol, rtol)
        with np.errstate(invalid="ignore"):
            real = bad & ~(err <= 2 * noise)
        ok &= not bad.any()
        out, inp = names[j.n_inputs + o], names[i]
        pairs.append({"output": out, "input": inp, "entries": int(a.size),
                      "max |analytic|": float(np.abs(a).max(initial=0.0)),
                      "max |numeric|": float(np.abs(n).max(initial=0.0)),
                      "max abs err": float(err.max(initial=0.0)), "failing": int(bad.sum()),
                      "beyond FD noise": int(real.sum()), "pass": not bad.any()})
        for r, c in zip(*np.nonzero(bad)):
            worst.append({"output": out, "input": inp, "row": int(r), "col": int(c),
                          "analytic": float(a[r, c]), "numeric": float(n[r, c]), "abs err": float(err[r, c]),
                          "FD noise": float(noise[r, c]), "within noise": bool(not real[r, c])})
    worst.sort(key=lambda w: (w["within noise"], -w["abs err"] if np.isfinite(w["abs err"]) else -np.inf))
    return bool(ok), pairs, worst


def run_gradcheck(bundle: Bundle, index: int, approved: str | None = None, eps: float = 1e-3,
                  atol: float = 1e-3, rtol: float = 1e-2, show_worst: int = 10,
                  float64: bool | None = None) -> CheckResult:
    """Check forward launch `index` like gk.autograd.gradcheck (|analytic - numeric| <= atol + rtol*|numeric|
    everywhere), keeping a per-pair table instead of raising, and an estimate of each failing entry's
    finite-difference noise. `approved` is the SHA-256 of the kernel's stored source the user read and
    approved (`stored_source`); without it nothing is compiled. `float64`: True checks the kernel widened to
    float64 (core/passes/widen.py); None (the default) does so only when the recorded precision fails, to tell
    a wrong gradient from float32 finite-difference noise (`CheckResult.float64`)."""
    la = bundle.launches[index]
    why = missing_snapshots(bundle, index)
    if why:
        raise CheckError(why)
    kernel = load_kernel(bundle, la["kernel"], approved)
    names = [n for n, _ in kernel.params]
    if names != la["params"]:
        raise CheckError(f"launch #{index} records parameters {la['params']} but the stored source of "
                         f"'{la['kernel']}' declares {names}")
    device, notes = _device(la["device"])
    if float64:
        kernel, eps = _widened(kernel, la["kernel"]), min(eps, FLOAT64_EPS)
    try:
        j = _jacobians(kernel, bundle, index, device, eps)
    except CheckError:
        raise
    except Exception as exc:         # arguments that do not fit the kernel, a launch error: say so
        raise CheckError(f"gradcheck of launch #{index} ({la['kernel']}) could not run: "
                         f"{type(exc).__name__}: {exc}") from None
    ok, pairs, worst = _compare(j, names, atol, rtol)
    if not pairs:
        notes.append("no float array inputs and outputs: nothing to differentiate")
    result = CheckResult(ok, pairs, worst[:show_worst], device, notes, precision="float64" if float64 else
                         "as recorded", eps=eps, within_noise=sum(w["within noise"] for w in worst),
                         failing=len(worst))
    if not ok and float64 is None and _has_float32(kernel):
        try:
            result.float64 = run_gradcheck(bundle, index, approved, eps, atol, rtol, show_worst, float64=True)
        except CheckError as exc:
            result.notes.append(f"no float64 re-run: {exc}")
    return result


FLOAT64_EPS = 1e-6      # the float64 re-run's step: small enough for truncation, far above float64 rounding


def _has_float32(kernel) -> bool:
    from ..core import types as T
    return any(t is T.float32 or getattr(t, "scalar", None) is T.float32
               for _, t in kernel.params)


_widened_kernels: dict[int, tuple] = {}     # id(kernel) -> (kernel, its float64 twin)


def _widened(kernel, name: str):
    """`kernel` widened to float64 (kept beside it); CheckError naming why when it cannot be."""
    from ..core.passes.widen import WidenError
    kept = _widened_kernels.get(id(kernel))
    wide = kept[1] if kept is not None and kept[0] is kernel else None
    if wide is None:
        try:
            wide = kernel.widened()
        except WidenError as exc:
            raise CheckError(str(exc)) from None
        if len(_widened_kernels) >= _MAX_KERNELS:
            _widened_kernels.clear()
        _widened_kernels[id(kernel)] = (kernel, wide)
    return wide


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
