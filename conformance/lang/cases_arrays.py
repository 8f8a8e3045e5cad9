"""Arrays in the language: `a.shape[k]` and `len(a)`, 2-D/3-D arrays with multi-dimensional launches
(`i, j = gk.tid()`), integer index arrays (gathers), sub-array views `x[i]` (read and written), and
neighbours at constant shifts (stencils, whose adjoints gather)."""

import numpy as np

import gradkit as gk

from .harness import Case, Const, In, Out, Same, collect

A1 = gk.array(dtype=gk.float64)
A2 = gk.array(dtype=gk.float64, ndim=2)
A3 = gk.array(dtype=gk.float64, ndim=3)


@gk.kernel
def shape_len(x: A2, y: A1, k: gk.array(dtype=int)):
    i = gk.tid()
    acc = 0.0
    for j in range(x.shape[1]):
        acc += x[i, j] * float(j + 1)
    y[i] = acc + float(len(x)) + float(x.shape[0] * 10)
    k[i] = len(y) * 100 + x.shape[1]


def _shape_ref(x, y, k):
    n, m = x.shape
    return x @ np.arange(1.0, m + 1) + n + 10 * n, np.full(n, 100 * n + m)


@gk.kernel
def launch_2d(x: A2, w: A1, y: A2, s: A1):
    i, j = gk.tid()
    y[i, j] = x[i, j] * w[j] + float(i - j)
    s[i] += x[i, j] * x[i, j]


def _launch2_ref(x, w, y, s):
    n, m = x.shape
    return x * w + (np.arange(n)[:, None] - np.arange(m)), s + np.sum(x * x, 1)


@gk.kernel
def launch_3d(x: A3, y: A3, t: A2):
    i, j, k = gk.tid()
    y[i, j, k] = gk.sin(x[i, j, k]) * float(k + 1) + x[i, j, 0] * float(i)
    t[j, k] += x[i, j, k]


def _launch3_ref(x, y, t):
    return np.sin(x) * np.arange(1.0, x.shape[2] + 1) + x[:, :, :1] * np.arange(x.shape[0])[:, None, None], \
        t + x.sum(0)


@gk.kernel
def gather(x: A1, idx: gk.array(dtype=int), y: A1):
    i = gk.tid()
    y[i] = x[idx[i]] * x[idx[i]] + x[i % 3]


def _gather_ref(x, idx, y):
    return x[idx] ** 2 + x[np.arange(len(idx)) % 3]


@gk.kernel
def views(x: A2, y: A2, s: A1):
    i = gk.tid()
    row = x[i]
    out = y[i]
    acc = 0.0
    for j in range(len(row)):
        out[j] = row[j] * row[j]
        acc += row[j] * float(j)
    s[i] = acc


def _views_ref(x, y, s):
    return x * x, x @ np.arange(x.shape[1], dtype=float)


@gk.func
def _row_energy(r: A1, scale: gk.float64) -> gk.float64:
    acc = 0.0
    for k in range(len(r)):
        acc += gk.sin(r[k]) * scale
    return acc


@gk.kernel
def views_3d(x: A3, y: A2, t: A1):
    i = gk.tid()
    plane = x[i]
    for j in range(plane.shape[0]):
        y[i][j] = _row_energy(plane[j], 2.0) + _row_energy(x[i, j], 1.0)
        gk.atomic_add(t, j, plane[j][0] * plane[j][1])


def _views3_ref(x, y, t):
    return 3 * np.sin(x).sum(-1), t + (x[:, :, 0] * x[:, :, 1]).sum(0)


@gk.kernel
def stencil_1d(x: A1, y: A1):
    i = gk.tid()
    n = x.shape[0]
    left = x[i - 1] if i >= 1 else 0.0
    right = x[i + 2] if i + 2 < n else x[i]
    y[i] = x[i] * left + gk.sin(right)


def _stencil1_ref(x, y):
    n = len(x)
    left = np.concatenate([[0.0], x[:-1]])
    right = np.where(np.arange(n) + 2 < n, np.concatenate([x[2:], x[:2]]), x)
    return x * left + np.sin(right)


@gk.kernel
def stencil_2d(u: A2, out: A2):
    i, j = gk.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i == 0 or j == 0 or i == n - 1 or j == m - 1:
        out[i, j] = u[i, j]
    else:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + 0.2 * lap * u[i, j]


def _stencil2_ref(u, out):
    r = u.copy()
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
    r[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * lap * u[1:-1, 1:-1]
    return r


@gk.kernel
def passed_twice(u: A1, v: A1, idx: gk.array(dtype=int), out: A1):
    i = gk.tid()
    out[i] = u[i] * u[i] + 2.0 * v[idx[i]]      # u's adjoint adds at [i], v's anywhere: one gradient


def _twice_ref(u, v, idx, out):
    return u * u + 2.0 * v[idx]


CASES = collect("arrays", [
    Case("shape_and_len", "`a.shape[k]` and `len(a)` in a kernel (loop bound, values)", shape_len, 5,
         [In((5, 3)), Out((5,)), Out((5,), gk.int32)], _shape_ref),
    Case("launch_2d", "2-D launch `i, j = gk.tid()` over 2-D arrays, `+=` into a 1-D array", launch_2d,
         (3, 4),
         [In((3, 4)), In((4,)), Out((3, 4)), Out((3,), init=lambda r: r.normal(size=3))], _launch2_ref),
    Case("launch_3d", "3-D launch `i, j, k = gk.tid()` over 3-D arrays, `+=` into a 2-D array", launch_3d,
         (2, 3, 2), [In((2, 3, 2)), Out((2, 3, 2)), Out((3, 2))], _launch3_ref),
    Case("index_arrays", "indices read from an int array (gather, repeated elements)", gather, 6,
         [In((4,)), Const(lambda r: r.integers(0, 4, 6)), Out((6,))], _gather_ref),
    Case("subarray_view", "`row = x[i]` of a 2-D array: read, written (`out[j] = `) and `len(row)`", views, 3,
         [In((3, 4)), Out((3, 4)), Out((3,))], _views_ref),
    Case("subarray_view_3d", "views of a 3-D array and of a view (`x[i]`, `plane[j]`, `x[i, j]`) passed to a "
         "@gk.func and to `atomic_add`", views_3d, 3,
         [In((3, 2, 4)), Out((3, 2)), Out((2,), init=lambda r: r.normal(size=2))], _views3_ref),
    Case("stencil_neighbours", "neighbours at a constant shift, guarded at the ends: `x[i - 1] if i >= 1 else 0.0`, "
         "`x[i + 2] if i + 2 < n else x[i]` (the adjoint gathers)",
         stencil_1d, 9, [In((9,)), Out((9,))], _stencil1_ref),
    Case("array_passed_twice", "one array passed as two parameters (`u` read at [i], `v` gathered): its "
         "gradient gets both adjoints' adds",
         passed_twice, 8, [In((8,)), Same(0), Const(lambda r: r.integers(0, 8, 8)), Out((8,))], _twice_ref),
    Case("stencil_neighbours_2d", "a 5-point stencil over the interior of a 2-D grid, its edge copied",
         stencil_2d, (5, 6), [In((5, 6)), Out((5, 6))], _stencil2_ref),
])
