"""Sub-array views in kernels (Warp's `x[i]` of an n-D array): read, written, `+=`/atomics, `.shape` and
`len`, views of views, vector elements and their components, views passed to @gk.func — forward values
against float64 NumPy references, reverse-mode and forward-mode derivatives against central finite
differences, on every device; misuse is a CompileError at file:line:col naming the view."""


import numpy as np
import pytest

import gradkit as gk
from tests.compile_errors import assert_compile_error
from tests.kernel_check import check

F64 = gk.float64
A1, A2, A3 = (gk.array(dtype=F64, ndim=n) for n in (1, 2, 3))


@gk.kernel
def rows_3d(x: A3, y: A3, s: A2, t: A1):
    i = gk.tid()
    plane = x[i]                 # 2-D
    out = y[i]
    for j in range(plane.shape[0]):
        row = plane[j]           # a view of a view: 1-D
        for k in range(len(row)):
            out[j][k] = row[k] * row[k] + x[i, j][k]
            s[j][k] += row[k]    # `+=` through a view: atomic, threads share s
        gk.atomic_add(t, j, gk.sin(row[0]))
    y[i][0][0] *= 2.0


def _rows_ref(x, y, s, t):
    y[:] = x * x + x
    y[:, 0, 0] *= 2.0
    return y, s + x.sum(0), t + np.sin(x[:, :, 0]).sum(0)


def test_views_of_a_3d_array(device, rng):
    n, m, p = 3, 2, 4
    check(rows_3d, n, [rng.normal(size=(n, m, p)), rng.normal(size=(n, m, p)), rng.normal(size=(m, p)),
                       rng.normal(size=m)], [F64] * 4, "iwoo", _rows_ref, device, rng)


@gk.kernel
def vec_rows(v: gk.array(dtype=gk.vec3d, ndim=2), w: gk.array(dtype=gk.vec3d, ndim=2), d: A2):
    i, j = gk.tid()
    a, b = v[i], w[i]
    d[i][j] = gk.dot(a[j], a[j]) + a[j].y
    b[j][2] = a[j][0] * 3.0       # a component of an element of a view
    b[j].x += gk.length(a[j])


def _vec_rows_ref(v, w, d):
    w[..., 2] = 3 * v[..., 0]
    w[..., 0] += np.linalg.norm(v, axis=-1)
    return w, (v * v).sum(-1) + v[..., 1]


def test_views_of_vector_arrays(device, rng):
    n, m = 3, 2
    check(vec_rows, (n, m), [rng.normal(size=(n, m, 3)), rng.normal(size=(n, m, 3)), rng.normal(size=(n, m))],
          [gk.vec3d, gk.vec3d, F64], "iow", _vec_rows_ref, device, rng)


@gk.func
def weighted_sum(r: A1, w: F64) -> F64:
    acc = F64(0.0)
    for k in range(len(r)):
        acc += r[k] * r[k] * w
    r[0] += w           # a write through the view reaches the caller's array
    return acc


@gk.func
def plane_trace(p: A2) -> F64:
    acc = F64(0.0)
    for k in range(p.shape[0]):
        acc += p[k, k]
    return acc


@gk.kernel
def views_to_funcs(x: A3, z: A3, y: A1):
    i = gk.tid()
    y[i] = weighted_sum(x[i][1], 2.0) + weighted_sum(x[i, 0], 0.5) + plane_trace(x[i]) + plane_trace(z[i])


def _funcs_ref(x, z, y):
    """Left to right, as the kernel calls them: plane_trace(x[i]) sees both functions' writes."""
    y = 2 * (x[:, 1] ** 2).sum(-1)
    x[:, 1, 0] += 2.0
    y = y + 0.5 * (x[:, 0] ** 2).sum(-1)
    x[:, 0, 0] += 0.5
    return y + np.einsum("ikk->i", x[:, :2, :2]) + np.einsum("ikk->i", z[:, :2, :2])


def test_views_passed_to_funcs(device, rng):
    n = 3
    # x is written by the function (r[0] += w): checked by value; gradients with respect to z and x's reads
    x = rng.normal(size=(n, 2, 3))
    xs = gk.array(x, dtype=F64, device=device)
    zs = gk.array(rng.normal(size=(n, 2, 3)), dtype=F64, device=device)
    y = gk.zeros(n, dtype=F64, device=device)
    gk.launch(views_to_funcs, n, inputs=[xs, zs, y], device=device)
    xr = x.copy()
    np.testing.assert_allclose(y.numpy(), _funcs_ref(xr, zs.numpy(), None), rtol=1e-12)
    np.testing.assert_allclose(xs.numpy(), xr, rtol=1e-12)
    check(views_to_funcs_ro, n, [rng.normal(size=(n, 2, 3)), rng.normal(size=(n, 2, 3)), np.zeros(n)],
          [F64] * 3, "iiw", _funcs_ro_ref, device, rng)


@gk.func
def read_sum(r: A1, w: F64) -> F64:
    acc = F64(0.0)
    for k in range(len(r)):
        acc += gk.sin(r[k]) * w
    return acc


@gk.kernel
def views_to_funcs_ro(x: A3, z: A3, y: A1):
    i = gk.tid()
    y[i] = read_sum(x[i][1], 2.0) * read_sum(z[i, 0], 0.5) + plane_trace(x[i])


def _funcs_ro_ref(x, z, y):
    return 2 * np.sin(x[:, 1]).sum(-1) * 0.5 * np.sin(z[:, 0]).sum(-1) + np.einsum("ikk->i", x[:, :2, :2])


@gk.kernel
def reversed_rows(x: A2, y: A2):
    i = gk.tid()
    src, dst = x[i], y[i]
    acc = F64(0.0)
    for k in reversed(range(len(src))):
        acc = acc * 0.5 + src[k]
        dst[k] = acc


def _reversed_rows_ref(x, y):
    acc = np.zeros(x.shape[0])
    for k in reversed(range(x.shape[1])):
        acc = acc * 0.5 + x[:, k]
        y[:, k] = acc
    return y


def test_views_in_reversed_loops(device, rng):
    check(reversed_rows, 4, [rng.normal(size=(4, 5)), np.zeros((4, 5))], [F64, F64], "iw", _reversed_rows_ref,
          device, rng)


def test_views_float32(device, rng):
    x = rng.normal(size=(4, 3)).astype(np.float32)
    xs = gk.array(x, dtype=gk.float32, device=device, requires_grad=True)
    ys = gk.zeros(4, dtype=gk.float32, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(row_norm32, 4, inputs=[xs, ys], device=device)
    np.testing.assert_allclose(ys.numpy(), (x.astype(np.float64) ** 2).sum(1), rtol=2e-6)
    tape.backward(grads={ys: gk.array(np.ones(4, np.float32), device=device)})
    np.testing.assert_allclose(xs.grad.numpy(), 2 * x, rtol=2e-6)


@gk.kernel
def row_norm32(x: gk.array(dtype=gk.float32, ndim=2), y: gk.array(dtype=gk.float32)):
    i = gk.tid()
    r = x[i]
    for k in range(r.shape[0]):
        y[i] += r[k] * r[k]


# --------------------------------------------------------------------------- errors at file:line:col

def view_as_value(x: A2, y: A1):
    y[0] = x[0]


def view_in_arithmetic(x: A2, y: A1):
    y[0] = x[0] * 2.0


def too_many(x: A2):
    x[0][1][2] = 1.0


def store_to_row(x: A2, y: A2):
    y[0] = 1.0


def view_attribute(x: A2):
    r = x[0]
    x[0, 0] = r.size


def view_shape_index(x: A3):
    r = x[0]
    x[0, 0, 0] = float(r.shape[2])


def view_on_one_path(x: A2, n: int):
    r = x[0]
    if n > 0:
        r = x[1]
    x[0, 0] = r[0]


@gk.func
def wants_2d(p: A2) -> F64:
    return p[0, 0]


def view_wrong_rank(x: A2, y: A1):
    y[0] = wants_2d(x[0])


ERRORS = [
    (view_as_value, "y[0] = x[0]", r"'x\[0\]', a 1-D sub-array of the 2-D array 'x' is not a value; index all 2"),
    (view_in_arithmetic, "x[0] * 2.0", r"cannot apply 'mul' to 'x\[0\]', a 1-D sub-array of the 2-D array 'x'"),
    (too_many, "x[0][1][2]", r"elements of array 'x\[0\]' are float64 scalars; they have no components"),
    (store_to_row, "y[0] = 1.0", r"array 'y' has 2 dimensions but is indexed with 1"),
    (view_attribute, "r.size", r"'x\[0\]', a 1-D sub-array of the 2-D array 'x' has no attribute 'size'"),
    (view_shape_index, "r.shape[2]", r"shape index 2 out of range for a 2-D array"),
    (view_on_one_path, "if n > 0", r"local 'r' holds a sub-array view .* on one path"),
    (view_wrong_rank, "wants_2d(x[0])", r"parameter 'p' is array2d\(float64\) but is given a 1-D sub-array view "
                                        r"of a array2d\(float64\)"),
]


@pytest.mark.parametrize("fn,snippet,message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_compile_errors(fn, snippet, message):
    """The error names the view (or array) at fault, at file:line of the offending expression (a callee's
    error names the call site)."""
    assert_compile_error(fn, snippet, message, column=False)
