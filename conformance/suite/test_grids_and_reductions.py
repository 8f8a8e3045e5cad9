"""On every device: reductions onto one element (partial sums per chunk or work-group) are exact and not
deferred when the kernel also reads the element; n-D grids visit every coordinate exactly once (the cpu
backend walks rows of the last axis, with worker ranges starting and ending inside rows)."""

import numpy as np

import gradkit as gk


@gk.kernel
def sum_squares(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


@gk.kernel
def add_then_read(x: gk.array(dtype=float), total: gk.array(dtype=float), seen: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(total, 0, x[i])
    seen[i] = total[0]


def test_reduction_sum_matches_float64(device, rng):
    x0 = rng.uniform(-1, 1, 100_003).astype(np.float32)
    loss = gk.zeros(1, device=device)
    gk.launch(sum_squares, x0.size, inputs=[gk.array(x0, device=device)], outputs=[loss], device=device)
    expected = np.sum(x0.astype(np.float64) ** 2)
    np.testing.assert_allclose(loss.numpy()[0], expected, rtol=1e-5)


def test_thread_sees_its_own_atomic_add(device, rng):
    x0 = rng.uniform(0.5, 1.5, 4099).astype(np.float32)
    total = gk.zeros(1, device=device)
    seen = gk.zeros(x0.size, device=device)
    gk.launch(add_then_read, x0.size, inputs=[gk.array(x0, device=device)], outputs=[total, seen], device=device)
    np.testing.assert_allclose(total.numpy()[0], np.sum(x0.astype(np.float64)), rtol=1e-5)
    # every thread added a positive value before reading: it reads at least its own contribution
    assert np.all(seen.numpy() >= x0 * (1 - 1e-6))


@gk.kernel
def coords3(out: gk.array(dtype=gk.int32, ndim=3), flat: gk.array(dtype=gk.int32)):
    i, j, k = gk.tid()
    out[i, j, k] = i * 10000 + j * 100 + k
    gk.atomic_add(flat, 0, 1)


@gk.kernel
def coords2(out: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    out[i, j] = float(i) * 1000.0 + float(j)


def test_nd_grids_visit_every_coordinate_once(device):
    # odd extents: worker ranges start and end inside rows (the cpu backend walks rows of the last axis)
    for shape in [(3, 5, 7), (1, 1, 1), (7, 1, 33), (2, 129, 3)]:
        out = gk.zeros(shape, dtype=gk.int32, device=device)
        count = gk.zeros(1, dtype=gk.int32, device=device)
        gk.launch(coords3, shape, outputs=[out, count], device=device)
        i, j, k = np.indices(shape)
        np.testing.assert_array_equal(out.numpy(), i * 10000 + j * 100 + k)
        assert count.numpy()[0] == np.prod(shape)
    for shape in [(1001, 17), (3, 100_003), (0, 5)]:
        out = gk.zeros(shape, device=device)
        gk.launch(coords2, shape, outputs=[out], device=device)
        i, j = np.indices(shape)
        np.testing.assert_array_equal(out.numpy(), (i * 1000.0 + j).astype(np.float32))


@gk.kernel
def total(x: gk.array(dtype=float), s: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(s, 0, x[i])


def test_reduction_past_float32_integer_range_is_accurate(device):
    """The contract (backends/README.md): a float32 atomic_add onto one element, its old value unused, is
    about as accurate as partial sums. Adding 1.0 to a float32 running sum stops at 2^24 (16777216 + 1
    rounds back), so summing 2^24 + 2^20 ones that way gives 16777216, 6% short; partial sums (per chunk
    or work-group) give the exact count."""
    n = (1 << 24) + (1 << 20)
    s = gk.zeros(1, device=device)
    gk.launch(total, n, inputs=[gk.ones(n, device=device)], outputs=[s], device=device)
    np.testing.assert_allclose(s.numpy()[0], n, rtol=1e-6)
