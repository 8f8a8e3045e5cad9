"""Concurrent launches (the `threads` feature, contract 3): `launch` may be called from several Python
threads at once — of one compiled kernel and of different ones, compiling while others run — and every
launch computes what it would alone (backends/README.md, "Threading")."""

from __future__ import annotations

import threading

import numpy as np

import gradkit as gk
from gradkit.conformance.plugin import require


@gk.kernel
def _axpb(x: gk.array(dtype=float), a: float, b: float, y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a * x[i] + b


@gk.kernel
def _sum_squares(x: gk.array(dtype=float), total: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(total, 0, x[i] * x[i])


def test_concurrent_launches_from_threads(device, rng):
    require(device, "threads")
    n, workers, rounds = 4099, 4, 12
    xs = [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(workers)]
    errors: list = []
    start = threading.Barrier(workers)

    def work(w: int) -> None:
        try:
            x = gk.array(xs[w], device=device)
            y = gk.zeros(n, device=device)
            total = gk.zeros(1, device=device)
            start.wait()
            for r in range(rounds):
                a, b = float(w + 1), float(r)
                gk.launch(_axpb, n, inputs=[x, a, b], outputs=[y], device=device)
                total.zero_()
                gk.launch(_sum_squares, n, inputs=[y], outputs=[total], device=device)
                want = a * xs[w].astype(np.float64) + b
                np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-5,
                                           err_msg=f"thread {w}, round {r}")
                np.testing.assert_allclose(total.numpy()[0], np.sum(want ** 2), rtol=1e-4,
                                           err_msg=f"thread {w}, round {r}: reduction")
        except BaseException as exc:      # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a launching thread did not finish"
    if errors:
        raise errors[0]
