"""The LLVM CPU backend plugin (`cpu`): compiles lowered IR with llvmlite and launches it in chunks over a
persistent thread pool (ctypes calls release the GIL, so every core works; Ctrl-C stops between chunks);
launches too small to pay for waking a worker run inline."""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import time
import weakref

from ...backends.analysis import local_margin, shared_writes
from ...backends.base import Backend, DeviceInfo, KernelFault, fault_error
from ...backends.capabilities import CONTRACT_VERSION
from ...core.ir import fingerprint
from ...core.locks import fork_safe
from . import jit
from .dispatch import direct_caller
from .kernel import (  # noqa: F401 -- re-exported: tests import the launch-way constants from backend.py
    CHOOSE_BELOW, INLINE_BELOW, INLINE_BELOW_LOOPS, INLINE_WEIGHT, KERNEL_T, POOL_WEIGHT, PROBE_EVERY, PROBE_MAX,
    QUICK_LAUNCHES, QUICK_THREADS, RATIO_CAP, SMALL_LOOP_NS, TRIES, VECTOR_FROM, WHOLE_T, CompiledKernel,
    quick_tier_ok, scalar_tier_ok)
from .layout import HEADER
from .memory import HostMemory
from .schedule import CHUNK_MAX_LOOPS, Pool, chunk_bounds, loop_chunk, run_chunks, split_chunks  # noqa: F401


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1



class CPUBackend(HostMemory, Backend):
    """LLVM CPU backend: one device, "cpu"."""

    name = "cpu"
    contract_version = CONTRACT_VERSION     # built in: implements the whole contract, as it stands

    def conformance_snippets(self) -> dict:
        """The conformance suite's native snippets for this backend (backends/native_snippets.py)."""
        from ..native_snippets import CPU
        return CPU

    # gathered stencil adjoints run their interior threads in a loop of their own without guards, which
    # vectorises (codegen.inner_loops): W4's step adjoint 0.71 -> 0.37 ms against the chunked scatter
    prefers_gather = True

    def __init__(self) -> None:
        self._pool = None
        self._nworkers = _workers()
        self._lock = fork_safe(threading.Lock())
        _BACKENDS.add(self)

    def devices(self):
        return [DeviceInfo("cpu", f"{jit.host_description()}, {self._nworkers} threads", 0,
                           {"threads": self._nworkers, "fp64": True})]

    def compile(self, device, fn, options):
        digest = fingerprint(fn)
        symbol = f"gk_{fn.name}_{digest[:16]}"
        key = jit.cache_key(digest, options.key())

        small_text = []         # the quick tier's module, which the scalar tier's is but for its names

        def text(name, small):
            if small and small_text:
                old, module = small_text.pop()      # used once: by the scalar tier after the quick one
                return module.replace(old, name)    # `old` has the kernel's digest: no other text matches
            from .codegen import Codegen   # imported on a cache miss only: llvmlite.ir and the math library
            # The quick and scalar tiers never run a grid big enough to stream (they are left before that).
            module = Codegen(fn, name, options.debug, options.stack_size, options.fast_math,
                             streaming=not small, proven=options.proven).text()
            if small:
                small_text.append((name, module))
            return module
        upgrade = (text, symbol, key)
        if quick_tier_ok(fn, options):
            built = jit.compile_cached(text, symbol, key, options.cache, jit.QUICK)
        elif scalar_tier_ok(fn, options):
            # a kernel with loops whose scalar code computes what its vectorised code does: the disk cache's
            # best, else compiled at its first launch, scalar below VECTOR_FROM threads (`optimise`)
            built = jit.lookup(options.cache, key, symbol, jit.SCALAR) or (None, "", None)
        else:
            built = jit.compile_cached(text, symbol, key, options.cache, jit.FULL)
        addrs, code, tier = built
        return CompiledKernel(fn, options, addrs, code, upgrade if tier != jit.FULL else None, tier)

    def _executor(self) -> Pool:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = Pool(max(self._nworkers - 1, 1))
        return self._pool

    def launch(self, compiled: CompiledKernel, dim, args, again=None, changed=()) -> None:
        """Run `compiled` over `dim` with `args`. `again` (optional, runtime/launch/plan.py): a token the caller
        passes only with the same `dim` and the same argument values as its last launch with that token,
        except the scalars at positions `changed`; the block packed then is reused (those scalars' slots
        rewritten) when no other launch of `compiled` packed since (see `relaunch`)."""
        lock = compiled.lock
        lock.acquire()      # not `with`: ~0.1 µs less a launch (W5)
        try:
            if len(dim) == 1:
                n = dim[0]
            else:
                n = 1
                for d in dim:
                    n *= d
            if compiled.upgrade is not None and compiled.busy(n):
                compiled.optimise()
            if again is None or compiled.packed is not again:
                compiled.packed = compiled.rerun = None      # a packing that fails midway leaves the block mixed
                compiled.slot_values = None
                try:
                    compiled.packer(dim, args)
                except struct.error:        # a value the packer's format does not take: the per-slot setters
                    compiled.pack_slots(dim, args)
                compiled.packed = again
            elif changed:
                compiled.packed = compiled.rerun = None
                setters = compiled.setters
                held = compiled.slot_values
                if held is None or len(held) != len(args):
                    held = compiled.slot_values = [None] * len(args)
                for k in changed:
                    v = args[k]
                    if held[k] is not v:    # the same NumPy scalar object: the same value, already in its slot
                        setters[k](v)
                        held[k] = v
                compiled.packed = again
            if compiled.can_fault:
                compiled.fault[:] = 0
            if n < compiled.direct_below:       # the common tiny launch
                made = compiled.direct_for
                if made is not None and made[0] is compiled.entry_all:
                    compiled.direct()           # entry_all(block) without ctypes (dispatch.py)
                else:
                    compiled.entry_all(compiled.ptr)
                if again is not None and not compiled.can_fault and compiled.steady(n):
                    if not changed:
                        compiled.rerun = again      # `relaunch` may repeat exactly this
                    if made is None or made[0] is not compiled.entry_all:
                        compiled.direct, keep = direct_caller(compiled.entry_all, compiled.ptr)
                        compiled.direct_for = (compiled.entry_all, keep)
            else:
                self._run(compiled, n, dim, args)
            if compiled.can_fault and compiled.fault[0]:
                f = compiled.fault
                raise fault_error(compiled.fn, KernelFault(int(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4])),
                                  compiled.options)
        finally:
            lock.release()

    def relaunch(self, compiled: CompiledKernel, again) -> bool:
        """Repeat the last `launch` of `compiled`, made with token `again`, when it was a tiny launch that cannot
        fault (one call runs the whole grid), of code that more such launches leave as it is, and nothing
        packed since: True when it ran, False when the caller must `launch` (runtime/launch/plan.py)."""
        lock = compiled.lock
        lock.acquire()
        try:
            if compiled.rerun is not again:
                return False
            compiled.direct()       # entry_all(block) without ctypes (dispatch.py); code replaced since: still valid
            return True
        finally:
            lock.release()

    def _run(self, compiled: CompiledKernel, n: int, dim, args) -> None:
        """A launch of `n` threads, packed: inline or over the pool, as the kernel's measurements say."""
        ptr = compiled.ptr
        if compiled.plain_adds and shared_writes(args, compiled.written):
            # (adds without atomics into memory another written parameter shares: one thread, in order)
            compiled.entry_all(ptr)
            return
        if compiled.loops:
            pool = self._executor() if n >= compiled.inline_below else None
            inline, probe = pool is None, False
            if not inline:
                saving = self._pool_saving_ns(pool)
                inline = compiled.cheap(n, saving)
                if inline and n * compiled.thread_ns >= saving:     # chosen on the pooled launches measured
                    compiled.probe += 1
                    if compiled.probe >= compiled.probe_every:      # now and then pooled again: cores free?
                        compiled.probe = 0
                        inline, probe = False, True
            t0 = time.perf_counter_ns()
            if inline and (pool is None or (compiled.thread_ns is not None and n * compiled.thread_ns < saving / 4)):
                compiled.entry_all(ptr)         # a tiny launch: its wall time (a thread's CPU clock costs ~2 us)
                compiled.thread_ns = compiled.wall_ns = (time.perf_counter_ns() - t0) / n
            elif inline:
                c0 = time.thread_time_ns()
                compiled.entry_all(ptr)
                compiled.thread_ns = (time.thread_time_ns() - c0) / n
                took = time.perf_counter_ns() - t0
                compiled.wall_ns = took / n
                compiled.took(n, took, False)
            else:
                workers, own, own_ns = self._pooled(compiled, n, dim, args, pool)
                took = time.perf_counter_ns() - t0
                # pooled time ~ wake-up + n * wall_ns / workers
                compiled.wall_ns = max(took - pool.wake_ns, 0) * workers / n
                # one core's CPU time per thread: the calling thread's first chunk (it always takes one)
                compiled.thread_ns = own_ns / own if own else compiled.wall_ns
                compiled.took(n, took, True, probe)
            return
        if n < compiled.inline_below:
            compiled.entry_all(ptr)
            return
        choosing = n < compiled.choose_below
        t0 = time.perf_counter_ns() if choosing else 0
        if choosing and compiled.inline(n):
            compiled.entry_all(ptr)
            compiled.timed(n, True, time.perf_counter_ns() - t0)
        else:
            self._pooled(compiled, n, dim, args, self._executor())
            if choosing:
                compiled.timed(n, False, time.perf_counter_ns() - t0)

    def _pool_saving_ns(self, pool: Pool) -> float:
        """Below this inline time a launch runs inline: t < wake + t / W when t < wake * W / (W - 1)."""
        w = self._nworkers
        return float("inf") if w < 2 else pool.wake_ns * w / (w - 1)

    def _pooled(self, compiled: CompiledKernel, n: int, dim, args, pool: Pool) -> tuple[int, int, int]:
        """Run the launch in chunks over the pool and the calling thread: the number of threads it used, and
        the grid threads the calling thread ran and its nanoseconds on them (schedule.run_chunks)."""
        entry, cap = compiled.entry, compiled.chunk_max
        if compiled.entry_local is not None:
            margin = local_margin(compiled.local_shifts, dim)
            entry = split_chunks(compiled.entry, compiled.entry_local, margin)
        if compiled.loops:      # chunks of about CHUNK_NS, long enough for a middle past the margins
            # by the wall time per thread where it is longer: on a busy machine smaller chunks, so that a worker
            # the OS pauses mid-chunk holds less of the launch (W3's adjoint: 3.3 ms at best, 7 by CPU time)
            per = compiled.thread_ns
            if per is not None and compiled.wall_ns is not None and compiled.wall_ns > per:
                per = compiled.wall_ns
            cap = loop_chunk(per, 8 * margin if compiled.entry_local is not None else 0)
        bounds = chunk_bounds(n, self._nworkers, cap)
        workers = min(self._nworkers, len(bounds) - 1)
        ptr = compiled.ptr
        if compiled.private:
            blocks = compiled.worker_blocks(args, workers)
            ptrs = [ptr] + [ctypes.addressof(blk) for blk in blocks]
        else:
            ptrs = [ptr] * workers
        own, own_ns = run_chunks(entry, bounds, ptrs, pool)
        if compiled.private:
            compiled.gather(args, workers)
        return workers, own, own_ns

    def synchronize(self, device) -> None:
        pass

    def source(self, compiled: CompiledKernel) -> str:
        """The optimised LLVM IR (compiled now if the kernel still runs quick-tier code)."""
        with compiled.lock:
            if compiled.upgrade is not None:
                compiled.optimise(jit.FULL)
        return compiled.text


_BACKENDS: "weakref.WeakSet[CPUBackend]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has none of the pool's worker threads: it makes a pool of its own at its first
    pooled launch (the parent's executor is dropped, not shut down: shutting down would wait on them)."""
    for backend in list(_BACKENDS):
        backend._pool = None


if hasattr(os, "register_at_fork"):      # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["CPUBackend", "HEADER"]
