"""One launch's thread range in chunks: the calling thread and the pool's workers take chunks in turn from a
shared counter (uneven threads balance themselves), and Ctrl-C stops a launch between chunks — the workers
finish the chunk they are in, nothing starts after, and KeyboardInterrupt reaches the caller only once no
worker touches the launch's arrays any more.

The pool is persistent threads each asleep on a lock of its own: a launch wakes the idle ones with one
release each and waits on one lock each (about 13 us a round trip on a loaded 2-core VM, against 21 us for a
ThreadPoolExecutor's submit and result, which also allocate a future, a work item and a condition). A worker
the OS has not run yet by the time the caller ran out of chunks is cancelled, not waited for (on a busy
machine its wake-up can take longer than the whole launch)."""

from __future__ import annotations

import itertools
import threading
import time

CHUNK_MAX = 1 << 23         # threads per chunk of a straight-line kernel (about 5 ms of W1)
CHUNK_MAX_LOOPS = 1 << 12   # threads per chunk of a kernel with loops (far more work per thread)
# Kernels with loops whose time per thread is measured get chunks of about CHUNK_NS (a power of two of
# threads, CHUNK_MIN_LOOPS..CHUNK_MAX_LOOPS): 8192 DEM particles at ~4 us each made 2 chunks of 15 ms, so
# a worker the OS paused left the other idle for up to a whole chunk; a chunk costs ~1-2 us to hand out.
CHUNK_NS = 500_000
CHUNK_MIN_LOOPS = 64


def loop_chunk(thread_ns: float | None, floor: int = 0) -> int:
    """Threads per chunk of a kernel with loops that takes `thread_ns` per thread (None: not measured yet),
    at least `floor`."""
    if not thread_ns:
        return CHUNK_MAX_LOOPS
    fit = max(int(CHUNK_NS / thread_ns), CHUNK_MIN_LOOPS)
    return min(max(1 << (fit.bit_length() - 1), floor), CHUNK_MAX_LOOPS)


def chunk_bounds(n: int, workers: int, cap: int) -> list[int]:
    """Bounds of at least `workers` near-equal chunks of range(n), none longer than `cap` threads. (Four
    chunks per worker, to balance a worker that wakes late, measured no faster here: 2^17-2^22 threads.)"""
    chunks = max(workers, -(-n // cap))
    return [n * k // chunks for k in range(chunks + 1)]


def split_chunks(edges, middle, margin: int):
    """An entry(lo, hi, ptr) running `edges` on the first and last `margin` threads of each chunk and
    `middle` (no atomics on the arrays whose adds only meet within `margin`) between them."""
    def entry(lo: int, hi: int, ptr) -> None:
        if hi - lo <= 2 * margin:
            edges(lo, hi, ptr)
            return
        edges(lo, lo + margin, ptr)
        middle(lo + margin, hi - margin, ptr)
        edges(hi - margin, hi, ptr)
    return entry


class _Worker:
    """A daemon thread asleep on `go` (held while it sleeps). Woken, it takes `start` (free while a job
    waits) and runs `job(ptr)`, then releases `done`; if the caller took `start` first, the job was
    cancelled and the worker puts itself back on the idle list. All three locks are held while it is idle."""

    def __init__(self, name: str, idle: list):
        self.go, self.start, self.done = threading.Lock(), threading.Lock(), threading.Lock()
        self.go.acquire()
        self.start.acquire()
        self.done.acquire()
        self.idle = idle
        self.job = self.handed = None     # handed: the last job given, kept (see _give_back)
        self.ptr = 0
        self.error: BaseException | None = None
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def hand(self, job, ptr) -> None:
        """Give the (borrowed) worker `job(ptr)` and wake it."""
        self.handed = job
        self.job, self.ptr = job, ptr
        self.start.release()
        self.go.release()

    def cancel(self) -> bool:
        """Whether the job was withdrawn before the worker started it (it then returns to idle itself)."""
        return self.start.acquire(False)

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            if not self.start.acquire(False):       # cancelled: the caller went on without this worker
                self.job = None
                self.idle.append(self)
                continue
            try:
                self.job(self.ptr)
            except BaseException as exc:    # handed to the caller, which raises it
                self.error = exc
            self.job = None
            self.done.release()


class Pool:
    """`size` persistent workers. A launch borrows the idle ones (list pop and append are atomic under the
    GIL, so launches from several Python threads share the pool; one that finds none idle runs alone) and
    gives each back once it has waited for it."""

    def __init__(self, size: int, prefix: str = "gradkit-cpu"):
        self.size = size
        self.idle: list[_Worker] = []
        self.idle.extend(_Worker(f"{prefix}_{k}", self.idle) for k in range(size))
        self.wake_ns = self._round_trip_ns()

    def _round_trip_ns(self, tries: int = 9) -> int:
        """Median time to wake a worker with an empty job and wait for it: the fixed cost of a pooled
        launch, which the cost model of kernels with loops weighs their inline time against."""
        w = self.idle.pop()
        times = []
        try:
            for _ in range(tries):
                t0 = time.perf_counter_ns()
                w.hand(_nothing, 0)
                _wait(w)
                times.append(time.perf_counter_ns() - t0)
        finally:
            self.idle.append(w)
        return sorted(times)[tries // 2]


def _nothing(ptr) -> None:
    pass


def run_chunks(entry, bounds: list[int], ptrs: list[int], pool: Pool) -> tuple[int, int]:
    """entry(lo, hi, ptr) over every chunk; worker w passes ptrs[w] (its own argument block), ptrs[0] is the
    calling thread's, which works too and so notices Ctrl-C between its chunks. Returns the threads of the
    calling thread's first chunk and the CPU nanoseconds it took (its own CPU time, not wall time: a thread the
    OS paused mid-chunk on a busy machine would make the kernel look many times costlier than it is; one chunk
    only, as reading a thread's CPU clock costs ~2 us on a VM); the cost model of kernels with loops."""
    count = len(bounds) - 1
    taken = itertools.count()       # next() on a count is atomic under the GIL
    stopped = []
    own = [0, 0]                    # the calling thread's first chunk: threads and CPU nanoseconds

    def work(ptr, own=None) -> None:
        while not stopped:
            k = next(taken)
            if k >= count:
                return
            if own is None or own[0]:
                entry(bounds[k], bounds[k + 1], ptr)
            else:
                t0 = time.thread_time_ns()
                entry(bounds[k], bounds[k + 1], ptr)
                own[1] = time.thread_time_ns() - t0
                own[0] = bounds[k + 1] - bounds[k]

    borrowed = []
    try:
        idle = pool.idle
        for ptr in ptrs[1:]:
            if not idle:            # every worker is busy with other launches: the caller does the rest
                break
            try:
                borrowed.append(idle.pop())
            except IndexError:      # another launch took the last one
                break
            borrowed[-1].hand(work, ptr)
        work(ptrs[0], own)
    except BaseException:           # Ctrl-C: let the running chunks end before the arrays can be freed
        stopped.append(True)
        _give_back(pool, borrowed, work)
        raise
    error = _give_back(pool, borrowed, work)
    if error is not None:
        raise error
    return own[0], own[1]


def _give_back(pool: Pool, borrowed: list, work) -> BaseException | None:
    """Cancel each borrowed worker that has not started `work`, wait for the others (through further
    Ctrl-Cs) and return them to the idle list; the first exception a worker raised, if any. (A Ctrl-C
    between borrowing a worker and handing it the job leaves it unhanded: straight back to idle. One landing
    inside `hand`, between its two releases, loses that worker for good: the pool has one fewer.)"""
    error = None
    for w in borrowed:
        if w.handed is not work:
            pool.idle.append(w)
            continue
        if w.cancel():
            if w.go.acquire(False):     # not even woken: take the wake-up back, it sleeps on, idle again
                w.job = None
                pool.idle.append(w)
            continue                    # (else it saw the cancel, or will, and goes back idle itself)
        _wait(w)
        if w.error is not None and error is None:
            error = w.error
        w.error = None
        pool.idle.append(w)
    return error


def _wait(w: _Worker) -> None:
    """Wait until worker `w` has finished its job, through Ctrl-Cs (its chunk may still use the arrays)."""
    while True:
        try:
            w.done.acquire()
            return
        except KeyboardInterrupt:
            continue
