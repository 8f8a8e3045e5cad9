"""The CPU backend's choice between inline and pooled launches of kernels with loops (backends/cpu/backend.py,
schedule.py): the time per thread is the calling thread's CPU time (a pause of the thread does not count), a
small launch whose pooled runs measured no faster than its inline ones runs inline, with a pooled probe now and
then, and big or wide launches stay pooled — with the same numbers either way, against float64 NumPy."""

from __future__ import annotations

import time

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.cpu import backend as cpu_backend, schedule
from gradkit.backends.cpu.backend import CHUNK_MAX_LOOPS, PROBE_EVERY, RATIO_CAP, SMALL_LOOP_NS


@gk.kernel
def windowed2(x: gk.array(dtype=float), m: int, y: gk.array(dtype=float)):
    i = gk.tid()
    acc = float(0.0)
    for j in range(m):
        acc += x[(i + j) % x.shape[0]] * float(j + 2)
    y[i] = acc


def _ref(x: np.ndarray, m: int) -> np.ndarray:
    x = x.astype(np.float64)
    return sum(np.roll(x, -j) * (j + 2) for j in range(m))


def _spin(ns: int) -> None:
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass


def test_run_chunks_reports_the_callers_first_chunk_and_its_cpu_time_not_its_pauses():
    pool = gk.get_device("cpu").impl._executor()
    mine = []

    def entry(lo, hi, ptr):
        if ptr == 0:
            mine.append(hi - lo)
            _spin(2_000_000)            # 2 ms of CPU
            time.sleep(0.02)            # and 20 ms asleep, as a thread the OS paused
    bounds = schedule.chunk_bounds(40, 2, 10)
    own, own_ns = schedule.run_chunks(entry, bounds, [0, 1], pool)
    assert mine and own == mine[0]                      # its first chunk's threads
    assert 2_000_000 <= own_ns < 12_000_000             # and CPU time: 2 ms spun, not the 20 ms asleep


def _compiled(x, y, m):
    gk.launch(windowed2, 1, inputs=[x, m], outputs=[y], device="cpu")      # compiled
    return windowed2.specialization(gk.get_device("cpu"), "forward").compiled


def test_the_choice_follows_the_measured_ratios():
    c = _compiled(gk.zeros(4, device="cpu"), gk.zeros(4, device="cpu"), 2)
    pool_ns, n = 50_000.0, 1000
    for thread_ns, pooled, inline, count, want in (
            (None, None, None, 0, False),                   # nothing measured: pooled
            (10.0, None, None, 0, True),                    # 10 us: below what waking the pool saves
            (200.0, None, None, 1, False),                  # 200 us, one pooled launch measured: pooled
            (200.0, 1.5, 1.2, 2, True),                     # pooled measured slower than inline
            (200.0, 1.5, None, 2, True),                    # ... than inline's 1 before any is measured
            (200.0, 0.7, 1.1, 2, False),                    # pooled faster
            (SMALL_LOOP_NS / n * 2, 4.0, 1.0, 9, False)):   # too long a launch to judge by the ratios
        c.thread_ns, c.pool_ratio, c.inline_ratio, c.pool_count = thread_ns, pooled, inline, count
        assert c.cheap(n, pool_ns) is want
    c.thread_ns, c.pool_ratio, c.inline_ratio, c.pool_count = 200.0, 4.0, 1.0, 5
    assert not c.cheap(CHUNK_MAX_LOOPS + 1, pool_ns)        # never more than a chunk inline


def test_took_averages_and_probes_back_off_while_the_pool_loses():
    c = _compiled(gk.zeros(4, device="cpu"), gk.zeros(4, device="cpu"), 2)
    c.thread_ns, c.pool_ratio, c.inline_ratio, c.pool_count, c.probe_every = 100.0, None, None, 0, PROBE_EVERY
    n = 1000                                                # n * thread_ns = 100 us
    c.took(n, 300_000, True)
    assert c.pool_ratio == pytest.approx(3.0) and c.pool_count == 1
    c.took(n, 10**9, True)                                  # a paused worker: capped
    assert c.pool_ratio == pytest.approx(3.0 + cpu_backend.POOL_WEIGHT * (RATIO_CAP - 3.0))
    c.took(n, 120_000, False)
    assert c.inline_ratio == pytest.approx(1.2)
    before = c.pool_ratio
    c.took(n, 400_000, True, probe=True)                    # a probe lost: half as often
    assert c.probe_every == 2 * PROBE_EVERY and c.pool_ratio > before - 1e-12
    c.took(n, 50_000, True, probe=True)                     # a probe won: as often as at first
    assert c.probe_every == PROBE_EVERY
    c.thread_ns = SMALL_LOOP_NS                              # a long launch: not recorded
    count = c.pool_count
    c.took(n, 10**12, True)
    assert c.pool_count == count


def test_small_launches_run_inline_on_the_ratios_with_a_pooled_probe(rng, monkeypatch):
    n, m = 256, 5
    x_np = rng.uniform(-1, 1, n).astype(np.float32)
    x, y = gk.array(x_np, device="cpu"), gk.zeros(n, device="cpu")
    c = _compiled(x, y, m)
    pool_ns = SMALL_LOOP_NS / 8         # what waking the pool saves, fixed (measured, it follows the load)
    monkeypatch.setattr(cpu_backend.CPUBackend, "_pool_saving_ns", lambda self, pool: pool_ns)
    whole = c.entry_all
    calls = []
    c.entry_all = lambda ptr: (calls.append(ptr), whole(ptr))
    want = _ref(x_np, m)
    try:
        # pooled measured at the cap: as slow as inline can ever average, so inline until the probe
        c.pool_ratio, c.inline_ratio, c.pool_count, c.probe, c.probe_every = RATIO_CAP, 1.0, 2, 0, PROBE_EVERY
        ran = []
        for _ in range(PROBE_EVERY):
            c.thread_ns = 4 * pool_ns / n                   # above the inline bound, below SMALL_LOOP_NS
            c.pool_ratio = RATIO_CAP
            calls.clear()
            y.zero_()
            gk.launch(windowed2, n, inputs=[x, m], outputs=[y], device="cpu")
            ran.append(bool(calls))
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
        assert ran == [True] * (PROBE_EVERY - 1) + [False]      # the last: a probe
        c.thread_ns, c.pool_ratio, c.inline_ratio, c.pool_count = 4 * pool_ns / n, 0.0, 1.0, 2
        calls.clear()
        y.zero_()
        gk.launch(windowed2, n, inputs=[x, m], outputs=[y], device="cpu")
        assert not calls                                    # pooled: it measured faster
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    finally:
        c.entry_all = whole
