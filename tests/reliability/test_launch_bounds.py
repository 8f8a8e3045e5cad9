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


def test_the_proof_is_made_for_every_launch(device):
    small, big = gk.ones(4, device=device), gk.ones(8, device=device)
    out = gk.zeros(8, device=device)
    for _ in range(3):                                  # the same launch again: proven once, still fine
        gk.launch(double, 8, inputs=[big], outputs=[out], device=device)
    with pytest.raises(IndexError, match="array 'x' with extent 4"):
        gk.launch(double, 8, inputs=[small], outputs=[out], device=device)
    with pytest.raises(IndexError, match="array 'y' with extent 4"):
        gk.launch(double, 8, inputs=[big], outputs=[gk.zeros(4, device=device)], device=device)


@gk.kernel
def mixed(x: gk.array(dtype=float, ndim=2), y: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    y[i, j] = x[i + 2, j] + x[i, j + 1] + x[3 * i - 1 + 2, 2 * j] + x[1, j]


def _mixed_indices(gi: int, gj: int) -> list:
    """Every (row, column) of x that `mixed` reads on the grid (gi, gj), enumerated, not derived."""
    return [(r, c) for i in range(gi) for j in range(gj)
            for r, c in ((i + 2, j), (i, j + 1), (3 * i + 1, 2 * j), (1, j))]


def test_the_proof_agrees_with_every_index_enumerated(device, rng):
    """Random grids and shapes around the edge: the launch is refused exactly when some thread's index
    leaves x (the merged `x[i + c]` comparisons and the full check of the strided access together)."""
    seen = set()
    for _ in range(60):
        gi, gj = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        rows, cols = int(rng.integers(1, 14)), int(rng.integers(1, 9))
        x_np = rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
        x, y = gk.array(x_np, device=device), gk.zeros((gi, gj), device=device)
        outside = any(not (0 <= r < rows and 0 <= c < cols) for r, c in _mixed_indices(gi, gj))
        seen.add(outside)
        if outside:
            with pytest.raises(IndexError, match="array 'x'"):
                gk.launch(mixed, (gi, gj), inputs=[x], outputs=[y], device=device)
            assert not y.numpy().any()
        else:
            gk.launch(mixed, (gi, gj), inputs=[x], outputs=[y], device=device)
            i, j = np.meshgrid(np.arange(gi), np.arange(gj), indexing="ij")
            want = x_np[i + 2, j] + x_np[i, j + 1] + x_np[3 * i + 1, 2 * j] + x_np[1, j]
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    assert seen == {True, False}                         # both outcomes were exercised


@gk.kernel
def gathered(idx: gk.array(dtype=int), x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] + x[idx[i]]                             # x[idx[i]]: data-dependent, checked per access


def _checks_per_access(device, kernel) -> bool:
    """Whether the generated forward code has per-access bounds branches (cpu's and OpenCL's markers)."""
    text = kernel.source(device)
    return ("out_of_bounds" if device == "cpu" else "gk_fault(gk_fault_rec, 2, ") in text


@pytest.fixture
def debug_checks():
    saved, gk.config.debug = gk.config.debug, True
    yield
    gk.config.debug = saved


def test_debug_checks_what_the_launch_cannot_prove(device, rng, debug_checks):
    """Under gk.config.debug the accesses proven at launch lose their per-thread checks (hoisted into the
    launch), the data-dependent one keeps its own: both kinds of bad launch are still IndexErrors."""
    if device == "cpu" or device.startswith("opencl"):          # the backends generating fault branches
        assert not _checks_per_access(device, double)
        assert _checks_per_access(device, gathered)
    x_np = rng.uniform(-1, 1, 8).astype(np.float32)
    x, y = gk.array(x_np, device=device), gk.zeros(8, device=device)
    idx = gk.array(rng.integers(0, 8, 8).astype(np.int32), device=device)
    gk.launch(gathered, 8, inputs=[idx, x, y], device=device)
    np.testing.assert_allclose(y.numpy(), x_np + x_np[idx.numpy()], rtol=1e-6)
    with pytest.raises(IndexError, match="array 'x' with extent 8"):          # proven at launch
        gk.launch(gathered, 9, inputs=[gk.zeros(9, dtype=int, device=device), x, gk.zeros(9, device=device)],
                  device=device)
    bad = gk.array(np.array([0, 1, 2, 8, 4, 5, 6, 7], np.int32), device=device)
    with pytest.raises(IndexError, match="index 8 out of range for axis 0 of array 'x'"):   # per access
        gk.launch(gathered, 8, inputs=[bad, x, y], device=device)


@gk.kernel
def unrolled(w: gk.array(dtype=float, ndim=2), y: gk.array(dtype=float)):
    y[0] = w[0, 1] + w[2, 0]                            # first constant access
    y[1] = w[1, 3] + w[0, 0]                            # w[1, 3]: column 3


def test_constant_indices_are_checked_as_their_extremes_and_the_first_bad_one_is_named(device):
    """Constant indices (ti.static-unrolled loops) are proven by each array axis's lowest and highest one;
    out of range, the error names the first access in the kernel's order, as a check of every one would."""
    from gradkit.runtime.launch import bounds
    fn = unrolled.lowered("forward")
    found, _ = bounds.scan(fn)
    fast, rest = bounds.plan(found)
    assert len([a for a in found if a.axis is None]) == 10 and len(rest) == 6    # 2 per (array, axis)
    y = gk.zeros(2, device=device)
    gk.launch(unrolled, 1, inputs=[gk.ones((3, 4), device=device), y])
    assert y.numpy().tolist() == [2.0, 2.0]
    with pytest.raises(IndexError, match=r"index 2 out of range for axis 0 of array 'w' with extent 2"):
        gk.launch(unrolled, 1, inputs=[gk.ones((2, 4), device=device), y])
    with pytest.raises(IndexError, match=r"index 3 out of range for axis 1 of array 'w' with extent 3 at \S+:"
                                         + str(unrolled.pyfunc.__code__.co_firstlineno + 3)):
        gk.launch(unrolled, 1, inputs=[gk.ones((3, 3), device=device), y])
