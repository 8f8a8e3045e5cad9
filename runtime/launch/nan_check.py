"""`gk.config.check_nan`: after a launch, an array the kernel wrote that gained a NaN/Inf raises gk.NaNError
naming the kernel, the array, forward or backward, the first offending element, and the operation that
produced it (runtime/launch/op_trace.py re-runs the launch's threads in Python to find it).

For that re-run the check keeps, before each launch, copies of the written arrays the kernel also reads or
updates atomically (adjoint kernels accumulate into their gradients): the cost of the check is about one more
pass over those arrays."""

from __future__ import annotations

import numpy as np

from ...core.errors import NaNError
from ...core.ir import Function
from ...core.ops import Op, WRITES
from .op_trace import find_origin


def _nonfinite(a) -> bool:
    data = np.asarray(a._read())
    return data.dtype.kind == "f" and not np.isfinite(data).all()


def _reread(fn: Function) -> frozenset:
    """Parameter indices of `fn` that it both writes and reads back (loads or atomics)."""
    ids = {p.value.id: k for k, p in enumerate(fn.params)}
    return frozenset(ids[ins.args[0].id] for ins in fn.walk()
                     if ins.op in (Op.LOAD, Op.ATOMIC) and ins.args[0].id in ids)


def snapshot(spec, call_args) -> dict[int, tuple]:
    """{written param: (already held a non-finite value, its data before the launch when the kernel reads it
    back)}: only arrays that gain a NaN/Inf are reported, and the copies let the op trace start from them."""
    reread = getattr(spec, "nan_reread", None)
    if reread is None:
        reread = spec.nan_reread = _reread(spec.fn) & frozenset(spec.written)
    out = {}
    for k in spec.written:
        data = np.asarray(call_args[k]._read())
        bad = data.dtype.kind == "f" and not np.isfinite(data).all()
        out[k] = (bad, data.copy() if k in reread else None)
    return out


def check_after_launch(kernel, spec, call_args, variant: str, before: dict[int, tuple], dims=()) -> None:
    names = [p.name for p in spec.fn.params]
    for k in spec.written:
        a = call_args[k]
        if before.get(k, (False,))[0] or not _nonfinite(a):
            continue
        data = np.asarray(a._read())
        bad = np.argwhere(~np.isfinite(data))[0]
        index = tuple(int(i) for i in bad[:a.ndim])
        value = data[tuple(bad)]
        label = getattr(a, "label", None) or names[k]
        if label.startswith("adj_"):
            label = f"{label[4:]}.grad"
        backward = variant.adjoint
        site = write_site(spec.fn, k)
        where = f" (written at {site.file}:{site.line})" if site is not None else ""
        origin = _origin(kernel, spec, call_args, before, dims, k, index, backward)
        because = f". First non-finite value: {origin.describe()}" if origin is not None else ""
        err = NaNError(f"kernel '{kernel.key}' ({'backward (adjoint)' if backward else 'forward'} launch) wrote "
                       f"{value} into array '{label}' at index {index if len(index) > 1 else index[0]}{where}; "
                       f"it held only finite values before the launch{because}")
        err.kernel, err.array, err.direction = kernel.key, label, "backward" if backward else "forward"
        err.index, err.value = list(index), float(value)
        err.file, err.line = (site.file, site.line) if site is not None else (None, None)
        err.origin = origin.as_dict() if origin is not None else None
        raise err


def _origin(kernel, spec, call_args, before, dims, k: int, index: tuple, backward: bool):
    """The op trace of the offending element (None when it finds no single op, or cannot run)."""
    if not dims:
        return None
    args = []
    for j, a in enumerate(call_args):
        saved = before.get(j, (False, None))[1]
        args.append(saved if saved is not None else (np.asarray(a._read()) if hasattr(a, "_read") else a))
    try:
        forward = kernel.lowered("forward") if backward else None
    except Exception:          # noqa: BLE001  (a kernel without a forward IR: trace without the tie)
        forward = None
    try:
        return find_origin(spec.fn, tuple(dims), args, k, index, forward=forward)
    except Exception:          # noqa: BLE001  (the trace is a diagnosis aid: the NaN error stands without it)
        return None


def write_site(fn, k: int):
    """The source location of the first store or atomic into parameter `k` of `fn` (None if unknown)."""
    pid = fn.params[k].value.id
    for ins in fn.walk():
        if ins.op in WRITES and ins.args[0].id == pid and ins.loc is not None:
            return ins.loc
    return None
