"""Per-launch array snapshots for debug bundles: value statistics always, copies when under a size cap.

A tape records them when `gk.Tape(snapshots=True)` or `gk.config.snapshot_launches` is on (the debugger's
`gradkit debug` turns it on): before and after each forward launch the values of its array arguments, and
before and after each adjoint launch of `backward()` their gradients. A snapshotting tape calls
`before_launch` / `after_launch` from its recording hooks and `around_adjoint` from `backward`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...core.config import config
from ..state import current as state


def array_stats(data: np.ndarray) -> dict:
    """min / max / mean / L2 norm over the finite entries, plus how many entries are not finite."""
    flat = np.asarray(data).reshape(-1)
    if flat.dtype.kind not in "fiub":
        return {"size": int(flat.size)}
    if flat.dtype.kind == "b":
        flat = flat.astype(np.int64)
    finite = np.isfinite(flat) if flat.dtype.kind == "f" else np.ones(flat.shape, bool)
    good = flat[finite].astype(np.float64)
    out = {"size": int(flat.size), "nonfinite": int(flat.size - good.size), "zeros": int(np.count_nonzero(good == 0))}
    if good.size:
        out.update(min=float(good.min()), max=float(good.max()), mean=float(good.mean()),
                   norm=float(np.sqrt(np.dot(good, good))))
    return out


@dataclass
class Snapshot:
    """One array at one moment: its statistics and, when it fit under the cap, a copy of its data."""

    stats: dict
    data: np.ndarray | None = None


def take(arrays: dict, cap: int) -> dict:
    """{name: Snapshot} for a {name: gradkit array} mapping (None entries are skipped)."""
    out = {}
    for name, a in arrays.items():
        if a is None:
            continue
        data = np.array(a._read(), copy=True)
        out[name] = Snapshot(array_stats(data), data if data.nbytes <= cap else None)
    return out


@dataclass
class LaunchSnapshots:
    """Before/after snapshots of one launch's arrays, keyed by parameter name."""

    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)


@dataclass
class BackwardRecord:
    """One adjoint launch run by `Tape.backward`: which forward record, how long, gradients before/after."""

    record: int
    kernel: str
    ms: float
    grads: LaunchSnapshots
    variant: str | None = None      # the adjoint variant that ran (VariantKey.name; None: it did not start)


def _array_args(kernel, args) -> dict:
    return {name: a for (name, _), a in zip(kernel.params, args) if hasattr(a, "buffer")}


def before_launch(kernel, bound) -> LaunchSnapshots:
    """The array arguments' values before a forward launch (kept on its LaunchRecord)."""
    return LaunchSnapshots(before=take(_array_args(kernel, bound), config.snapshot_max_bytes))


def after_launch(snaps: LaunchSnapshots, kernel, bound) -> None:
    """Their values after it, into the `snaps` that `before_launch` returned."""
    snaps.after = take(_array_args(kernel, bound), config.snapshot_max_bytes)


def around_adjoint(index: int, rec, run, records: list) -> None:
    """Call `run()`, the adjoint launch of forward record `index` (`rec`), with its gradients snapshotted and
    its time taken around it; the BackwardRecord goes into `records` (the tape's `backward_records`) even
    when the launch raises, so a NaN error can name it."""
    grads = {name: getattr(a, "grad", None) for name, a in _array_args(rec.kernel_obj, rec.args).items()}
    snaps = LaunchSnapshots(before=take(grads, config.snapshot_max_bytes))
    t0 = time.perf_counter()
    state.adjoint_variant = None
    try:
        run()
    finally:
        ms = (time.perf_counter() - t0) * 1e3
        snaps.after = take(grads, config.snapshot_max_bytes)
        ran = state.adjoint_variant
        records.append(BackwardRecord(index, rec.kernel, ms, snaps, variant=ran.name if ran is not None else None))
