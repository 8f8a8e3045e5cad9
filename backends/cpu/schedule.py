"""One launch's thread range in chunks: the calling thread and the pool's workers take chunks in turn from a
shared counter (uneven threads balance themselves), and Ctrl-C stops a launch between chunks — the workers
finish the chunk they are in, nothing starts after, and KeyboardInterrupt reaches the caller only once no
worker touches the launch's arrays any more."""

from __future__ import annotations

import concurrent.futures
import itertools

CHUNK_MAX = 1 << 23         # threads per chunk of a straight-line kernel (about 5 ms of W1)
CHUNK_MAX_LOOPS = 1 << 12   # threads per chunk of a kernel with loops (far more work per thread)


def chunk_bounds(n: int, workers: int, cap: int) -> list[int]:
    """Bounds of at least `workers` near-equal chunks of range(n), none longer than `cap` threads."""
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


def run_chunks(entry, bounds: list[int], ptrs: list[int], pool) -> None:
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

    futures = [pool.submit(work, p) for p in ptrs[1:]]
    try:
        work(ptrs[0])
        for f in futures:
            if not f.cancel():      # a worker still busy with another launch never started on this one
                f.result()
    except BaseException:           # Ctrl-C: let the running chunks end before the arrays can be freed
        stopped.append(True)
        _wait_for(futures)
        raise


def _wait_for(futures) -> None:
    """Wait for every future, through further Ctrl-Cs."""
    while True:
        try:
            concurrent.futures.wait(futures)
            return
        except KeyboardInterrupt:
            continue
