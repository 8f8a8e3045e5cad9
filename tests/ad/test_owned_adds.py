"""Thread-owned adjoint adds (ad/owned.py): an adjoint add into `adj_x[t, i]` with `t` launch-invariant and
`i` the thread id (or `a * i + u`, a odd or twice odd, u invariant) is a plain load-add-store; where two
threads may meet on an element it stays atomic. The IR tests pin down which adds are plain, the gradient
tests check the gradients against float64 NumPy, on every device, at sizes the CPU backend splits over its
thread pool."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.ad.reverse import adjoint_function

N = 1 << 16          # threads: above the CPU backend's inline threshold, so the pool runs the adjoint


def flags(kernel, name: str) -> list[bool]:
    """The `exclusive` flag of each adjoint atomic into `adj_<name>`."""
    fn = adjoint_function(kernel.lowered("forward"))
    adj = next(p.value.id for p in fn.params if p.name == f"adj_{name}")
    return [bool(ins.attrs.get("exclusive")) for ins in fn.walk() if ins.op == "atomic" and ins.args[0].id == adj]


# ---------------------------------------------------------------------------------------------- owned
@gk.kernel
def step(x: gk.array(dtype=gk.float64, ndim=2), t: int):
    i = gk.tid()
    a = x[t, i]
    x[t + 1, i] = 0.5 * a * a + gk.sin(a)


@gk.kernel
def strided(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), lo: int):
    i = gk.tid()
    y[i] = x[3 * i + 1] * x[3 * i + 1] + x[2 * (i + lo) - 4]


@gk.kernel
def rows_in_loop(x: gk.array(dtype=gk.float64, ndim=2), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    s = float(0.0)
    for k in range(x.shape[0]):
        s += x[k, i] * gk.float64(k + 1)
    y[i] = s * s


@gk.kernel
def grid2(x: gk.array(dtype=gk.float64, ndim=3), y: gk.array(dtype=gk.float64, ndim=2), t: int):
    i, j = gk.tid()
    y[i, j] = x[t, i, j] * x[t + 1, i, j]


@gk.kernel
def cols_by_index(x: gk.array(dtype=gk.float64, ndim=2), idx: gk.array(dtype=int), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = gk.cos(x[idx[i], i])          # the other component varies per thread: column i is still i's


def test_plain_adds_where_the_element_is_the_threads():
    assert flags(step, "x") == [True]
    assert flags(strided, "x") == [False, False]   # 3i+1 beside 2i+2lo-4: two signatures, may meet
    assert flags(rows_in_loop, "x") == [True]
    assert flags(grid2, "x") == [True, True]
    assert flags(cols_by_index, "x") == [True]


@gk.kernel
def odd_stride(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), lo: int):
    i = gk.tid()
    y[i] = x[lo - 3 * i] * x[lo - 3 * i]


def test_invertible_strides_and_invariant_offsets():
    assert flags(odd_stride, "x") == [True]


# ---------------------------------------------------------------------------------------------- shared
@gk.kernel
def window(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    s = float(0.0)
    for k in range(3):
        s += x[i + k] * x[i + k]          # k is a serial loop's variable: threads i and i + 1 meet
    y[i] = s


@gk.kernel
def halves(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i // 2] * gk.float64(i + 1)


@gk.kernel
def split_index(x: gk.array(dtype=gk.float64, ndim=2), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = gk.sin(x[i % 4, i // 4])       # both components derive from i, neither is one-to-one


@gk.kernel
def crossed(x: gk.array(dtype=gk.float64, ndim=2), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[1, i] * x[i, 0]               # threads 0 and 1 meet on x[1, 0]


@gk.kernel
def per_thread_offset(x: gk.array(dtype=gk.float64), off: gk.array(dtype=int), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = gk.exp(x[i + off[i]])            # the offset is loaded: it varies per thread


@gk.kernel
def stride4(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[4 * i] * x[4 * i]              # 4 is not invertible on wrapping integers: not proven


@gk.kernel
def one_axis(x: gk.array(dtype=gk.float64, ndim=2), y: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    y[i, j] = x[i, 0] * gk.float64(j + 1)   # a 2-D grid: every j of a row adds into x[i, 0]


def test_atomic_adds_where_threads_may_meet():
    for kernel in (window, halves, split_index, crossed, per_thread_offset, stride4, one_axis):
        got = flags(kernel, "x")
        assert got and not any(got), kernel.key


# ---------------------------------------------------------------------------------------------- gradients
def test_time_steps_gradient(device, rng):
    steps, n = 5, N
    x0 = np.zeros((steps, n))
    x0[0] = rng.uniform(-1.0, 1.0, n)
    x = gk.array(x0, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        for t in range(steps - 1):
            gk.launch(step, n, inputs=[x, t], device=device)
    seed = np.zeros((steps, n))
    seed[-1] = rng.standard_normal(n)
    tape.backward(grads={x: gk.array(seed, device=device)})
    a, deriv = x0[0].copy(), np.ones(n)
    for _ in range(steps - 1):
        deriv *= a + np.cos(a)
        a = 0.5 * a * a + np.sin(a)
    np.testing.assert_allclose(x.numpy()[-1], a, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy()[0], seed[-1] * deriv, rtol=1e-10, atol=1e-14)


def _adjoint(kernel, dim, inputs, outputs, seed, device):
    """Gradients of every float input after one adjoint launch seeded with `seed` on the outputs."""
    arrs = [gk.array(v, device=device, requires_grad=v.dtype.kind == "f") if isinstance(v, np.ndarray) else v
            for v in inputs]
    outs = [gk.zeros(o.shape, dtype=gk.float64, device=device, requires_grad=True) for o in outputs]
    for o, s in zip(outs, seed):
        o.grad.assign(s)
    gk.launch(kernel, dim, inputs=arrs, outputs=outs, device=device, adjoint=True)
    return [a.grad.numpy() for a in arrs if isinstance(a, gk.array) and a.requires_grad]


def test_strided_gradient(device, rng):
    n, lo = N, 7
    x0 = rng.standard_normal(3 * n + 2 * lo + 4)
    g = rng.standard_normal(n)
    (gx,) = _adjoint_with_scalar(strided, n, x0, lo, g, device)
    want = np.zeros_like(x0)
    i = np.arange(n)
    np.add.at(want, 3 * i + 1, 2 * x0[3 * i + 1] * g)
    np.add.at(want, 2 * (i + lo) - 4, g)
    np.testing.assert_allclose(gx, want, rtol=1e-12, atol=1e-14)


def _adjoint_with_scalar(kernel, n, x0, lo, g, device):
    """x's gradient after one adjoint launch of kernel(x, y, lo) seeded with `g` on y."""
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    y.grad.assign(g)
    gk.launch(kernel, n, inputs=[x, y, lo], device=device, adjoint=True)
    return (x.grad.numpy(),)


def test_odd_stride_gradient(device, rng):
    n = N
    lo = 3 * n + 2
    x0 = rng.standard_normal(lo + 1)
    g = rng.standard_normal(n)
    (gx,) = _adjoint_with_scalar(odd_stride, n, x0, lo, g, device)
    want = np.zeros_like(x0)
    k = lo - 3 * np.arange(n)
    want[k] = 2 * x0[k] * g
    np.testing.assert_allclose(gx, want, rtol=1e-12, atol=1e-14)


def test_rows_in_loop_gradient(device, rng):
    rows, n = 4, N
    x0 = rng.standard_normal((rows, n))
    g = rng.standard_normal(n)
    (gx,) = _adjoint(rows_in_loop, n, [x0], [np.zeros(n)], [g], device)
    w = np.arange(1, rows + 1, dtype=np.float64)[:, None]
    s = (x0 * w).sum(axis=0)
    np.testing.assert_allclose(gx, 2 * s * g * w, rtol=1e-11, atol=1e-13)


def test_grid_gradient(device, rng):
    t, shape = 1, (256, 257)
    x0 = rng.standard_normal((3, *shape))
    g = rng.standard_normal(shape)
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.zeros(shape, dtype=gk.float64, device=device, requires_grad=True)
    y.grad.assign(g)
    gk.launch(grid2, shape, inputs=[x, y, t], device=device, adjoint=True)
    want = np.zeros_like(x0)
    want[t] = x0[t + 1] * g
    want[t + 1] = x0[t] * g
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-14)


def test_cols_by_index_gradient(device, rng):
    rows, n = 3, N
    x0 = rng.standard_normal((rows, n))
    idx = rng.integers(0, rows, n).astype(np.int32)
    g = rng.standard_normal(n)
    (gx,) = _adjoint(cols_by_index, n, [x0, idx], [np.zeros(n)], [g], device)
    want = np.zeros_like(x0)
    i = np.arange(n)
    want[idx, i] = -np.sin(x0[idx, i]) * g
    np.testing.assert_allclose(gx, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", ["window", "halves", "split_index", "crossed", "per_thread_offset"])
def test_shared_element_gradients(device, rng, case):
    n = N
    g = rng.standard_normal(n)
    i = np.arange(n)
    if case == "window":
        x0 = rng.standard_normal(n + 2)
        (gx,) = _adjoint(window, n, [x0], [np.zeros(n)], [g], device)
        want = np.zeros_like(x0)
        for k in range(3):
            np.add.at(want, i + k, 2 * x0[i + k] * g)
    elif case == "halves":
        x0 = rng.standard_normal(n // 2)
        (gx,) = _adjoint(halves, n, [x0], [np.zeros(n)], [g], device)
        want = np.zeros_like(x0)
        np.add.at(want, i // 2, (i + 1) * g)
    elif case == "split_index":
        x0 = rng.standard_normal((4, n // 4))
        (gx,) = _adjoint(split_index, n, [x0], [np.zeros(n)], [g], device)
        want = np.zeros_like(x0)
        np.add.at(want, (i % 4, i // 4), np.cos(x0[i % 4, i // 4]) * g)
    elif case == "crossed":                 # x is n x n: a smaller launch
        n = 512
        g, i = g[:n], i[:n]
        x0 = rng.standard_normal((n, n))
        (gx,) = _adjoint(crossed, n, [x0], [np.zeros(n)], [g], device)
        want = np.zeros_like(x0)
        np.add.at(want, (np.ones(n, int), i), x0[i, 0] * g)
        np.add.at(want, (i, np.zeros(n, int)), x0[1, i] * g)
    else:
        x0 = rng.standard_normal(n + 8)
        off = rng.integers(0, 8, n).astype(np.int32)
        (gx,) = _adjoint(per_thread_offset, n, [x0, off], [np.zeros(n)], [g], device)
        want = np.zeros_like(x0)
        np.add.at(want, i + off, np.exp(x0[i + off]) * g)
    np.testing.assert_allclose(gx, want, rtol=1e-11, atol=1e-12)

