"""Out-of-range writes (issue 18): unchecked by default (docs/errors.md gives the measured cost of checking
them), so the documented way to find one is `gk.config.debug = True` — on every device it is an IndexError
naming the kernel, the array, the index and the extent, and no element outside the array is written. In a
child process: a regression here could corrupt the test session's memory."""

from tests.reliability.hostile import run_child

CHILD = """
    import sys
    import numpy as np
    import gradkit as gk

    @gk.kernel
    def shifted(x: gk.array(dtype=float), y: gk.array(dtype=float), off: int):
        i = gk.tid()
        y[i + off] = x[i]

    @gk.kernel
    def scatter(idx: gk.array(dtype=int), y: gk.array(dtype=float)):
        i = gk.tid()
        gk.atomic_add(y, idx[i], 1.0)

    dev = sys.argv[1]
    gk.config.debug = True
    guard = gk.zeros(64, device=dev)            # allocated around y: must stay zero
    y = gk.zeros(16, device=dev)
    after = gk.zeros(64, device=dev)
    for name, run in (
            ("shifted", lambda: gk.launch(shifted, 16, inputs=[gk.ones(16, device=dev), y, 3], device=dev)),
            ("scatter", lambda: gk.launch(scatter, 4, inputs=[gk.array(np.array([0, 5, 16, -1], np.int32),
                                                                         device=dev), y], device=dev))):
        try:
            run()
            print(name, "no error")
        except IndexError as exc:
            msg = str(exc)
            print(name, "IndexError", f"'{name}'" in msg, "'y'" in msg, "16" in msg)
    print("guards", float(np.abs(guard.numpy()).sum() + np.abs(after.numpy()).sum()))
"""


def test_out_of_range_writes_with_debug_are_index_errors(device, tmp_path):
    proc = run_child(CHILD, tmp_path, device, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["shifted IndexError True True True", "scatter IndexError True True True",
                                        "guards 0.0"], proc.stdout
