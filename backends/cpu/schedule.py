"""One launch's thread range in chunks: the calling thread and the pool's workers take chunks in turn from a
shared counter (uneven threads balance themselves), and Ctrl-C stops a launch between chunks — the workers
finish the chunk they are in, nothing starts after, and KeyboardInterrupt reaches the caller only once no
worker touches the launch's arrays any more.

The pool is persistent threads each asleep on a lock of its own: a launch wakes the idle ones with one
release each and waits on one lock each (about 13 us a round trip on a loaded 2-core VM, against 21 us for a
ThreadPoolExecutor's submit and result, which also allocate a future, a work item and a condition)."""

from __future__ import annotations

import itertools
import threading
import time

CHUNK_MAX = 1 << 23         # threads per chunk of a straight-line kernel (about 5 ms of W1)
CHUNK_MAX_LOOPS = 1 << 12   # threads per chunk of a kernel with loops (far more work per thread)
CHUNKS_PER_WORKER = 4       # a worker that wakes late leaves its share to the others, a quarter at a time
CHUNK_MIN = 1 << 14         # ... but no chunk of a straight-line kernel shorter (a ctypes call per chunk)
CHUNK_MIN_LOOPS = 1 << 7


def chunk_bounds(n: int, workers: int, cap: int, floor: int = 1) -> list[int]:
    """Bounds of near-equal chunks of range(n): CHUNKS_PER_WORKER per worker where chunks stay at least
    `floor` threads (at least `workers` chunks in any case), and none longer than `cap` threads."""
    chunks = max(workers, min(CHUNKS_PER_WORKER * workers, n // max(floor, 1)), -(-n // cap))
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
    """A daemon thread asleep on `go` (held while it sleeps); it runs `job(ptr)` and releases `done`."""

    def __init__(self, name: str):
        self.go = threading.Lock()
        self.go.acquire()
        self.done = threading.Lock()
        self.done.acquire()
        self.job = None
        self.ptr = 0
        self.error: BaseException | None = None
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
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
        self.idle = [_Worker(f"{prefix}_{k}") for k in range(size)]
        self.wake_ns = self._round_trip_ns()

    def _round_trip_ns(self, tries: int = 9) -> int:
        """Median time to wake a worker with an empty job and wait for it: the fixed cost of a pooled
        launch, which the cost model of kernels with loops weighs their inline time against."""
        w = self.idle.pop()
        times = []
        try:
            for _ in range(tries):
                t0 = time.perf_counter_ns()
                w.job = _nothing
                w.go.release()
                _wait(w)
                times.append(time.perf_counter_ns() - t0)
        finally:
            self.idle.append(w)
        return sorted(times)[tries // 2]


def _nothing(ptr) -> None:
    pass


def run_chunks(entry, bounds: list[int], ptrs: list[int], pool: Pool) -> None:
    """entry(lo, hi, ptr) over every chunk; worker w passes ptrs[w] (its own argument block), ptrs[0] is the
    calling thread's, which works too and so notices Ctrl-C between its chunks."""
    count = len(bounds) - 1
    taken = itertools.count()       # next() on a count is atomic under the GIL
    stopped = []

    def work(ptr) -> None:
        while not stopped:
            k = next(taken)
            if k >= count:
                return
            entry(bounds[k], bounds[k + 1], ptr)

    borrowed = []
    try:
        idle = pool.idle
        for ptr in ptrs[1:]:
            if not idle:            # every worker is busy with other launches: the caller does the rest
                break
            try:
                borrowed.append(idle.pop())     # one expression: no Ctrl-C lands between pop and append
            except IndexError:      # another launch took the last one
                break
            w = borrowed[-1]
            w.job, w.ptr = work, ptr
            w.go.release()
        work(ptrs[0])
    except BaseException:           # Ctrl-C: let the running chunks end before the arrays can be freed
        stopped.append(True)
        _give_back(pool, borrowed)
        raise
    error = _give_back(pool, borrowed)
    if error is not None:
        raise error


def _give_back(pool: Pool, borrowed: list) -> BaseException | None:
    """Wait for each borrowed worker (through further Ctrl-Cs) and return it to the idle list; the first
    exception a worker raised, if any."""
    error = None
    for w in borrowed:
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
