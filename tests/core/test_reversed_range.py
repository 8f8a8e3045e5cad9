"""`for i in reversed(range(...))` (dynamic bounds, every step sign, static and unrolled forms, inside a
@gk.func with return): values against NumPy float64, gradients against central differences, every device."""

import numpy as np
import pytest

import gradkit as gk
from tests.kernel_check import check

F64 = gk.float64
A1 = gk.array(dtype=F64)


# --------------------------------------------------------------------------- reversed(range(...))

@gk.kernel
def rev_dynamic(a: A1, x: A1, y: A1, lo: int, hi: int, st: int):
    i = gk.tid()
    acc = 0.0
    for j in reversed(range(lo, hi, st)):        # every bound and the step's sign known only at run time
        acc = acc * a[i] + x[j]
    y[i] = acc


def _rev_dynamic_ref(a, x, y, lo, hi, st):
    acc = np.zeros_like(a)
    for j in reversed(range(lo, hi, st)):
        acc = acc * a + x[j]
    return acc


RANGES = [(0, 7, 1), (1, 7, 2), (2, 7, 3), (6, -1, -1), (6, 0, -2), (5, 1, -3), (3, 3, 1), (5, 2, 1), (2, 5, -1),
          (0, 1, 5), (-1, 7, 4)]


@pytest.mark.parametrize("lo,hi,st", RANGES, ids=lambda v: str(v))
def test_reversed_dynamic_bounds(lo, hi, st, device, rng):
    x = rng.normal(size=8)
    if lo == -1:             # x[-1] is out of bounds in a kernel: shift the data instead
        lo, hi = 0, 8
    check(rev_dynamic, 3, [rng.uniform(0.5, 1.5, 3), x, np.zeros(3), lo, hi, st], [F64, F64, F64, None, None, None],
          "iiwsss", _rev_dynamic_ref, device, rng)


@gk.kernel
def rev_forms(a: A1, x: A1, y: gk.array(dtype=F64, ndim=2), n: int):
    i = gk.tid()
    acc = 0.0
    for j in reversed(range(n)):                  # one argument, dynamic
        acc = acc * a[i] + x[j]
    y[i, 0] = acc
    acc = 0.0
    for j in reversed(range(1, n, 2)):            # constant step, dynamic stop
        acc = acc * a[i] + x[j]
    y[i, 1] = acc
    acc = 0.0
    for j in reversed(range(n - 1, 0, -3)):       # negative constant step
        acc = acc * a[i] + x[j]
    y[i, 2] = acc
    acc = 0.0
    for j in reversed(range(2, 7, 2)):            # all constant
        acc = acc * a[i] + x[j]
    y[i, 3] = acc
    acc = 0.0
    for j in reversed(gk.static(range(3))):       # unrolled
        acc = acc * a[i] + x[j]
    y[i, 4] = acc
    acc = 0.0
    for j in reversed(range(n)):                  # break and continue
        if j == 5:
            continue
        acc = acc * a[i] + x[j]
        if j == 2:
            break
    y[i, 5] = acc
    acc = 0.0
    for j in reversed(range(n)):                  # nested, inner bounds from the outer variable
        for k in reversed(range(j, n)):
            acc = acc * 0.5 + x[k] * a[i]
    y[i, 6] = acc


def _horner(a, xs):
    acc = np.zeros_like(a)
    for v in xs:
        acc = acc * a + v
    return acc


def _rev_forms_ref(a, x, y, n):
    y[:, 0] = _horner(a, [x[j] for j in reversed(range(n))])
    y[:, 1] = _horner(a, [x[j] for j in reversed(range(1, n, 2))])
    y[:, 2] = _horner(a, [x[j] for j in reversed(range(n - 1, 0, -3))])
    y[:, 3] = _horner(a, [x[j] for j in (6, 4, 2)])
    y[:, 4] = _horner(a, [x[2], x[1], x[0]])
    y[:, 5] = _horner(a, [x[j] for j in (6, 4, 3, 2)])
    acc = np.zeros_like(a)
    for j in reversed(range(n)):
        for k in reversed(range(j, n)):
            acc = acc * 0.5 + x[k] * a
    y[:, 6] = acc
    return y


def test_reversed_forms(device, rng):
    check(rev_forms, 3, [rng.uniform(0.5, 1.5, 3), rng.normal(size=8), np.zeros((3, 7)), 7], [F64, F64, F64, None],
          "iiws", _rev_forms_ref, device, rng)


@gk.func
def last_below(x: gk.array(dtype=F64), n: int, t: gk.float64) -> gk.float64:
    """The last x[j] (j < n) below t, scaled by its position, scanning backwards; 0 if none."""
    for j in reversed(range(n)):
        if x[j] < t:
            return x[j] * float(j + 1)
    return 0.0


@gk.kernel
def rev_return(x: A1, t: A1, y: A1, n: int):
    i = gk.tid()
    y[i] = last_below(x, n, t[i])


def _rev_return_ref(x, t, y, n):
    for i, ti in enumerate(t):
        y[i] = next((x[j] * (j + 1) for j in reversed(range(n)) if x[j] < ti), 0.0)
    return y


def test_reversed_in_func_with_return(device, rng):
    check(rev_return, 4, [rng.normal(size=6), np.array([-3.0, -0.3, 0.2, 3.0]), np.zeros(4), 6],
          [F64, F64, F64, None], "iiws", _rev_return_ref, device, rng)


@gk.kernel(max_unroll=8)
def rev_unrolled(x: A1, y: A1):
    acc = 0.0
    for j in reversed(range(1, 8, 3)):
        acc = acc * 2.0 + x[j]
    y[0] = acc


def test_reversed_constant_range_unrolled(device, rng):
    check(rev_unrolled, 1, [rng.normal(size=8), np.zeros(1)], [F64, F64], "iw",
          lambda x, y: np.array([4 * x[7] + 2 * x[4] + x[1]]), device, rng)
    assert "for " not in str(rev_unrolled.typed_ir)
