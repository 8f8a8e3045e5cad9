"""Host-side array writes on a tape: `assign`, `copy()`/`to()`, `fill_`, `zero_` and `gk.copy`.

Inside gk.ForwardMode such a write carries the source's tangent (or zero) into the destination's dual.
While a tape records, a write into an array with `requires_grad` is a step of the computation like a
launch (Warp records `wp.copy`): the tape keeps a record whose backward moves the overwritten range's
gradient into the source's gradient (a copy) or drops it (a constant: assign from host data, fill_,
zero_). Without it, gradients would flow through the overwritten values as if the write never happened.
"""

from __future__ import annotations

import numpy as np

from ...backends.analysis import shares_memory
from ..state import current as state


def _rows(a) -> np.ndarray:
    """The array's data on the host as (size, ncomp) rows (a view on host-memory devices)."""
    return a._read().reshape(a.size, -1)


def _write_rows(a, rows: np.ndarray) -> None:
    if a._host is None:                       # device memory: write the host copy back
        a._write_host(rows.reshape(a._host_shape))
    a._bump()


def move_gradient(dst, src, dst_offset: int, src_offset: int, count: int) -> None:
    """Backward of `dst[dst_offset:+count] = src[src_offset:+count]` (src None: a constant): the destination
    range's gradient is taken (reset to zero: those values no longer reach the loss), then added to the
    source's. In that order, so a copy within one memory (views, overlapping ranges) routes it right.
    Inside gk.ForwardMode (forward-over-reverse) the gradients' tangents move the same way."""
    g = dst.grad
    if g is None or count == 0:
        return
    fmode = state.forward_mode
    if fmode is not None:
        src_grad = src.grad if src is not None else None
        _move(fmode.dual_of(g), None if src_grad is None else fmode.dual_of(src_grad), dst_offset, src_offset,
              count)
    _move(g, src.grad if src is not None else None, dst_offset, src_offset, count)


def _move(g, src_g, dst_offset: int, src_offset: int, count: int) -> None:
    """Take g's range (reset it) and add it to src_g's range (None: drop it)."""
    rows = _rows(g)
    part = rows[dst_offset:dst_offset + count].copy()
    rows[dst_offset:dst_offset + count] = 0
    _write_rows(g, rows)
    if src_g is not None and part.any():
        src_rows = _rows(src_g)               # read after the reset: it may be the same memory
        src_rows[src_offset:src_offset + count] += part.astype(src_rows.dtype)
        _write_rows(src_g, src_rows)


def carry_tangent(dst, src, dst_offset: int, src_offset: int, count: int) -> None:
    """Inside gk.ForwardMode: the written range's tangent is the source's (zero for a constant write)."""
    fmode = state.forward_mode
    if fmode is None or count == 0 or (dst.dual is None and (src is None or src.dual is None)):
        return
    d = fmode.dual_of(dst)
    rows = _rows(d)
    if src is None or src.dual is None:
        rows[dst_offset:dst_offset + count] = 0
    else:
        rows[dst_offset:dst_offset + count] = _rows(fmode.dual_of(src))[src_offset:src_offset + count]
    _write_rows(d, rows)


def record(name: str, dst, src=None, dst_offset: int = 0, src_offset: int = 0, count: int | None = None) -> None:
    """Put a host write on the recording tape (if any) when gradients can flow through `dst`, and carry
    its tangent inside gk.ForwardMode."""
    n = dst.size if count is None else count
    carry_tangent(dst, src, dst_offset, src_offset, n)
    tape = state.tape
    if tape is None or not dst.requires_grad:
        return
    tape.record_host_write(name, lambda: move_gradient(dst, src, dst_offset, src_offset, n), dst, src,
                           whole=dst_offset == 0 and n == dst.size)


def copy(dst, src, dest_offset: int = 0, src_offset: int = 0, count: int | None = None):
    """`gk.copy`: copy `count` elements of `src` from `src_offset` into `dst` at `dest_offset` (flat element
    indices; all of `src` by default); recorded on a tape and differentiated like a launch. Returns dst.

    Args:
        dst: the array written (same dtype as `src`; any device).
        src: the array read.
        dest_offset: the first element of `dst` written (a flat index).
        src_offset: the first element of `src` read (a flat index).
        count: how many elements; None: from `src_offset` to the end of `src`."""
    from .array import array
    for name, a in (("dst", dst), ("src", src)):
        if not isinstance(a, array):
            raise TypeError(f"gk.copy: {name} must be a gk.array, got {type(a).__name__}")
    if dst.dtype.shape != src.dtype.shape:
        raise ValueError(f"gk.copy: dst has elements of type {dst.dtype.name}, src {src.dtype.name}; "
                         "their shapes must match")
    for name, v in (("dest_offset", dest_offset), ("src_offset", src_offset)):
        if not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"gk.copy: {name} must be a non-negative int, got {v!r}")
    if src_offset > src.size:
        raise ValueError(f"gk.copy: src_offset {src_offset} is past src's {src.size} elements")
    n = src.size - src_offset if count is None else count
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"gk.copy: count must be a non-negative int, got {count!r}")
    if src_offset + n > src.size:
        raise ValueError(f"gk.copy: src_offset {src_offset} + count {n} is past src's {src.size} elements")
    if dest_offset + n > dst.size:
        raise ValueError(f"gk.copy: dest_offset {dest_offset} + count {n} is past dst's {dst.size} elements")
    same = dst.device is src.device and shares_memory(dst, src)   # views of one array, overlapping host memory
    whole = dest_offset == 0 and src_offset == 0 and n == dst.size == src.size
    if whole and dst.device is src.device and dst.dtype is src.dtype and not same:
        if dst.nbytes:
            dst.device.impl.copy(dst.device.info, dst.buffer, src.buffer, dst.nbytes)
        dst._bump()
    elif n:
        # overlapping ranges copy as memmove does (the source read whole before the destination is written)
        part = _rows(src)[src_offset:src_offset + n].copy()
        rows = _rows(dst)
        rows[dest_offset:dest_offset + n] = part
        _write_rows(dst, rows)
    record("copy", dst, src, dest_offset, src_offset, n)
    return dst
