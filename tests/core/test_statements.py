"""Every statement kind of the kernel language, checked against a NumPy/Python reference."""

import numpy as np
import pytest

import gradkit as gk

SCALE = 3.0          # module-level constants fold at compile time
OFFSETS = (1, 2, 3)


@gk.func
def poly(x: float) -> float:
    return x * x + SCALE


@gk.func
def divmod_f(a: int, b: int) -> tuple[int, int]:
    return a // b, a % b


@gk.func
def early(x: float) -> float:
    if x < 0.0:
        return -x
    for k in range(3):
        if x > 10.0:
            return 10.0
        x = x * 2.0
    return x


@gk.kernel
def statements(x: gk.array(dtype=float), n: int, out: gk.array(dtype=float, ndim=2)):
    i = gk.tid()
    v = x[i]
    # if / elif / else with re-assignment
    if v < -1.0:
        r = -1.0
    elif v < 1.0:
        r = v
    else:
        r = 1.0
    out[i, 0] = r
    # for with carried locals, continue and break
    acc = 0.0
    for j in range(n):
        if j % 2 == 1:
            continue
        acc += float(j) * v
        if acc > 5.0:
            break
    out[i, 1] = acc
    # while with a mutated counter
    k = 0
    w = v
    while w < 4.0 and k < 10:
        w = w + 1.5
        k += 1
    out[i, 2] = w + float(k)
    # ranges with start/stop/step, negative step
    s = 0
    for j in range(10, 0, -3):
        s += j
    for j in range(2, 7, 2):
        s -= j
    out[i, 3] = float(s)
    # conditional expressions, and/or/not, comparisons chains
    out[i, 4] = 1.0 if (0.0 < v < 1.0 or not v > -2.0) else 2.0
    # device functions, tuples, module constants, static unrolling
    q, rem = divmod_f(i + 7, 3)
    out[i, 5] = poly(v) + float(q) + float(rem)
    t = 0.0
    for o in gk.static(OFFSETS):
        t += float(o) * v
    out[i, 6] = t + float(gk.static(len(OFFSETS)))
    out[i, 7] = early(v)
    # augmented assignment operators on locals
    z = v
    z *= 2.0
    z -= 1.0
    z /= 4.0
    out[i, 8] = z ** 2
    out[i, 9] = float(x.shape[0] + len(x))


def _reference(v, n, i, size):
    r = -1.0 if v < -1 else (v if v < 1 else 1.0)
    acc = 0.0
    for j in range(n):
        if j % 2 == 1:
            continue
        acc += float(np.float32(j)) * v
        if acc > 5.0:
            break
    k, w = 0, v
    while w < 4.0 and k < 10:
        w, k = w + 1.5, k + 1
    s = sum(range(10, 0, -3)) - sum(range(2, 7, 2))
    cexp = 1.0 if (0.0 < v < 1.0 or not v > -2.0) else 2.0
    q, rem = divmod(i + 7, 3)

    def early(x):
        if x < 0:
            return -x
        for _ in range(3):
            if x > 10:
                return 10.0
            x *= 2
        return x
    z = (v * 2 - 1) / 4
    return [r, acc, w + k, s, cexp, v * v + SCALE + q + rem, 6 * v + 3, early(v), z * z, 2 * size]


def test_statements(device, rng):
    x = rng.uniform(-4, 4, 64).astype(np.float32)
    out = gk.zeros((64, 10), device=device)
    gk.launch(statements, 64, inputs=[gk.array(x, device=device), 9], outputs=[out], device=device)
    expect = np.array([_reference(float(v), 9, i, 64) for i, v in enumerate(x)])
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_multi_dimensional_launch(device, ndim):
    shape = (3, 4, 5, 2)[:ndim]
    T = gk.array(dtype=gk.int32, ndim=ndim)
    if ndim == 1:
        @gk.kernel
        def k(a: T):
            i = gk.tid()
            a[i] = i
    elif ndim == 2:
        @gk.kernel
        def k(a: T):
            i, j = gk.tid()
            a[i, j] = i * 10 + j
    elif ndim == 3:
        @gk.kernel
        def k(a: T):
            i, j, l = gk.tid()
            a[i, j, l] = i * 100 + j * 10 + l
    else:
        @gk.kernel
        def k(a: T):
            i, j, l, m = gk.tid()
            a[i, j, l, m] = i * 1000 + j * 100 + l * 10 + m
    a = gk.zeros(shape, dtype=gk.int32, device=device)
    gk.launch(k, shape, outputs=[a], device=device)
    idx = np.indices(shape)
    expect = sum(idx[d] * 10 ** (ndim - 1 - d) for d in range(ndim))
    np.testing.assert_array_equal(a.numpy(), expect)


@gk.kernel
def contention(out_i: gk.array(dtype=int), out_f: gk.array(dtype=gk.float64), mins: gk.array(dtype=int)):
    i = gk.tid()
    gk.atomic_add(out_i, i % 4, 1)
    gk.atomic_sub(out_i, 4, 2)
    out_f[0] += 0.5
    gk.atomic_min(mins, 0, i)
    gk.atomic_max(mins, 1, i)


def test_atomics_under_contention(device):
    n = 100_000
    out_i = gk.zeros(5, dtype=gk.int32, device=device)
    out_f = gk.zeros(1, dtype=gk.float64, device=device)
    mins = gk.array(np.array([10**9, -1], dtype=np.int32), device=device)
    gk.launch(contention, n, outputs=[out_i, out_f, mins], device=device)
    np.testing.assert_array_equal(out_i.numpy(), [n // 4] * 4 + [-2 * n])
    assert out_f.numpy()[0] == 0.5 * n
    np.testing.assert_array_equal(mins.numpy(), [0, n - 1])


@gk.kernel
def atomic_returns_old(counter: gk.array(dtype=int), slots: gk.array(dtype=int)):
    i = gk.tid()
    k = gk.atomic_add(counter, 0, 1)
    slots[k] = i


def test_atomic_returns_old_value(device):
    counter = gk.zeros(1, dtype=gk.int32, device=device)
    slots = gk.full(1000, -1, dtype=gk.int32, device=device)
    gk.launch(atomic_returns_old, 1000, outputs=[counter, slots], device=device)
    assert sorted(slots.numpy().tolist()) == list(range(1000))


@gk.kernel
def scatter(idx: gk.array(dtype=int), v: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    out[idx[i]] += v[i]
    out[i % 7] -= 0.5 * v[i]


def test_scatter_add_many_threads(device, rng):
    """Many threads adding into shared elements (split across worker threads on the cpu backend)."""
    n = 200_000
    idx = rng.integers(0, 1000, n).astype(np.int32)
    v = rng.normal(size=n)
    out = gk.zeros(1000, dtype=gk.float64, device=device)
    out.assign(np.ones(1000))
    gk.launch(scatter, n, inputs=[gk.array(idx, device=device), gk.array(v, dtype=gk.float64, device=device)],
              outputs=[out], device=device)
    expect = np.ones(1000)
    np.add.at(expect, idx, v)
    np.add.at(expect, np.arange(n) % 7, -0.5 * v)
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-9, atol=1e-9)
