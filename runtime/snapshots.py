"""Per-launch array snapshots for debug bundles: value statistics always, copies when under a size cap.

A tape records them when `gk.Tape(snapshots=True)` or `gk.config.snapshot_launches` is on (the debugger's
`gradkit debug` turns it on): before and after each forward launch the values of its array arguments, and
before and after each adjoint launch of `backward()` their gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
