"""The CPU backend's dispatch (backends/cpu/schedule.py, backend.py): the persistent pool splits a launch into
chunks that cover the grid exactly once, gives its workers back after every launch (also after an
exception), serves launches from several Python threads at once, and a kernel with loops runs small launches
inline once its measured time per thread says waking the pool costs more — with the same numbers either
way, checked against float64 NumPy."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.cpu import schedule
from gradkit.backends.cpu.backend import CHUNK_MAX_LOOPS, INLINE_BELOW_LOOPS


@gk.kernel
def windowed(x: gk.array(dtype=float), m: int, y: gk.array(dtype=float)):
    i = gk.tid()
    acc = float(0.0)
    for j in range(m):
        acc += x[(i + j) % x.shape[0]] * float(j + 1)
    y[i] = acc


def _windowed_ref(x: np.ndarray, m: int) -> np.ndarray:
    x = x.astype(np.float64)
    return sum(np.roll(x, -j) * (j + 1) for j in range(m))


def _compiled(kernel):
    return kernel.specialization(gk.get_device("cpu"), "forward").compiled


def _pool():
    return gk.get_device("cpu").impl._executor()


def _all_idle(pool) -> bool:
    """Whether every worker is back on the idle list within a few seconds (a cancelled worker goes back
    itself once the OS runs it)."""
    deadline = time.monotonic() + 10
    while len(pool.idle) != pool.size and time.monotonic() < deadline:
        time.sleep(0.001)
    return len(pool.idle) == pool.size


@pytest.mark.parametrize("n,workers,cap", [(1, 2, 8), (7, 2, 8), (100, 3, 16), (1 << 20, 16, 1 << 12),
                                          (5, 8, 1 << 23)])
def test_chunks_cover_the_grid_once(n, workers, cap):
    b = schedule.chunk_bounds(n, workers, cap)
    assert b[0] == 0 and b[-1] == n
    sizes = np.diff(b)
    assert (sizes >= 0).all() and sizes.max() <= cap
    assert len(sizes) >= workers


def test_run_chunks_runs_every_chunk_once_and_returns_the_workers():
    pool = _pool()
    seen = []
    lock = threading.Lock()

    def entry(lo, hi, ptr):
        with lock:
            seen.append((lo, hi, ptr))
    bounds = schedule.chunk_bounds(1000, 4, 64)
    schedule.run_chunks(entry, bounds, [0, 1, 2, 3], pool)
    assert sorted((lo, hi) for lo, hi, _ in seen) == list(zip(bounds[:-1], bounds[1:]))
    assert {p for _, _, p in seen} <= {0, 1, 2, 3}
    assert _all_idle(pool)
    assert pool.wake_ns > 0


def test_an_exception_in_a_worker_reaches_the_caller_and_the_pool_recovers():
    pool = _pool()
    gate = threading.Event()

    def entry(lo, hi, ptr):
        if ptr == 1:
            gate.set()
            raise ValueError("chunk failed")
        gate.wait(5)        # the caller waits until a worker has run, so the worker does fail
    with pytest.raises(ValueError, match="chunk failed"):
        schedule.run_chunks(entry, schedule.chunk_bounds(64, 2, 8), [0, 1], pool)
    assert _all_idle(pool)
    got = []
    schedule.run_chunks(lambda lo, hi, p: got.append(hi - lo), [0, 5, 9], [0, 1], pool)
    assert sum(got) == 9


@pytest.mark.parametrize("m", [3, 40])
def test_small_launches_of_a_kernel_with_loops_choose_by_measured_cost(m, rng):
    n = INLINE_BELOW_LOOPS * 4
    x_np = rng.uniform(-1, 1, n).astype(np.float32)
    x, y = gk.array(x_np, device="cpu"), gk.zeros(n, device="cpu")
    want = _windowed_ref(x_np, m)
    gk.launch(windowed, 1, inputs=[x, m], outputs=[y], device="cpu")       # compiled
    c = _compiled(windowed)
    pool_ns = gk.get_device("cpu").impl._pool_saving_ns(_pool())
    whole = c.entry_all
    calls = []
    c.entry_all = lambda ptr: (calls.append(ptr), whole(ptr))
    try:
        for thread_ns, inline in ((None, False), (0.0, True), (pool_ns / n * 2, False), (pool_ns / n / 2, True)):
            c.thread_ns = thread_ns
            c.pool_count = 0        # no pooled launch measured: the choice by thread_ns alone
            assert c.cheap(n, pool_ns) is inline
            y.zero_()
            calls.clear()
            gk.launch(windowed, n, inputs=[x, m], outputs=[y], device="cpu")
            assert bool(calls) is inline            # the whole grid on the calling thread, or in chunks
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
            assert c.thread_ns is not None and c.thread_ns >= 0     # every launch updates the estimate
    finally:
        c.entry_all = whole
    assert not c.cheap(CHUNK_MAX_LOOPS + 1, float("inf"))       # never more than a chunk inline


def test_launches_from_several_threads_at_once_are_right(rng):
    n = CHUNK_MAX_LOOPS * 3 + 5
    xs = [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(4)]
    outs = [gk.zeros(n, device="cpu") for _ in range(4)]
    ins = [gk.array(v, device="cpu") for v in xs]
    errors = []
    start = threading.Barrier(4)

    def body(k):
        try:
            start.wait()
            for _ in range(5):
                gk.launch(windowed, n, inputs=[ins[k], 5 + k], outputs=[outs[k]], device="cpu")
        except BaseException as exc:
            errors.append(exc)
    threads = [threading.Thread(target=body, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    for k in range(4):
        np.testing.assert_allclose(outs[k].numpy(), _windowed_ref(xs[k], 5 + k), rtol=1e-5, atol=1e-5)
    assert _all_idle(_pool())


def test_a_worker_not_yet_started_is_cancelled_not_waited_for():
    """Hand a job and withdraw it at once, many times: either the withdrawal wins and the job never runs,
    or the worker started it and the caller waits for it to finish; every worker ends idle."""
    pool = schedule.Pool(1, prefix="gradkit-test")
    ran, cancelled = [], 0
    for k in range(300):
        w = pool.idle.pop()
        w.hand(ran.append, k)
        if w.cancel():
            cancelled += 1
        else:
            schedule._wait(w)
            assert ran[-1] == k
            pool.idle.append(w)
        assert _all_idle(pool)
    assert len(ran) + cancelled == 300 and len(set(ran)) == len(ran)


def test_a_launch_that_finds_no_idle_worker_runs_alone():
    pool = schedule.Pool(1, prefix="gradkit-test")
    busy = pool.idle.pop()          # as if another launch held it
    seen = []
    schedule.run_chunks(lambda lo, hi, p: seen.append((lo, hi, p)), [0, 3, 8, 9], [0, 1], pool)
    assert sorted(seen) == [(0, 3, 0), (3, 8, 0), (8, 9, 0)]
    pool.idle.append(busy)


def test_chunks_of_a_kernel_with_loops_follow_its_measured_time_per_thread():
    assert schedule.loop_chunk(None) == CHUNK_MAX_LOOPS
    for thread_ns in (0.01, 3.0, 700.0, 4000.0, 1e9):
        size = schedule.loop_chunk(thread_ns)
        assert size & (size - 1) == 0 and schedule.CHUNK_MIN_LOOPS <= size <= CHUNK_MAX_LOOPS
        assert size == CHUNK_MAX_LOOPS or size == schedule.CHUNK_MIN_LOOPS or \
            size * thread_ns <= schedule.CHUNK_NS < 2 * size * thread_ns
    assert schedule.loop_chunk(4000.0, floor=1000) == 1000
    assert schedule.loop_chunk(4000.0, floor=1 << 20) == CHUNK_MAX_LOOPS


@pytest.mark.parametrize("thread_ns", [None, 2e4])
def test_a_launch_in_measured_chunks_is_right(thread_ns, rng):
    n, m = CHUNK_MAX_LOOPS + 999, 7
    x_np = rng.uniform(-1, 1, n).astype(np.float32)
    x, y = gk.array(x_np, device="cpu"), gk.zeros(n, device="cpu")
    gk.launch(windowed, 1, inputs=[x, m], outputs=[y], device="cpu")       # compiled
    c = _compiled(windowed)
    chunk, sizes = c.entry, []
    c.entry = lambda lo, hi, ptr: (sizes.append(hi - lo), chunk(lo, hi, ptr))
    try:
        c.thread_ns = thread_ns
        gk.launch(windowed, n, inputs=[x, m], outputs=[y], device="cpu")
    finally:
        c.entry = chunk
    assert sum(sizes) == n and max(sizes) <= schedule.loop_chunk(thread_ns)
    assert len(sizes) > 2 if thread_ns else len(sizes) == 2
    np.testing.assert_allclose(y.numpy(), _windowed_ref(x_np, m), rtol=1e-5, atol=1e-5)
