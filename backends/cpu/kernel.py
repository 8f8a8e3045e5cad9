"""One compiled CPU kernel and its launch-way state: its entry points, argument block, code tier and the
timings that choose inline against pooled launches (split out of backend.py, which compiles and launches)."""

from __future__ import annotations

import ctypes
import os
import struct
import threading

import numpy as np

from ...backends.analysis import local_scatters, loop_sum_chains, reduction_sites, written_params
from ...core import types as T
from ...core.locks import COMPILING, fork_safe
from ...core.ops import LOOPS, Op
from . import jit
from .layout import layout_of
from .memory import HostBuffer
from .packing import make_packer
from .schedule import CHUNK_MAX, CHUNK_MAX_LOOPS, CHUNK_NS


KERNEL_T = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
WHOLE_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
INLINE_BELOW = 1 << 15      # straight-line kernels with fewer threads run on the calling thread
INLINE_BELOW_LOOPS = 64     # kernels with loops do far more work per thread: split them much earlier
# Between INLINE_BELOW and CHOOSE_BELOW threads a straight-line kernel runs both ways a couple of times
# per power-of-two size and keeps the faster: handing chunks to the pool costs tens of microseconds on a
# virtual machine (a worker's wake-up, then the caller's), which a launch of 2^15-2^19 threads may not
# win back — measured here, tiny kernel at 2^17 threads 28.6 us pooled vs 9.5 us on one thread.
CHOOSE_BELOW = 1 << 21
TRIES = 2                   # timed launches of each way per size before choosing
# A kernel with loops of INLINE_BELOW_LOOPS..CHUNK_MAX_LOOPS threads (at most one chunk's work, so Ctrl-C
# waits no longer than for a chunk) runs inline when its measured time per thread says the whole launch
# costs less on one thread than waking the pool (Pool.wake_ns, measured) and splitting the work: every
# launch of such a kernel is timed and updates the estimate (loop trip counts follow the arguments).
# Measured here: 64 threads of an 8-iteration loop, 39 us pooled against a few us inline.
# thread_ns is CPU time (the calling thread's own, on its chunks when pooled), so that a thread the OS paused
# does not make the kernel look costlier: on a busy machine that made 1000 threads of ~0.24 ms look like
# 10-120 ms, and the launch pooled. Above the inline bound, a small launch (n * thread_ns at most
# SMALL_LOOP_NS) also runs inline while its pooled launches were no faster than its inline ones: a moving
# average (weight POOL_WEIGHT) of pooled wall times over n * thread_ns against one (INLINE_WEIGHT) of the same
# for inline launches (each ratio capped at RATIO_CAP; inline ones exceed 1 where the OS pauses the caller:
# a mean, not a median, as the expected time is what a step waits for). On a busy 2-core
# machine the worker's wake-up, or a worker paused mid-chunk, made example_mesh's 1000-thread simulate
# launches (~0.24 ms inline) take 0.26-0.29 ms at the median and up to 3 ms pooled. Every PROBE_EVERY-th
# launch so chosen runs pooled again, so that freed cores are noticed; each probe that finds the pool no
# faster doubles the interval, up to PROBE_MAX (a probe on a busy machine costs milliseconds).
SMALL_LOOP_NS = CHUNK_NS     # one chunk's work: longer launches (W3's n-body, 1.2 and 3.2 ms) stay pooled
POOL_WEIGHT = 0.25
INLINE_WEIGHT = 0.125
RATIO_CAP = 4.0
PROBE_EVERY = 16
PROBE_MAX = 512

# Tiered compilation of straight-line kernels: the first launches run code from the quick tier (no IR
# passes, -O0 code generation: ~1 ms instead of ~15 ms), and the optimised, vectorised code is compiled
# when the kernel proves busy — a launch of INLINE_BELOW threads or more, more than QUICK_LAUNCHES
# launches, or QUICK_THREADS threads in all — or its source is asked for. Scripts that define many small
# kernels and launch each a few times (tests, notebooks, W7's 2000 kernels) then skip most of LLVM.
# GRADKIT_CPU_QUICK_TIER=0 in the environment compiles optimised code from the start.
# A busy kernel none of whose launches so far reached VECTOR_FROM threads gets the scalar tier (jit.SCALAR:
# -O3 without the loop vectoriser, which cannot fill a vector from a few dozen threads and is most of -O3's
# time on big bodies); a later launch of VECTOR_FROM threads or more compiles the vectorised code.
QUICK_LAUNCHES = 32
QUICK_THREADS = 1 << 16
VECTOR_FROM = 64


def quick_tier_ok(fn, options) -> bool:
    """Whether `fn` may start on the quick tier: it must compute bit-identical results at -O0 and -O3
    (`scalar_tier_ok`); kernels with loops are worth optimising from the start."""
    return scalar_tier_ok(fn, options) and not any(ins.op in LOOPS for ins in fn.walk())


def scalar_tier_ok(fn, options) -> bool:
    """Whether `fn`'s code computes bit-identical results on every tier (quick, scalar, vectorised): nothing
    LLVM may reassociate (fast math, loop sums, per-range reduction accumulators) and no native snippet (its
    IR is the user's). GRADKIT_CPU_QUICK_TIER=0 in the environment: vectorised code from the start."""
    if options.fast_math or os.environ.get("GRADKIT_CPU_QUICK_TIER", "1") == "0":
        return False
    for ins in fn.walk():
        if ins.op == Op.NATIVE:
            return False
        if ins.op == Op.FOR and loop_sum_chains(ins.regions[0], ins.regions[0].params[1:]):
            return False
    return options.debug or not reduction_sites(fn)



class CompiledKernel:
    """A compiled kernel: entry point and a reusable packed-argument block with pre-bound setters.

    The block, the fault record and the workers' scatter buffers are reused by every launch, so a launch
    holds `lock` from packing to gathering: launches of one kernel from several Python threads take turns,
    launches of different kernels run at the same time."""

    def __init__(self, fn, options, addrs: tuple[int, int] | None, text: str, upgrade=None,
                 tier: str | None = jit.FULL):
        self.fn, self.options, self.text = fn, options, text
        self._entries(addrs)
        # Below the FULL tier (or before the first launch: tier None, addrs None): (module text function,
        # symbol, cache key) to compile better code with; None once vectorised.
        self.upgrade = upgrade
        self.tier = tier
        self.quick_launches = self.quick_threads = 0
        self.widest = 0                     # the most threads of a launch counted by `busy`
        self.layout = layout_of(fn)
        self.can_fault = options.debug or any(i.op == Op.PUSH for i in fn.walk())
        loops = self.loops = any(i.op in LOOPS for i in fn.walk())
        self.inline_below = INLINE_BELOW_LOOPS if loops else INLINE_BELOW
        self.direct_below = 0 if loops else INLINE_BELOW   # launch() calls entry_all below this at once
        self.choose_below = INLINE_BELOW_LOOPS if loops else CHOOSE_BELOW
        self.ways: dict[int, list] = {}     # log2 size -> [pooled ns/thread, pooled tries, inline ns, tries]
        self.thread_ns: float | None = None     # kernels with loops: one thread's last measured CPU time, one core
        self.wall_ns: float | None = None       # ... and its wall time as the launch saw it (chunk sizes: below)
        # kernels with loops: moving averages of small pooled launches' wall / (n * thread_ns), the count of
        # those, and the same average for inline ones above the inline bound (None: none measured)
        self.pool_ratio: float | None = None
        self.pool_count = 0
        self.inline_ratio: float | None = None
        self.probe = 0                          # launches run inline on those ratios since the last pooled one
        self.probe_every = PROBE_EVERY          # ... before the next pooled one (doubled by each probe lost)
        self.chunk_max = CHUNK_MAX_LOOPS if loops else CHUNK_MAX
        self.fault = np.zeros(8, np.int64)
        size = self.layout.size
        self.block = (ctypes.c_int64 * size)()
        self.as_f64 = (ctypes.c_double * size).from_buffer(self.block)
        self.as_f32 = (ctypes.c_float * (2 * size)).from_buffer(self.block)
        self.ptr = ctypes.addressof(self.block)
        self.block[4] = self.fault.ctypes.data
        self.setters = [self._setter(off, kind, t) for off, kind, t in self.layout.slots]
        self.packer = make_packer(self.layout, self.block, self.block[4])
        self.private = sorted(self.layout.private.items())      # (param index, slot)
        self.local_shifts = [s for shifts in local_scatters(fn).values() for s in shifts]
        # Workers add into some arrays without atomics (private buffers, chunk middles): right only while no
        # other written parameter shares their memory. (Exclusive adds are the launch's concern: runtime/
        # launch.py picks the adjoint without them for such launches, on every backend.)
        self.written = written_params(fn)
        self.plain_adds = len(self.written) > 1 and bool(self.private or self.local_shifts)
        self.scratch: dict = {}                                  # (worker, param index) -> HostBuffer
        self.lock = fork_safe(threading.Lock())
        self.packed = None      # the `again` token of the launch whose arguments the block holds (launch)
        # per position, the scalar (an immutable NumPy scalar) a `changed` launch last wrote to its slot since the
        # block was packed: a struct plan rewrites a geometry handle's dozen scalar fields, most the same objects
        self.slot_values: list | None = None
        self.rerun = None       # the `again` token of a tiny launch that `relaunch` may repeat as it is
        self.direct = None      # `relaunch`'s call of entry_all on the block (dispatch.py), made for `direct_for`
        self.direct_for = None  # (entry_all, what the call needs kept alive)

    def inline(self, n: int) -> bool:
        """Whether a launch of `n` threads (at least inline_below) runs on the calling thread: the faster
        way measured at its size, after TRIES timed launches each way."""
        if n >= self.choose_below:
            return False
        w = self.ways.get(n.bit_length())
        if w is None or w[1] < TRIES:
            return False
        if w[3] < TRIES:
            return True
        return w[2] < w[0]

    def timed(self, n: int, inline: bool, ns: int) -> None:
        """Record a launch of `n` threads that took `ns` nanoseconds one way (see `inline`)."""
        w = self.ways.setdefault(n.bit_length(), [float("inf"), 0, float("inf"), 0])
        k = 2 if inline else 0
        w[k] = min(w[k], ns / n)
        w[k + 1] += 1

    def cheap(self, n: int, pool_ns: float) -> bool:
        """Whether a launch of `n` threads of this kernel with loops runs inline: no longer than a chunk, and
        its estimated time on one thread below `pool_ns`, what splitting it over the pool would save at best,
        or at most SMALL_LOOP_NS while its recent pooled launches were no faster (`pool_slower`)."""
        if n > CHUNK_MAX_LOOPS or self.thread_ns is None:
            return False
        t = n * self.thread_ns
        return t < pool_ns or (t <= SMALL_LOOP_NS and self.pool_slower())

    def pool_slower(self) -> bool:
        """Whether this kernel's small pooled launches (two at least) took as long as its inline ones, on
        average, for their CPU time (inline counts 1 until measured)."""
        inline = self.inline_ratio if self.inline_ratio is not None else 1.0
        return self.pool_count >= 2 and self.pool_ratio >= inline

    def took(self, n: int, ns: int, pooled: bool, probe: bool = False) -> None:
        """Record a launch of `n` threads (pooled or inline) that took `ns` wall, against n * thread_ns; `probe`:
        it ran pooled only to measure (see PROBE_EVERY)."""
        t = n * self.thread_ns if self.thread_ns else 0.0
        if not (0 < t <= SMALL_LOOP_NS and n <= CHUNK_MAX_LOOPS):
            return
        r = min(ns / t, RATIO_CAP)
        if not pooled:
            old = self.inline_ratio
            self.inline_ratio = r if old is None else old + INLINE_WEIGHT * (r - old)
            return
        old = self.pool_ratio
        self.pool_ratio = r if old is None else old + POOL_WEIGHT * (r - old)
        self.pool_count += 1
        if probe:       # lost: probe half as often; won (this launch beat inline): as often as at first
            won = r < (self.inline_ratio if self.inline_ratio is not None else 1.0)
            self.probe_every = PROBE_EVERY if won else min(2 * self.probe_every, PROBE_MAX)

    def busy(self, n: int) -> bool:
        """Count a launch of `n` threads below the FULL tier; True when the kernel deserves better code: on
        the quick tier once it is busy (see QUICK_LAUNCHES), on the scalar tier at its first wide launch."""
        if n > self.widest:
            self.widest = n
        if self.tier is None:               # not compiled yet (CPUBackend.compile): by this launch's size
            return True
        if self.tier == jit.SCALAR:
            return n >= VECTOR_FROM
        self.quick_launches += 1
        self.quick_threads += n
        return n >= INLINE_BELOW or self.quick_launches > QUICK_LAUNCHES or self.quick_threads >= QUICK_THREADS

    def steady(self, n: int) -> bool:
        """Whether more launches of `n` threads leave the code as it is (`busy` stays False for them), so that
        `relaunch` may skip asking."""
        return self.upgrade is None or (self.tier == jit.SCALAR and n < VECTOR_FROM)

    def optimise(self, tier: str | None = None) -> None:
        """Replace the code with optimised code (caller holds `lock`): `tier`, by default SCALAR while no
        launch reached VECTOR_FROM threads, else FULL."""
        if tier is None:
            tier = jit.FULL if self.widest >= VECTOR_FROM else jit.SCALAR
        text_fn, symbol, key = self.upgrade
        with COMPILING:
            addrs, self.text, self.tier = jit.compile_cached(text_fn, symbol, key, self.options.cache, tier)
        self._entries(addrs)
        if self.tier == jit.FULL:
            self.upgrade = None

    def _entries(self, addrs) -> None:
        if addrs is None:                           # compiled at the first launch (CPUBackend.compile)
            self.entry = self.entry_all = self.entry_local = None
            return
        self.entry = KERNEL_T(addrs[0])             # (start, end, args): a range of threads
        self.entry_all = WHOLE_T(addrs[1])          # (args): the whole grid, for inline launches
        # (start, end, args) with the shifted scatter-adds plain: the middle of a chunk (codegen.py LOCAL)
        self.entry_local = KERNEL_T(addrs[2]) if addrs[2] else None

    def _setter(self, off, kind, t):
        block, f64, f32 = self.block, self.as_f64, self.as_f32
        if kind == "array":
            def set_array(a):
                block[off] = a.buffer.ptr
                for k, e in enumerate(a.shape, start=off + 1):
                    block[k] = e
            return set_array
        if t is T.float64:
            def set_f64(v):
                f64[off] = v
            return set_f64
        if t is T.float32:
            def set_f32(v):
                block[off] = 0
                f32[2 * off] = v
            return set_f32

        def set_int(v):
            block[off] = int(v)
        return set_int

    def pack(self, dim, args) -> int:
        self.packed = self.rerun = None
        self.slot_values = None
        try:
            self.packer(dim, args)
        except struct.error:        # a value the packer's format does not take: the per-slot setters
            self.pack_slots(dim, args)
        return self.ptr

    def pack_slots(self, dim, args) -> int:
        self.packed = self.rerun = None
        self.slot_values = None
        block = self.block
        n = len(dim)
        block[0] = dim[0]
        block[1] = dim[1] if n > 1 else 1
        block[2] = dim[2] if n > 2 else 1
        block[3] = dim[3] if n > 3 else 1
        for setter, a in zip(self.setters, args):
            setter(a)
        for k, slot in self.private:
            block[slot] = args[k].buffer.ptr      # a single worker scatters straight into the array
        return self.ptr

    def worker_blocks(self, args, workers: int) -> list:
        """Argument blocks for workers 1..n-1, each scattering into its own zeroed buffer."""
        out = []
        for w in range(1, workers):
            blk = (ctypes.c_int64 * self.layout.size)()
            ctypes.memmove(blk, self.block, ctypes.sizeof(blk))
            for k, slot in self.private:
                need = args[k].nbytes
                buf = self.scratch.get((w, k))
                if buf is None or buf.nbytes < need:
                    buf = self.scratch[(w, k)] = HostBuffer(need)
                else:
                    buf.data[:need] = 0
                blk[slot] = buf.ptr
            out.append(blk)
        return out

    def gather(self, args, workers: int) -> None:
        """Add the workers' scatter buffers into the real arrays."""
        for k, _ in self.private:
            a = args[k]
            dt = a.dtype.scalar.np_dtype
            dst = a.buffer.data[:a.nbytes].view(dt)
            for w in range(1, workers):
                dst += self.scratch[(w, k)].data[:a.nbytes].view(dt)
