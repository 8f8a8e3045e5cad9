"""Memory side of the interpreter: array arguments, bounds-checked load/store/atomic, the value stack.

Every function here works on *lanes*: `lanes` is an ascending int64 array of the thread ids
that take part in an access, or None for "every thread of the launch". Values are either
NumPy arrays with one entry per thread of the launch, or 0-d NumPy scalars (uniform values:
the same for every thread).

Ordering semantics (what a sequential run of the threads in thread-id order would give):
  * store: when several threads store to one element, the highest thread id wins;
  * atomic add/sub/min/max: updates to one element apply in thread-id order, each thread's
    result is the element's value just before its own update, and float sums round exactly
    as that sequence of float32/float64 additions would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gradkit.backends.base import OUT_OF_BOUNDS, STACK_OVERFLOW, KernelFault
from gradkit.core.ir import Instr

class _Exchange:
    """`xchg` as a ufunc-like pair: the new value replaces the old (so a running 'accumulate' is the input)."""

    def __call__(self, old, value):
        return np.broadcast_to(value, np.shape(old)).astype(np.asarray(old).dtype)

    def accumulate(self, values):
        return values


_UFUNCS = {"add": np.add, "sub": np.subtract, "min": np.minimum, "max": np.maximum, "xchg": _Exchange()}


@dataclass
class ArrayArg:
    """One array argument as the interpreter sees it: a flat scalar view of its host buffer."""

    name: str
    flat: np.ndarray          # ncomp scalars per element, row-major
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # element strides (row-major), not bytes
    ncomp: int


def bind_array(param, arg) -> ArrayArg:
    """View the argument's buffer (a uint8 NumPy array) as the parameter's scalar dtype."""
    t = param.type
    shape = tuple(int(s) for s in arg.shape)
    if len(shape) != t.ndim:
        raise ValueError(f"argument '{param.name}': expected a {t.ndim}-d array, got shape {shape}")
    buf = arg.buffer
    if not isinstance(buf, np.ndarray) or buf.dtype != np.uint8:
        raise TypeError(f"argument '{param.name}': buffer is not a numpy-backend buffer "
                        f"(got {type(buf).__name__}); is the array on another device?")
    ncomp = t.dtype.ncomp
    count = math.prod(shape) * ncomp
    dt = t.scalar.np_dtype
    if buf.nbytes < count * dt.itemsize:
        raise ValueError(f"argument '{param.name}': buffer of {buf.nbytes} bytes is too small for shape "
                         f"{shape}")
    strides = tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))
    return ArrayArg(param.name, buf[:count * dt.itemsize].view(dt), shape, strides, ncomp)


class Faults:
    """The first fault a launch hits (first instruction to fault, lowest thread id within it)."""

    def __init__(self) -> None:
        self.first: KernelFault | None = None

    def record(self, fault: KernelFault) -> None:
        if self.first is None:
            self.first = fault


def all_lanes(n: int, cache: dict) -> np.ndarray:
    lanes = cache.get("all")
    if lanes is None:
        lanes = cache["all"] = np.arange(n, dtype=np.int64)
    return lanes


def lanes_of(mask: np.ndarray | None) -> np.ndarray | None:
    """Thread ids selected by a mask (None: all threads)."""
    return None if mask is None else np.flatnonzero(mask)


def locate(arr: ArrayArg, idx: list, comp: int, lanes: np.ndarray | None, n: int, site: int,
           faults: Faults, cache: dict) -> tuple[np.ndarray | None, np.ndarray | np.integer, bool]:
    """Flat positions accessed by `lanes` at index `idx`, after dropping out-of-range accesses.

    Returns (lanes, positions, clean): positions is a scalar when every index is uniform; `clean`
    is False when some lane was dropped (and a fault recorded)."""
    picked = [i if np.ndim(i) == 0 or lanes is None else i[lanes] for i in idx]
    picked = [np.asarray(i).astype(np.int64) for i in picked]
    count = n if lanes is None else len(lanes)
    bad = None
    for i, ext in zip(picked, arr.shape):
        b = (i < 0) | (i >= ext)
        if np.ndim(b) == 0:
            if not b:
                continue
            b = np.ones(count, dtype=bool)
        bad = b if bad is None else bad | b
    pos = sum(i * s for i, s in zip(picked, arr.strides)) * arr.ncomp + comp
    if bad is None or not bad.any():
        return lanes, pos, True
    # The fault reports the lowest faulting thread and its first out-of-range axis.
    first = int(np.argmax(bad))
    for k, (i, ext) in enumerate(zip(picked, arr.shape)):
        v = int(i if np.ndim(i) == 0 else i[first])
        if not 0 <= v < ext:
            faults.record(KernelFault(OUT_OF_BOUNDS, site=site, value=v, extent=ext, axis=k))
            break
    keep = ~bad
    lanes = (all_lanes(n, cache) if lanes is None else lanes)[keep]
    if np.ndim(pos) != 0:
        pos = pos[keep]
    return lanes, pos, False


def _lane_values(v, lanes: np.ndarray | None):
    return v if np.ndim(v) == 0 or lanes is None else v[lanes]


def load(arr: ArrayArg, lanes, pos, clean: bool, n: int, dtype: np.dtype):
    """The loaded value per thread (0 for threads that did not load)."""
    if clean and (lanes is None or np.ndim(pos) == 0):
        return arr.flat[pos]           # a full-width gather, or one uniform element
    out = np.zeros(n, dtype=dtype)
    if len(lanes):
        out[lanes] = arr.flat[pos]
    return out


def _strictly_increasing(pos: np.ndarray) -> bool:
    return len(pos) < 2 or bool(np.all(pos[1:] > pos[:-1]))


def store(arr: ArrayArg, lanes, pos, value) -> None:
    """Store `value` at `pos` for `lanes`; among threads hitting one element the highest id wins."""
    if lanes is not None and len(lanes) == 0:
        return
    vals = _lane_values(value, lanes)
    if np.ndim(pos) == 0:
        arr.flat[pos] = vals if np.ndim(vals) == 0 else vals[-1]
        return
    if np.ndim(vals) == 0 or _strictly_increasing(pos):
        arr.flat[pos] = vals
        return
    # Keep the last occurrence of each position (NumPy does not promise an order for repeats).
    _, first_from_end = np.unique(pos[::-1], return_index=True)
    keep = len(pos) - 1 - first_from_end
    arr.flat[pos[keep]] = vals[keep]


def atomic(arr: ArrayArg, lanes, pos, value, kind: str, n: int, dtype: np.dtype, wide_sum: bool = False):
    """Apply an atomic update for `lanes` in thread order; returns each thread's old value. `wide_sum`
    (a reduction whose old values are unused): a float32 add or sub runs in float64."""
    count = n if lanes is None else len(lanes)
    if count == 0:
        return np.zeros(n, dtype=dtype)
    vals = np.broadcast_to(np.asarray(_lane_values(value, lanes), dtype=dtype), (count,))
    pos = np.broadcast_to(np.asarray(pos, dtype=np.int64), (count,))
    if wide_sum and kind in ("add", "sub") and vals.dtype == np.float32:
        touched, slot = np.unique(pos, return_inverse=True)
        wide = arr.flat[touched].astype(np.float64)
        sequential_update(wide, slot.astype(np.int64), vals.astype(np.float64), _UFUNCS[kind])
        arr.flat[touched] = wide
        return np.zeros(n, dtype=dtype)            # unused by construction
    old = sequential_update(arr.flat, pos, vals, _UFUNCS[kind])
    if lanes is None:
        return old
    out = np.zeros(n, dtype=dtype)
    out[lanes] = old
    return out


def sequential_update(flat: np.ndarray, pos: np.ndarray, vals: np.ndarray, ufunc) -> np.ndarray:
    """`flat[pos[k]] = ufunc(flat[pos[k]], vals[k])` for k = 0, 1, ... in order; returns the old values.

    Vectorised: distinct positions are independent, so updates are grouped per position
    (stable sort keeps thread order). Positions hit many times are reduced with one
    `ufunc.accumulate` each; the rest in rounds (round r applies every position's r-th update).
    With a threshold of sqrt(len) either loop runs at most ~sqrt(len) times."""
    if _strictly_increasing(pos):                 # no position repeats: one vector op
        old = flat[pos]
        flat[pos] = ufunc(old, vals)
        return old
    order = np.argsort(pos, kind="stable")
    sp, sv = pos[order], vals[order]
    starts = np.flatnonzero(np.concatenate(([True], sp[1:] != sp[:-1])))
    counts = np.diff(np.concatenate((starts, [len(sp)])))
    old_sorted = np.empty_like(sv)
    threshold = max(2, math.isqrt(len(sp)))
    big = counts >= threshold
    for s, c in zip(starts[big].tolist(), counts[big].tolist()):
        p = sp[s]
        acc = ufunc.accumulate(np.concatenate((flat[p:p + 1], sv[s:s + c])))
        old_sorted[s:s + c] = acc[:-1]
        flat[p] = acc[-1]
    small_starts, small_counts = starts[~big], counts[~big]
    by_count = np.argsort(-small_counts, kind="stable")
    small_starts, neg_counts = small_starts[by_count], -small_counts[by_count]
    for r in range(int(-neg_counts[0]) if len(neg_counts) else 0):
        live = int(np.searchsorted(neg_counts, -r, side="left"))   # segments with more than r updates
        hit = small_starts[:live] + r
        p = sp[hit]
        before = flat[p]
        old_sorted[hit] = before
        flat[p] = ufunc(before, sv[hit])
    old = np.empty_like(old_sorted)
    old[order] = old_sorted
    return old


# --------------------------------------------------------------------------- the reverse pass's value stack

def _to_bits(v: np.ndarray) -> np.ndarray:
    """A value as int64 slot contents (floats bit-cast, so every type round-trips exactly)."""
    if v.dtype.kind == "f":
        v = v.view(np.int32 if v.dtype.itemsize == 4 else np.int64)
    return v.astype(np.int64)


def _from_bits(s: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return s.astype(np.int32 if dtype.itemsize == 4 else np.int64).view(dtype)
    return s.astype(dtype)


class ValueStack:
    """Per-thread LIFO stacks of `capacity` 8-byte slots, stored as a (depth, thread) int64 table
    that grows on demand. A push onto a full stack writes nothing and records STACK_OVERFLOW;
    a pop of an empty stack gives 0."""

    def __init__(self, n: int, capacity: int, faults: Faults, cache: dict):
        self.n, self.capacity, self.faults, self.cache = n, capacity, faults, cache
        self.depth = np.zeros(n, dtype=np.int64)
        self.slots = np.zeros((min(capacity, 8), n), dtype=np.int64)

    def push(self, ins: Instr, value, lanes: np.ndarray | None) -> None:
        lanes = all_lanes(self.n, self.cache) if lanes is None else lanes
        d = self.depth[lanes]
        full = d >= self.capacity
        if full.any():
            self.faults.record(KernelFault(STACK_OVERFLOW, site=int(ins.attrs.get("stack", 0))))
            lanes, d = lanes[~full], d[~full]
        if not len(lanes):
            return
        need = int(d.max()) + 1
        if need > len(self.slots):
            rows = min(self.capacity, max(need, 2 * len(self.slots)))
            grown = np.zeros((rows, self.n), dtype=np.int64)
            grown[:len(self.slots)] = self.slots
            self.slots = grown
        vals = np.broadcast_to(np.asarray(_lane_values(value, lanes)), (len(lanes),))
        self.slots[d, lanes] = _to_bits(np.ascontiguousarray(vals))
        self.depth[lanes] = d + 1

    def pop(self, dtype: np.dtype, lanes: np.ndarray | None) -> np.ndarray:
        lanes = all_lanes(self.n, self.cache) if lanes is None else lanes
        d = self.depth[lanes]
        has = d > 0
        lanes, d = lanes[has], d[has] - 1
        self.depth[lanes] = d
        out = np.zeros(self.n, dtype=dtype)
        out[lanes] = _from_bits(self.slots[d, lanes], dtype)
        return out
