"""Thread stress for the threading model (issue 18): N Python threads at once run plain launches, taped
launches with backward passes, forward-mode launches, host copies on a tape and fresh compiles of new
kernels, on their own arrays, and check every result against NumPy float64.

Run as `python -m tests.reliability.thread_stress DEVICE [THREADS] [ROUNDS] [REPEATS]`: it prints one line
per repeat and exits 1 on the first wrong result (a crash or a hang is caught by the caller's timeout).
"""

from __future__ import annotations

import os
import sys
import threading
import traceback

import numpy as np

import gradkit as gk

SMALL = 257              # below the CPU backend's inline threshold: runs on the calling thread
LARGE = 70_001           # above it: split over the shared worker pool


@gk.kernel
def saxpy(x: gk.array(dtype=float), y: gk.array(dtype=float), a: float, out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = a * x[i] + y[i]


@gk.kernel
def sum_of_squares(x: gk.array(dtype=float), w: float, loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, w * x[i] * x[i])


@gk.kernel
def sine_scale(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sin(x[i]) * x[i]


def _fresh_kernel(c: float):
    """A new kernel object (so a new compile) whose constant depends on the caller."""
    @gk.kernel
    def shifted(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = x[i] * x[i] + c
    return shifted


def _close(got, want, what: str) -> None:
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        bad = int(np.argmax(np.abs(np.asarray(got, np.float64) - want)))
        raise AssertionError(f"{what}: element {bad} is {np.ravel(got)[bad]}, expected {np.ravel(want)[bad]}")


def one_round(device: str, rng: np.random.Generator, worker: int, step: int, salt: int = 0) -> None:
    """Every operation once, each checked against NumPy float64."""
    n = LARGE if (worker + step) % 3 == 0 else SMALL
    xs = rng.standard_normal(n).astype(np.float32)
    ys = rng.standard_normal(n).astype(np.float32)
    a = float(rng.uniform(-2, 2))
    x, y = gk.array(xs, device=device), gk.array(ys, device=device)
    out = gk.zeros(n, device=device)
    gk.launch(saxpy, n, inputs=[x, y, a], outputs=[out], device=device)
    _close(out.numpy(), a * xs.astype(np.float64) + ys, "saxpy")

    xg = gk.array(xs, device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    w = float(rng.uniform(0.5, 1.5))
    with gk.Tape() as tape:
        copy = gk.zeros(n, device=device, requires_grad=True)
        gk.copy(copy, xg)
        gk.launch(sum_of_squares, n, inputs=[copy, w], outputs=[loss], device=device)
    tape.backward(loss=loss)
    x64 = xs.astype(np.float64)
    _close(loss.numpy()[0] / n, w * np.sum(x64 * x64) / n, "taped loss")
    _close(xg.grad.numpy(), 2 * w * x64, "taped gradient through gk.copy")

    v = rng.standard_normal(n).astype(np.float32)
    xf = gk.array(xs, device=device)
    yf = gk.zeros(n, device=device)
    with gk.ForwardMode(seeds={xf: gk.array(v, device=device)}):
        gk.launch(sine_scale, n, inputs=[xf], outputs=[yf], device=device)
        tangent = yf.dual.numpy()
    _close(yf.numpy(), np.sin(x64) * x64, "forward value")
    _close(tangent, (np.cos(x64) * x64 + np.sin(x64)) * v, "forward-mode tangent")

    if step % 4 == 0:
        c = float(salt + worker * 100 + step)       # a constant no earlier run compiled
        k = _fresh_kernel(c)
        yk = gk.zeros(SMALL, device=device)
        gk.launch(k, SMALL, inputs=[gk.array(xs[:SMALL], device=device)], outputs=[yk], device=device)
        _close(yk.numpy(), x64[:SMALL] ** 2 + c, "freshly compiled kernel")


def run(device: str, threads: int = 8, rounds: int = 6, salt: int = 0) -> list[str]:
    """Run `threads` workers of `rounds` rounds each at once; the failures they saw (empty when all right)."""
    errors: list[str] = []
    start = threading.Barrier(threads)

    def work(worker: int) -> None:
        rng = np.random.default_rng(1000 + worker)
        try:
            start.wait()
            for step in range(rounds):
                one_round(device, rng, worker, step, salt)
        except BaseException:      # every failure is reported, not just the first thread's
            errors.append(f"thread {worker}:\n{traceback.format_exc()}")

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors


def main(argv: list[str]) -> int:
    device = argv[0] if argv else "cpu"
    threads, rounds, repeats = (int(v) for v in (argv[1:] + ["8", "6", "1"][len(argv) - 1:])[:3])
    for r in range(repeats):
        errors = run(device, threads, rounds, salt=(os.getpid() % 1000 + 1000 * r) * 10_000)
        if errors:
            print(f"repeat {r}: {len(errors)} threads failed", flush=True)
            print("\n".join(errors))
            return 1
        print(f"repeat {r}: {threads} threads x {rounds} rounds right", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
