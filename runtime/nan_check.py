"""`gk.config.check_nan`: after a launch, an array the kernel wrote that gained a NaN/Inf raises gk.NaNError
naming the kernel, the array, forward or backward, and the first offending element."""

from __future__ import annotations

import numpy as np

from ..core.errors import NaNError
from ..core.ops import WRITES


def _nonfinite(a) -> bool:
    data = np.asarray(a._read())
    return data.dtype.kind == "f" and not np.isfinite(data).all()


def snapshot(spec, call_args) -> dict[int, bool]:
    """Which written arrays already hold a non-finite value (only arrays that gain one are reported)."""
    return {k: _nonfinite(call_args[k]) for k in spec.written}


def check_after_launch(kernel, spec, call_args, variant: str, before: dict[int, bool]) -> None:
    names = [p.name for p in spec.fn.params]
    for k in spec.written:
        a = call_args[k]
        if before.get(k) or not _nonfinite(a):
            continue
        data = np.asarray(a._read())
        bad = np.argwhere(~np.isfinite(data))[0]
        index = tuple(int(i) for i in bad[:a.ndim])
        value = data[tuple(bad)]
        label = getattr(a, "label", None) or names[k]
        if label.startswith("adj_"):
            label = f"{label[4:]}.grad"
        backward = variant.startswith("adjoint")
        site = write_site(spec.fn, k)
        where = f" (written at {site.file}:{site.line})" if site is not None else ""
        err = NaNError(f"kernel '{kernel.key}' ({'backward (adjoint)' if backward else 'forward'} launch) wrote "
                       f"{value} into array '{label}' at index {index if len(index) > 1 else index[0]}{where}; "
                       "it held only finite values before the launch")
        err.kernel, err.array, err.direction = kernel.key, label, "backward" if backward else "forward"
        err.index, err.value = list(index), float(value)
        err.file, err.line = (site.file, site.line) if site is not None else (None, None)
        raise err


def write_site(fn, k: int):
    """The source location of the first store or atomic into parameter `k` of `fn` (None if unknown)."""
    pid = fn.params[k].value.id
    for ins in fn.walk():
        if ins.op in WRITES and ins.args[0].id == pid and ins.loc is not None:
            return ins.loc
    return None
