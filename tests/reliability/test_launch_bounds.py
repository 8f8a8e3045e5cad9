"""Out-of-bounds launches without gk.config.debug (issue 37 item 5): an unconditional access at an index
affine in the thread coordinates is proven in bounds at launch, from the grid's two ends and the array's
shape, or refused with IndexError naming kernel, array, axis and line before anything runs — the probe's
`y[i]` over 4 000 000 threads and 4 elements was a segfault."""

import numpy as np
import pytest

import gradkit as gk
from tests.reliability.hostile import run_child

@gk.kernel
def double(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * 2.0                                   # double's access


@gk.kernel
def last(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[-1]                                        # a negative constant index


@gk.kernel
def strided(x: gk.array(dtype=float, ndim=2), y: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    y[i, j] = x[2 * i + 1, j]                           # strided rows


@gk.kernel
def guarded(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    if i < len(x):
        y[i] = x[i]


def test_a_grid_past_the_arrays_is_an_index_error_not_a_crash(tmp_path):
    """The probe's case, in a child process: without the launch-time proof it was a segfault."""
    proc = run_child("""
        import gradkit as gk

        @gk.kernel
        def double(x: gk.array(dtype=float), y: gk.array(dtype=float)):
            i = gk.tid()
            y[i] = x[i] * 2.0

        x, y = gk.ones(4), gk.zeros(4)
        try:
            gk.launch(double, 4_000_000, inputs=[x], outputs=[y])
        except IndexError as e:
            print("IndexError:", e)
        print("alive", y.numpy().tolist())
    """, tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "IndexError: kernel 'double': index 3999999 out of range for axis 0 of array 'x' with extent 4" \
        in proc.stdout
    assert "hostile_case.py:7" in proc.stdout and "alive [0.0, 0.0, 0.0, 0.0]" in proc.stdout


@pytest.mark.parametrize(("kernel", "dim", "shapes", "message"), [
    (double, 5, ((4,), (5,)), "index 4 out of range for axis 0 of array 'x' with extent 4"),
    (last, 4, ((4,), (4,)), "index -1 out of range for axis 0 of array 'x' with extent 4"),
    (strided, (3, 3), ((5, 3), (3, 3)), "index 5 out of range for axis 0 of array 'x' with extent 5"),
    (strided, (2, 4), ((5, 3), (2, 4)), "index 3 out of range for axis 1 of array 'x' with extent 3"),
])
def test_affine_accesses_are_proven_at_launch(device, kernel, dim, shapes, message):
    x = gk.array(np.ones(shapes[0], np.float32), device=device)
    y = gk.zeros(shapes[1], device=device)
    with pytest.raises(IndexError, match=message):
        gk.launch(kernel, dim, inputs=[x], outputs=[y], device=device)
    assert not y.numpy().any()                          # refused before anything ran


def test_in_bounds_and_guarded_launches_run(device, rng):
    x_np = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    x, y = gk.array(x_np, device=device), gk.zeros((2, 3), device=device)
    gk.launch(strided, (2, 3), inputs=[x], outputs=[y], device=device)
    np.testing.assert_array_equal(y.numpy(), x_np[[1, 3]])
    # a guarded access is not proven at launch (its guard may keep it inside): a larger grid runs
    a, b = gk.array(np.arange(4, dtype=np.float32), device=device), gk.zeros(8, device=device)
    gk.launch(guarded, 8, inputs=[a], outputs=[b], device=device)
    np.testing.assert_array_equal(b.numpy()[:4], np.arange(4))


def test_a_proof_is_reused_only_for_the_same_arrays_and_grid(device):
    small, big = gk.ones(4, device=device), gk.ones(8, device=device)
    out = gk.zeros(8, device=device)
    for _ in range(3):                                  # the same launch again: proven once, still fine
        gk.launch(double, 8, inputs=[big], outputs=[out], device=device)
    with pytest.raises(IndexError, match="array 'x' with extent 4"):
        gk.launch(double, 8, inputs=[small], outputs=[out], device=device)
    with pytest.raises(IndexError, match="array 'y' with extent 4"):
        gk.launch(double, 8, inputs=[big], outputs=[gk.zeros(4, device=device)], device=device)
