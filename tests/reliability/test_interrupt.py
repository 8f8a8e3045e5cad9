"""Ctrl-C stops a long launch (issue 18): the CPU backend runs large launches in chunks and the OpenCL backend
enqueues them in chunks, so SIGINT raises KeyboardInterrupt between chunks — long before the launch would
end — and the runtime stays usable (no crash, the next launch is right). Each case runs in a child process
with a timeout."""

import pytest

from tests.reliability.hostile import run_child

CHILD = """
    import os, signal, sys, threading, time
    import numpy as np
    import gradkit as gk

    dev, dim = sys.argv[1], int(sys.argv[2])

    @gk.kernel
    def spin(x: gk.array(dtype=float), m: int):
        i = gk.tid()
        acc = float(0.0)
        for j in range(m):
            acc = acc + gk.sin(float(j + i) * 1e-3)
        if acc > 1e30:
            x[0] = acc
        if i < 4:
            x[i] = float(i)

    x = gk.zeros(4, device=dev)
    gk.launch(spin, 8, inputs=[x, 10], device=dev)          # compiled before the clock starts
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.perf_counter()
    try:
        gk.launch(spin, dim, inputs=[x, 2000], device=dev)    # hours of work
        print("finished")
    except KeyboardInterrupt:
        print(f"interrupted after {time.perf_counter() - t0:.2f}")
    y = gk.zeros(4, device=dev)
    gk.launch(spin, 8, inputs=[y, 10], device=dev)
    print("next launch", y.numpy().tolist())
"""

GRID = {"cpu": 2**31 - 1, "opencl": 2**31 - 1, "numpy": 2**24}     # the reference interpreter is vectorised


@pytest.mark.slow
def test_ctrl_c_stops_a_long_launch(device, tmp_path):
    grid = GRID.get(device.split(":")[0], 2**24)
    proc = run_child(CHILD, tmp_path, device, str(grid), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("interrupted after"), proc.stdout
    assert float(lines[0].split()[-1]) < 30.0
    assert lines[1] == "next launch [0.0, 1.0, 2.0, 3.0]"
