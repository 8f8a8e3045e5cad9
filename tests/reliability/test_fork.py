"""Fork safety (issue 37): a child forked while another thread launches or compiles launches on `cpu`
(its locks released, a fresh worker pool, the garbage collector running); `multiprocessing` pools with
the 'fork' and 'spawn' start methods compute right; OpenCL in a child forked after its parent used OpenCL
is a DeviceError naming the fix instead of a hang. Every case runs in a child process with a timeout, and
each forked grandchild has a deadline of its own, so a hang fails one test instead of the session."""

import os

import pytest

from tests.conftest import DEVICES
from tests.reliability.hostile import run_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
OPENCL = [d for d in DEVICES if d.startswith("opencl")]

# Shared by the cases: kernels, the check a forked child runs, and forking with a deadline.
PRELUDE = """
import gc, os, signal, sys, threading, time
import numpy as np
import gradkit as gk

@gk.kernel
def cube(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i]

def make_kernel(c: float):
    # a new Kernel object each call: its first launch builds it (frontend, passes, LLVM)
    @gk.kernel
    def scaled(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = x[i] * gk.static(c) + 1.0
    return scaled

BIG = 1 << 21       # at least the cpu backend's CHOOSE_BELOW: such launches always use the worker pool

def launch_and_grad(n, k=0):
    # a launch and its gradient on cpu, checked against NumPy; whether the pool has live workers
    xs = np.linspace(-1, 1, n, dtype=np.float32) + np.float32(k)
    x = gk.array(xs, device="cpu", requires_grad=True)
    y = gk.zeros(n, device="cpu", requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(cube, n, inputs=[x], outputs=[y], device="cpu")
    tape.backward(grads={y: gk.ones(n, device="cpu")})
    x64 = xs.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), x64 ** 3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 3 * x64 ** 2, rtol=1e-5, atol=1e-6)
    return any(t.name.startswith("gradkit-cpu") for t in threading.enumerate())

def child_checks():
    # what every forked child must manage: a launch of a kernel built before the fork, a fresh compile, a
    # big launch through a worker pool of its own, the garbage collector on; raises if not
    launch_and_grad(64)
    fresh = make_kernel(3.0)
    x = gk.array(np.arange(16, dtype=np.float32), device="cpu")
    y = gk.zeros(16, device="cpu")
    gk.launch(fresh, 16, inputs=[x], outputs=[y], device="cpu")
    np.testing.assert_allclose(y.numpy(), 3.0 * np.arange(16) + 1.0)
    pooled = launch_and_grad(BIG)
    assert pooled or len(os.sched_getaffinity(0)) < 2, "no worker pool in the child"
    assert gc.isenabled(), "the cyclic garbage collector is disabled in the child"

def fork_and_wait(body, deadline=30.0):
    # body() in a forked child (exit code 0 when it returns); the child's exit code, or "hang"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        except BaseException as exc:
            print("child:", type(exc).__name__, exc, flush=True)
        finally:
            os._exit(code)
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hang"
"""

BUSY_CHILD = PRELUDE + """
mode, rounds = sys.argv[1], int(sys.argv[2])
launch_and_grad(BIG)                  # the parent's pool and kernels exist before the first fork
stop = threading.Event()
busy = [0]

def launching():
    sizes = (1, 64, 1 << 12, 1 << 16, BIG)
    arrays = [(n, gk.zeros(n, device="cpu"), gk.zeros(n, device="cpu")) for n in sizes]
    while not stop.is_set():
        for n, x, y in arrays:        # inline launches and pooled ones, plain and with a gradient
            for _ in range(20):
                gk.launch(cube, n, inputs=[x], outputs=[y], device="cpu")
            launch_and_grad(n)
        busy[0] += 1

def compiling():
    k = 0
    while not stop.is_set():
        k += 1
        f = make_kernel(float(k))
        x = gk.zeros(8, device="cpu")
        gk.launch(f, 8, inputs=[x], outputs=[x], device="cpu")
        busy[0] += 1

worker = threading.Thread(target=launching if mode == "launch" else compiling, daemon=True)
worker.start()
while not busy[0]:
    time.sleep(0.01)
for r in range(rounds):
    time.sleep(0.05)
    code = fork_and_wait(child_checks)
    print(f"round {r}: {code}", flush=True)
    if code != 0:
        sys.exit(1)
stop.set()
worker.join()
print("every child launched;", busy[0], "busy iterations")
"""


@pytest.mark.parametrize("mode", ["launch", "compile"])
def test_a_child_forked_while_another_thread_works_launches(mode, tmp_path):
    """Fork from the main thread, again and again, while another thread loops launches (with gradients,
    inline and pooled) or builds new kernels: each child launches old and new kernels within its deadline,
    with the garbage collector on. (Before issue 37 every child waited for ever on a lock the vanished
    thread held: the kernel's, the compile lock, or llvmlite's.)"""
    env = {"GRADKIT_CACHE": "0"} if mode == "compile" else None     # builds run LLVM, not the disk cache
    proc = run_child(BUSY_CHILD, tmp_path, mode, "6", timeout=240, env=env)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "every child launched" in proc.stdout


MID_COMPILE_CHILD = PRELUDE + """
inside, release = threading.Event(), threading.Event()

def stall():
    inside.set()           # called by gk.static while the kernel is built: the compile lock is held
    release.wait(60)
    return 2.0

@gk.kernel
def stalled(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * gk.static(stall())

x = gk.zeros(8, device="cpu")
builder = threading.Thread(target=lambda: gk.launch(stalled, 8, inputs=[x], outputs=[x], device="cpu"))
builder.start()
assert inside.wait(60)
assert not gc.isenabled()      # the build in flight paused the collector (core/locks.py)
code = fork_and_wait(child_checks)
release.set()
builder.join()
assert gc.isenabled()
print("child:", code)
sys.exit(0 if code == 0 else 1)
"""


def test_a_child_forked_mid_compile_collects_garbage_and_compiles(tmp_path):
    """A fork while another thread is inside a build (held there by its gk.static expression): the child
    has the garbage collector running (the build that paused it will not finish there) and builds and
    launches kernels itself."""
    proc = run_child(MID_COMPILE_CHILD, tmp_path, timeout=180)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "child: 0" in proc.stdout


POOL_CHILD = PRELUDE + """
import multiprocessing

def task(k):
    return launch_and_grad(64, k), launch_and_grad(BIG, k)

if __name__ == "__main__":
    method = sys.argv[1]
    launch_and_grad(BIG)            # the parent has built the kernel and started its worker pool
    stop = threading.Event()
    def launching():
        x, y = gk.zeros(1 << 16, device="cpu"), gk.zeros(1 << 16, device="cpu")
        while not stop.is_set():
            gk.launch(cube, 1 << 16, inputs=[x], outputs=[y], device="cpu")
    worker = threading.Thread(target=launching, daemon=True)
    worker.start()                  # ... and launches on another thread while the workers start
    time.sleep(0.2)
    with multiprocessing.get_context(method).Pool(2) as pool:
        results = pool.map_async(task, range(4)).get(timeout=90)
    stop.set()
    worker.join()
    pooled = [big for _, big in results]
    assert all(pooled) or len(os.sched_getaffinity(0)) < 2, f"a worker launched without a pool: {pooled}"
    print("pool right:", len(results))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_pool_of_two_workers_computes_right(method, tmp_path):
    """A `multiprocessing` pool of 2 workers ('fork' and 'spawn'), started while the parent's other thread
    launches, runs launches and gradients on cpu that match NumPy, big launches on a worker pool of each
    process's own."""
    proc = run_child(POOL_CHILD, tmp_path, method, timeout=240)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "pool right: 4" in proc.stdout


OPENCL_CHILD = PRELUDE + """
device, used = sys.argv[1], sys.argv[2] == "1"

def on_opencl():
    x = gk.array(np.arange(8, dtype=np.float32), device=device)
    y = gk.zeros(8, device=device)
    gk.launch(cube, 8, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), np.arange(8.0) ** 3)
    return x, y

if used:
    x, y = on_opencl()            # the parent initialises OpenCL

def child():
    if used:
        for what, attempt in [("reading an array", y.numpy),
                              ("a launch of the parent's kernel and arrays",
                               lambda: gk.launch(cube, 8, inputs=[x], outputs=[y], device=device)),
                              ("a new array", on_opencl)]:
            try:
                attempt()
            except gk.DeviceError as exc:
                assert "spawn" in str(exc) and "fork" in str(exc), exc
            else:
                raise AssertionError(f"{what} in the forked child was not refused")
    else:
        on_opencl()               # the parent never touched OpenCL: the child may
    launch_and_grad(64)           # cpu works either way

code = fork_and_wait(child, deadline=60)
print("child:", code)
sys.exit(0 if code == 0 else 1)
"""


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
@pytest.mark.parametrize("used", [True, False], ids=["parent-used-opencl", "parent-did-not"])
def test_opencl_in_a_forked_child(used, tmp_path):
    """After the parent used OpenCL, the child's OpenCL launch, allocation and copy are a DeviceError
    naming the fix ('spawn' / not touching OpenCL before forking) instead of a hang, and cpu still works;
    a parent that never touched OpenCL leaves the child free to use it."""
    proc = run_child(OPENCL_CHILD, tmp_path, OPENCL[0], "1" if used else "0", timeout=180)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "child: 0" in proc.stdout


SPAWN_OPENCL_CHILD = PRELUDE + """
import multiprocessing

def task(device):
    x = gk.array(np.arange(8, dtype=np.float32), device=device)
    y = gk.zeros(8, device=device)
    gk.launch(cube, 8, inputs=[x], outputs=[y], device=device)
    return y.numpy().tolist()

if __name__ == "__main__":
    device = sys.argv[1]
    task(device)                   # the parent uses OpenCL, then starts workers the way the error says
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.map_async(task, [device] * 2).get(timeout=90)
    assert got == [(np.arange(8.0) ** 3).tolist()] * 2, got
    print("spawned workers right")
"""


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
def test_spawned_workers_use_opencl_after_the_parent_did(tmp_path):
    """The fix the error names works: 'spawn' workers use OpenCL after their parent did."""
    proc = run_child(SPAWN_OPENCL_CHILD, tmp_path, OPENCL[0], timeout=240)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "spawned workers right" in proc.stdout
