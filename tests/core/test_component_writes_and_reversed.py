"""Component writes on vector/matrix array elements (`v[i][k] = x`, `v[i].y += x`, `m[i][r, c] -= x`,
`m[i, j][r] = row`) and `for i in reversed(range(...))`: forward values against float64 NumPy references,
reverse-mode and forward-mode derivatives (of inputs and of the written arrays' initial contents) against
central finite differences, on every device; bad spellings are CompileErrors at file:line:col."""

import functools
import re

import numpy as np
import pytest

import gradkit as gk
from tests.compile_errors import assert_compile_error
from tests.kernel_check import check

F64 = gk.float64
A1 = gk.array(dtype=F64)


# --------------------------------------------------------------------------- vector components

VECS = [gk.vec2, gk.vec3, gk.vec4, gk.vec2d, gk.vec3d, gk.vec4d]


@functools.lru_cache(maxsize=None)
def vec_kernel(vt):
    S, last = gk.array(dtype=vt.scalar), vt.length - 1
    V = gk.array(dtype=vt)

    @gk.kernel
    def vec_writes(x: S, v: V, w: V):
        i = gk.tid()
        v[i][0] = x[i] * 2.0
        v[i].y = gk.sin(x[i])
        w[i][last] += x[i] * x[i]
        w[i].x -= 3.0 * x[i]
        w[i][0] += gk.cos(x[i])
    return vec_writes


def _vec_ref(x, v, w):
    v[:, 0], v[:, 1] = 2 * x, np.sin(x)
    w[:, -1] += x * x
    w[:, 0] += np.cos(x) - 3 * x
    return v, w


@pytest.mark.parametrize("vt", VECS, ids=lambda t: t.name)
def test_vec_component_writes(vt, device, rng):
    n, L = 5, vt.length
    check(vec_kernel(vt), n, [rng.normal(size=n), rng.normal(size=(n, L)), rng.normal(size=(n, L))],
          [vt.scalar, vt, vt], "ioo", _vec_ref, device, rng)


@gk.kernel
def vec_dynamic(x: A1, v: gk.array(dtype=gk.vec4d), w: gk.array(dtype=gk.vec2d), n: int):
    i = gk.tid()
    for k in range(4):
        v[i][k] = x[i] * float(k + 1)
    for j in range(n):
        w[i][(j + i) % 2] += x[j] * x[i]
    c = n - 5
    w[i][c] -= x[i]          # one component, chosen at run time


def _vec_dynamic_ref(x, v, w, n):
    v[:] = x[:, None] * np.arange(1.0, 5.0)
    for i in range(len(x)):
        for j in range(n):
            w[i, (j + i) % 2] += x[j] * x[i]
        w[i, n - 5] -= x[i]
    return v, w


def test_vec_component_run_time_index(device, rng):
    n = 6
    check(vec_dynamic, n, [rng.normal(size=n), rng.normal(size=(n, 4)), rng.normal(size=(n, 2)), n],
          [F64, gk.vec4d, gk.vec2d, None], "ioos", _vec_dynamic_ref, device, rng)


def test_component_write_ir_touches_one_component():
    """`=` is one single-component store, `+=` one single-component atomic add (no whole-element access)."""
    text = str(vec_kernel(gk.vec3d).typed_ir)
    assert re.search(r"store\[comp=0\] %v", text) and re.search(r"store\[comp=1\] %v", text)
    assert re.search(r"atomic\[kind=add, comp=2\] %w", text) and re.search(r"atomic\[kind=sub, comp=0\] %w", text)
    assert not re.search(r"= load %v|= load %w|store %v|store %w", text), text


# --------------------------------------------------------------------------- matrix components

MATS = [gk.mat22, gk.mat33, gk.mat44, gk.mat22d, gk.mat33d, gk.mat44d, gk.matrix((2, 3), F64),
        gk.matrix((3, 2), gk.float32)]


@functools.lru_cache(maxsize=None)
def mat_kernel(mt):
    S, M = gk.array(dtype=mt.scalar), gk.array(dtype=mt)
    R, C = mt.rows, mt.cols
    row_t = gk.vector(C, mt.scalar)

    @gk.kernel
    def mat_writes(x: S, m: M, p: M, n: int):
        i = gk.tid()
        m[i][0, 1] = x[i] * x[i]
        m[i][R - 1] = row_t(gk.sin(x[i]))       # a whole row
        p[i][R - 1, C - 1] += x[i]
        p[i][0] -= row_t(x[i] * 0.5)             # a whole row, accumulated
        for r in range(R):
            for c in range(n):
                if (r + c) % 2 == 1:
                    p[i][r, c] += x[i] * float(r + 1)
    return mat_writes


def _mat_ref(x, m, p, n):
    m[:, 0, 1] = x * x
    m[:, -1, :] = np.sin(x)[:, None]
    p[:, -1, -1] += x
    p[:, 0, :] -= 0.5 * x[:, None]
    for r in range(p.shape[1]):
        for c in range(n):
            if (r + c) % 2 == 1:
                p[:, r, c] += x * (r + 1)
    return m, p


@pytest.mark.parametrize("mt", MATS, ids=lambda t: t.name)
def test_mat_component_writes(mt, device, rng):
    n, R, C = 3, mt.rows, mt.cols
    check(mat_kernel(mt), n, [rng.normal(size=n), rng.normal(size=(n, R, C)), rng.normal(size=(n, R, C)), C],
          [mt.scalar, mt, mt, None], "ioos", _mat_ref, device, rng)


@gk.kernel
def mat_grid(x: gk.array(dtype=F64, ndim=2), m: gk.array(dtype=gk.mat33d, ndim=2)):
    i, j = gk.tid()
    m[i, j][2, 2] += x[i, j] * x[i, j]
    m[i, j][0] -= gk.vec3d(x[i, j], 1.0, -x[i, j])
    m[i, j][2, 0] -= x[i, j]
    m[i, j][1, j % 3] = x[i, j] * 3.0        # constant row, run-time column


def _mat_grid_ref(x, m):
    m[:, :, 2, 2] += x * x
    m[:, :, 0, :] -= np.stack([x, np.ones_like(x), -x], axis=-1)
    m[:, :, 2, 0] -= x
    for j in range(x.shape[1]):
        m[:, j, 1, j % 3] = 3 * x[:, j]
    return m


def test_mat_components_on_2d_array(device, rng):
    check(mat_grid, (2, 4), [rng.normal(size=(2, 4)), rng.normal(size=(2, 4, 3, 3))], [F64, gk.mat33d], "io",
          _mat_grid_ref, device, rng)


# --------------------------------------------------------------------------- *= and /= on components

@gk.kernel
def comp_scale(x: A1, v: gk.array(dtype=gk.vec3d), m: gk.array(dtype=gk.mat22d)):
    i = gk.tid()
    v[i][1] *= x[i]
    v[i].z /= 2.0
    m[i][1, 0] *= x[i] + 1.0
    m[i][0] *= 3.0


def _comp_scale_ref(x, v, m):
    v[:, 1] *= x
    v[:, 2] /= 2
    m[:, 1, 0] *= x + 1
    m[:, 0, :] *= 3
    return v, m


def test_component_mul_assign(device, rng):
    n = 4
    check(comp_scale, n, [rng.normal(size=n), rng.normal(size=(n, 3)), rng.normal(size=(n, 2, 2))],
          [F64, gk.vec3d, gk.mat22d], "ioo", _comp_scale_ref, device, rng, modes=("forward", "fwdmode"))


@pytest.mark.filterwarnings("ignore::gradkit.GradientRuleWarning")
def test_component_mul_assign_reverse(device, rng):
    """Read-then-rewrite of single components: the tape keeps the array from before the launch for the
    adjoint (see ad/read_order.py)."""
    n = 4
    check(comp_scale, n, [rng.normal(size=n), rng.normal(size=(n, 3)), rng.normal(size=(n, 2, 2))],
          [F64, gk.vec3d, gk.mat22d], "ioo", _comp_scale_ref, device, rng, modes=("reverse",))


# --------------------------------------------------------------------------- in a @gk.func and integers

@gk.func
def put(v: gk.array(dtype=gk.vec3d), i: int, x: gk.float64):
    v[i].z = x
    v[i][0] += x * x


@gk.kernel
def via_func(x: A1, v: gk.array(dtype=gk.vec3d)):
    i = gk.tid()
    put(v, i, x[i])


def _put_ref(x, v):
    v[:, 2] = x
    v[:, 0] += x * x
    return v


def test_component_writes_in_func(device, rng):
    n = 5
    check(via_func, n, [rng.normal(size=n), rng.normal(size=(n, 3))], [F64, gk.vec3d], "io", _put_ref, device, rng)


@gk.kernel
def int_comps(c: gk.array(dtype=gk.vec2i), m: gk.array(dtype=gk.vec4i)):
    i = gk.tid()
    c[i][1] = i * 2
    c[i].x += 7
    m[i][i % 4] -= i
    m[i].w *= 3


def test_integer_component_writes(device):
    n = 4
    c = gk.array(np.ones((n, 2), np.int32), dtype=gk.vec2i, device=device)
    m = gk.array(np.ones((n, 4), np.int32), dtype=gk.vec4i, device=device)
    gk.launch(int_comps, n, inputs=[c, m], device=device)
    np.testing.assert_array_equal(c.numpy(), np.stack([np.full(n, 8), 2 * np.arange(n)], axis=1))
    want = np.ones((n, 4), np.int32)
    for i in range(n):
        want[i, i % 4] -= i
    want[:, 3] *= 3
    np.testing.assert_array_equal(m.numpy(), want)



# --------------------------------------------------------------------------- errors at file:line:col

def bad_comp_index(v: gk.array(dtype=gk.vec3d)):
    v[0][3] = 1.0


def bad_mat_index(m: gk.array(dtype=gk.mat22d)):
    m[0][1, 2] += 1.0


def scalar_elements(a: gk.array(dtype=F64)):
    a[0][0] = 1.0


def bad_swizzle(v: gk.array(dtype=gk.vec3d)):
    v[0].w = 1.0


def too_many_indices(v: gk.array(dtype=gk.vec3d)):
    v[0][0, 1] = 1.0


def narrowing(v: gk.array(dtype=gk.vec3), x: gk.array(dtype=F64)):
    v[0][1] = x[0]


def wrong_row(m: gk.array(dtype=gk.mat33d)):
    m[0][1] = 2.0 * gk.vec2d(1.0, 2.0)


def float_index(v: gk.array(dtype=gk.vec3d)):
    v[0][1.0] = 2.0


def reversed_array(x: gk.array(dtype=F64)):
    for j in reversed(x):
        x[0] = 1.0


def reversed_len(x: gk.array(dtype=F64)):
    for j in reversed(len(x)):
        x[0] = 1.0


def reversed_zero_step(x: gk.array(dtype=F64)):
    for j in reversed(range(0, 4, 0)):
        x[j] = 1.0


def reversed_value(x: gk.array(dtype=F64)):
    r = reversed(range(3))


ERRORS = [
    (bad_comp_index, "3] = 1.0", r"component index 3 is out of range for vec3d \(0\.\.2\)"),
    (bad_mat_index, "2] += 1.0", r"component index 2 is out of range for mat22d"),
    (scalar_elements, "a[0][0]", r"elements of array 'a' are float64 scalars"),
    (bad_swizzle, "v[0].w", r"cannot assign to attribute 'w' of a vec3d element of array 'v'"),
    (too_many_indices, "v[0][0, 1]", r"takes at most 1 component index, got 2"),
    (narrowing, "v[0][1] = x[0]", r"assign to component of array 'v' \(vec3\): expected float32, got float64"),
    (wrong_row, "m[0][1] =", r"expected vec3d, got vec2d"),
    (float_index, "1.0]", r"index must be an integer"),
    (reversed_array, "reversed(x)", r"reversed\(range\(\.\.\.\)\) or reversed\(gk\.static\(\.\.\.\)\)"),
    (reversed_len, "len(x)", r"reversed\(range\(\.\.\.\)\)"),
    (reversed_zero_step, "range(0, 4, 0)", r"step must not be zero"),
    (reversed_value, "reversed(range(3))", r"reversed\(\) can only be used as the iterable of a for loop"),
]


@pytest.mark.parametrize("fn,snippet,message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_compile_errors(fn, snippet, message):
    """The error names the kernel, file:line:col of the offending expression, and puts a caret under it."""
    text = assert_compile_error(fn, snippet, message, caret=True)
    assert f"'{fn.__name__}'" in text, text
