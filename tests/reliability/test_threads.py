"""The threading model (issue 18): launches, tapes, forward mode and compiles from several Python threads
give right results on every device; a Tape or ForwardMode belongs to the thread that entered it."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import gradkit as gk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPEATS = {"cpu": 5, "opencl": 2}       # back-to-back stress runs per `make test` (20 for the closing note)


@pytest.mark.slow
def test_stress_of_eight_threads_is_right(device, tmp_path):
    """8 threads x mixed plain/taped/forward-mode launches, host copies and fresh compiles, in a child
    process with a fresh kernel cache (so compiles really run concurrently) and a timeout (a hang or a
    crash fails the test instead of the session)."""
    repeats = REPEATS.get(device.split(":")[0], 3)
    env = dict(os.environ, GRADKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "tests.reliability.thread_stress", device, "8", "8",
                           str(repeats)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.stdout.count("right") == repeats


@gk.kernel
def cube(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i]


def _in_threads(target, count: int) -> list:
    """Run target(k) in `count` threads started together; their return values or raised exceptions."""
    results: list = [None] * count
    start = threading.Barrier(count)

    def body(k):
        start.wait()
        try:
            results[k] = target(k)
        except BaseException as exc:
            results[k] = exc
    threads = [threading.Thread(target=body, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_each_thread_records_on_its_own_tape(device, rng):
    """Two threads recording at once do not nest (each has its own tape) and get their own gradients."""
    xs = [rng.uniform(-1, 1, 33).astype(np.float32) for _ in range(4)]
    done = threading.Barrier(4)

    def work(k):
        x = gk.array(xs[k], device=device, requires_grad=True)
        y = gk.zeros(33, device=device, requires_grad=True)
        with gk.Tape() as tape:
            gk.launch(cube, 33, inputs=[x], outputs=[y], device=device)
            done.wait()            # every thread records before any leaves its tape
        tape.backward(grads={y: gk.ones(33, device=device)})
        return len(tape.launches), x.grad.numpy()

    for k, got in enumerate(_in_threads(work, 4)):
        assert not isinstance(got, BaseException), got
        n, grad = got
        assert n == 1
        np.testing.assert_allclose(grad, 3 * xs[k].astype(np.float64) ** 2, rtol=1e-5)


def test_a_tape_does_not_record_other_threads_launches(device, rng):
    x = gk.array(rng.uniform(-1, 1, 8).astype(np.float32), device=device, requires_grad=True)
    y = gk.zeros(8, device=device, requires_grad=True)
    other = gk.zeros(8, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(cube, 8, inputs=[x], outputs=[y], device=device)
        res = _in_threads(lambda k: gk.launch(cube, 8, inputs=[x], outputs=[other], device=device), 1)
        assert res == [None]
    assert [r.kernel for r in tape.launches] == ["cube"] and len(tape.launches) == 1
    np.testing.assert_allclose(other.numpy(), x.numpy().astype(np.float64) ** 3, rtol=1e-6)


def test_forward_mode_belongs_to_its_thread(device, rng):
    xs = rng.uniform(-1, 1, 16).astype(np.float32)
    x = gk.array(xs, device=device)
    y, z = gk.zeros(16, device=device), gk.zeros(16, device=device)
    with gk.ForwardMode(seeds={x: gk.ones(16, device=device)}):
        gk.launch(cube, 16, inputs=[x], outputs=[y], device=device)
        res = _in_threads(lambda k: gk.launch(cube, 16, inputs=[x], outputs=[z], device=device), 1)
        assert res == [None]
        np.testing.assert_allclose(y.dual.numpy(), 3 * xs.astype(np.float64) ** 2, rtol=1e-5)
        assert z.dual is None          # the other thread ran a plain launch


def test_one_kernel_compiled_by_eight_threads_at_once(device, rng):
    """Eight threads hit a kernel's first compile together: one specialisation, every result right."""
    @gk.kernel
    def fresh(x: gk.array(dtype=float), s: float, y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = gk.exp(x[i] * s)

    xs = rng.uniform(-1, 1, 64).astype(np.float32)

    def work(k):
        y = gk.zeros(64, device=device)
        gk.launch(fresh, 64, inputs=[gk.array(xs, device=device), 0.5 + k], outputs=[y], device=device)
        return y.numpy()

    for k, got in enumerate(_in_threads(work, 8)):
        assert not isinstance(got, BaseException), got
        np.testing.assert_allclose(got, np.exp(xs.astype(np.float64) * (0.5 + k)), rtol=1e-5)
    assert len({id(s) for s in fresh._specs.values()}) == len(fresh._specs) == 1
