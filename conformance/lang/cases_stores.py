"""Array stores and augmented assignment inside loops (new in the second turn): `y[j] = x[j]`, `o[i] += v`,
`o[i] -= v`, `a[i, j] *= v`, `ov[i] += vec`, component writes of vector/matrix array elements and
atomics, in `for`/`while` loops at depth 1 and 2, and stores read back in a later iteration. Written
elements are written once or accumulated (Taichi's rules), except in `store_overwrite_in_loop`."""

import numpy as np

import gradkit as gk

from .cases_builtins import MIN_MAX_REFUSAL
from .harness import Case, In, Out, Scalar, collect

A1 = gk.array(dtype=gk.float64)
A2 = gk.array(dtype=gk.float64, ndim=2)
A3 = gk.array(dtype=gk.float64, ndim=3)
V1 = gk.array(dtype=gk.vec3d)
N = 4          # threads
M = 5          # loop trips


def _rand(*shape):
    return lambda r: r.normal(size=shape)


@gk.kernel
def store_loops(a: A1, x: A2, y: A2, z: A3, n: int):
    i = gk.tid()
    for j in range(n):
        y[i, j] = x[i, j] * a[i]
    for j in range(n):
        for k in range(2):
            z[i, j, k] = x[i, j] * float(k + 1) + a[i] * x[i, k]


def _store_loops_ref(a, x, y, z, n):
    z = x[:, :, None] * np.array([1.0, 2.0]) + a[:, None, None] * x[:, None, :2]
    return x * a[:, None], z


STORE_ARGS = [In((N,)), In((N, M)), Out((N, M)), Out((N, M, 2)), Scalar(M)]


@gk.kernel
def overwrite_loop(a: A1, x: A1, y: A2, n: int):
    i = gk.tid()
    for j in range(n):
        y[i, 0] = x[j] * a[i]
        if x[j] > 0.0:
            y[i, 1] = x[j] * x[j] * a[i]


def _overwrite_ref(a, x, y, n):
    last_pos = [v for v in x[:n] if v > 0][-1]
    return np.stack([x[n - 1] * a, last_pos ** 2 * a], 1)


@gk.kernel
def copy_single_thread(x: A1, y: A1, w: A1, n: int):
    for j in range(n):
        y[j] = x[j]
    k = 0
    while k < n:
        w[k] = x[k] * x[k]
        k += 1


@gk.kernel
def accumulate_loops(a: A1, x: A1, o1: A1, o2: A1, o3: A1, o4: A1, n: int):
    i = gk.tid()
    for j in range(n):
        o1[i] += gk.sin(x[j]) * a[i]
        o2[j] += a[i] * x[j]
        o3[i] -= x[j] * x[j] * a[i]
    for j in range(n):
        for k in range(j, n):
            o4[i] += x[j] * x[k]
            o4[i] -= a[i] * x[k] * 0.5


def _accumulate_ref(a, x, o1, o2, o3, o4, n):
    o4 = o4 + sum(x[j] * x[k] - 0.5 * a * x[k] for j in range(n) for k in range(j, n))
    return (o1 + a * np.sum(np.sin(x)), o2 + np.sum(a) * x, o3 - a * np.sum(x * x), o4)


ACC_ARGS = [In((N,)), In((M,)), Out((N,), init=_rand(N)), Out((M,), init=_rand(M)), Out((N,), init=_rand(N)),
            Out((N,), init=_rand(N)), Scalar(M)]


@gk.kernel
def mul_assign_loops(x: A2, y: A2, z: A2, w: A2, n: int):
    i = gk.tid()
    w[i, 1] *= x[i, 1]
    for k in range(n):
        y[i, 1] *= 1.0 + 0.5 * x[i, k]
    for j in range(2):
        z[i, j] = x[i, j]
        for k in range(n):
            z[i, j] *= x[i, k] + 1.5


def _mul_assign_ref(x, y, z, w, n):
    y, w = y.copy(), w.copy()
    w[:, 1] *= x[:, 1]
    for k in range(n):
        y[:, 1] *= 1 + 0.5 * x[:, k]
    z = x[:, :2] * np.prod(x[:, :n] + 1.5, axis=1)[:, None]
    return y, z, w


@gk.kernel
def mul_assign_varying(x: A2, y: A2, n: int):
    i = gk.tid()
    for k in range(n):
        y[i, k % 2] *= 1.0 + 0.5 * x[i, k]


def _mul_assign_varying_ref(x, y, n):
    y = y.copy()
    for k in range(n):
        y[:, k % 2] *= 1 + 0.5 * x[:, k]
    return (y,)


# Documented (docs/errors.md): elements read, overwritten later in the loop and read again on a later trip.
LOST_READS = {"reverse": "overwrites later"}


MUL_ARGS = [In((N, M)), Out((N, 2), init=_rand(N, 2)), Out((N, 2)), Out((N, 2), init=_rand(N, 2)), Scalar(M)]


@gk.kernel
def vec_accumulate(a: A1, x: A1, ov: V1, ow: V1, n: int):
    i = gk.tid()
    for j in range(n):
        ov[i] += gk.vec3d(x[j], x[j] * a[i], 1.0)
        ov[i] -= gk.vec3d(0.0, 0.0, a[i] * x[j])
    for j in range(n):
        for k in range(2):
            ow[j] += gk.vec3d(a[i], x[j] * float(k), a[i] * a[i])


def _vec_accumulate_ref(a, x, ov, ow, n):
    ov = ov + np.stack([np.full_like(a, x.sum()), a * x.sum(), n - a * x.sum()], 1)
    ow = ow + np.stack([np.full_like(x, 2 * a.sum()), len(a) * x, np.full_like(x, 2 * np.sum(a * a))], 1)
    return ov, ow


VEC_ACC_ARGS = [In((N,)), In((M,)), Out((N, 3), gk.vec3d, _rand(N, 3)), Out((M, 3), gk.vec3d, _rand(M, 3)),
                Scalar(M)]


@gk.kernel
def vec_components(a: A1, x: A1, ov: V1, ow: V1, ou: gk.array(dtype=gk.vec2d), n: int):
    i = gk.tid()
    for k in range(3):
        ov[i][k] = x[k] * a[i] + float(k)
    for j in range(n):
        ow[i][j % 3] += x[j] * a[i]
        ow[i].x += a[i]
    for j in range(n):
        if j == 2:
            ou[i].y = x[j] * a[i]
        ou[i].x += x[j]


def _vec_components_ref(a, x, ov, ow, ou, n):
    ov = a[:, None] * x[:3] + np.arange(3.0)
    ow = ow.copy()
    for j in range(n):
        ow[:, j % 3] += x[j] * a
    ow[:, 0] += n * a
    ou = ou.copy()
    ou[:, 1] = x[2] * a
    ou[:, 0] += x[:n].sum()
    return ov, ow, ou


@gk.kernel
def mat_components(a: A1, x: A1, om: gk.array(dtype=gk.mat33d)):
    i = gk.tid()
    for j in range(2):
        for k in range(3):
            om[i][j, k] = x[k] * a[i] + float(j)
            om[i][2, k] += x[j] * a[i]


def _mat_components_ref(a, x, om):
    om = om.copy()
    om[:, 0, :] = a[:, None] * x[:3]
    om[:, 1, :] = a[:, None] * x[:3] + 1
    om[:, 2, :] += ((x[0] + x[1]) * a)[:, None]
    return om


@gk.kernel
def atomics_loop(x: A1, loss: A1, n: int):
    i = gk.tid()
    for l in range(3):
        loss[0] += gk.sin(x[i]) + 1.0
    for j in range(n):
        gk.atomic_add(loss, 1, x[i] * x[j])
        for k in range(2):
            gk.atomic_sub(loss, 2, x[j] * 0.5 * float(k))


def _atomics_loop_ref(x, loss, n):
    m = len(x)
    return np.array([3 * np.sum(np.sin(x) + 1), np.sum(x) * np.sum(x[:n]), -0.5 * m * np.sum(x[:n])])


@gk.kernel
def atomics_min_max_loop(x: A1, loss: A1, n: int):
    i = gk.tid()
    for j in range(n):
        for k in range(2):
            gk.atomic_max(loss, 0, x[i] * float(k + 1))
            gk.atomic_min(loss, 1, x[j] - x[i])


def _atomics_min_max_loop_ref(x, loss, n):
    return np.array([max(0.0, np.max(x), 2 * np.max(x)), min(0.0, np.min(x[:n]) - np.max(x))])


@gk.kernel
def read_back(a: A1, x: A2, y: A2, n: int):
    i = gk.tid()
    y[i, 0] = x[i, 0]
    for j in range(1, n):
        y[i, j] = y[i, j - 1] * a[i] + x[i, j]


def _read_back_ref(a, x, y, n):
    y = x.copy()
    for j in range(1, n):
        y[:, j] = y[:, j - 1] * a + x[:, j]
    return y


@gk.kernel
def reversed_stores(x: A2, z: A2, n: int):
    i = gk.tid()
    z[i, n - 1] = x[i, n - 1]
    for j in reversed(range(n - 1)):
        z[i, j] = z[i, j + 1] * 0.5 + x[i, j] * x[i, j]


def _reversed_stores_ref(x, z, n):
    z = np.zeros_like(x)
    z[:, n - 1] = x[:, n - 1]
    for j in reversed(range(n - 1)):
        z[:, j] = z[:, j + 1] * 0.5 + x[:, j] ** 2
    return z


@gk.kernel
def store_break_continue(a: A1, x: A1, y: A2, o: A1, n: int):
    i = gk.tid()
    acc = 0.0
    for j in range(n):
        if x[j] < -0.5:
            continue
        y[i, j] = x[j] * a[i]
        o[i] += x[j] * a[i]
        acc += x[j] * a[i]
        if acc > 0.6:
            break


def _store_break_ref(a, x, y, o, n):
    y, o = y.copy(), o.copy()
    for i, u in enumerate(a):
        acc = 0.0
        for j in range(n):
            if x[j] < -0.5:
                continue
            y[i, j] = x[j] * u
            o[i] += x[j] * u
            acc += x[j] * u
            if acc > 0.6:
                break
    return y, o


@gk.kernel
def while_stores(a: A1, x: A1, y: A2, o: A1, n: int):
    i = gk.tid()
    k = 0
    while k < n:
        y[i, k] = x[k] * a[i]
        o[i] -= x[k] * x[k]
        j = 0
        while j < k:
            o[i] += a[i] * x[j]
            j += 1
        k += 1


def _while_stores_ref(a, x, y, o, n):
    o = o - np.sum(x[:n] ** 2) + a * sum(x[j] for k in range(n) for j in range(k))
    return a[:, None] * x[None, :n], o


WHILE_ARGS = [In((N,)), In((M,)), Out((N, M)), Out((N,), init=_rand(N)), Scalar(M)]


@gk.kernel
def stores32(a: gk.array(dtype=float), x: gk.array(dtype=float), y: gk.array(dtype=float, ndim=2),
             o: gk.array(dtype=float), ov: gk.array(dtype=gk.vec3), n: int):
    i = gk.tid()
    for j in range(n):
        y[i, j] = x[j] * a[i]
        o[i] += gk.sin(x[j]) * a[i]
        for k in range(2):
            ov[i] += gk.vec3(x[j], a[i], float(k))
            o[i] -= x[j] * float(k)


def _stores32_ref(a, x, y, o, ov, n):
    o = o + a * np.sum(np.sin(x[:n])) - np.sum(x[:n])
    ov = ov + np.stack([np.full_like(a, 2 * x[:n].sum()), 2 * n * a, np.full_like(a, n)], 1)
    return a[:, None] * x[None, :n], o, ov


CASES = collect("stores", [
    Case("store_for_depth1", "`y[i, j] = ...` in a `for` loop", store_loops, N, STORE_ARGS, _store_loops_ref,
         pick={0: ...}),
    Case("store_for_depth2", "`z[i, j, k] = ...` in nested `for` loops", store_loops, N, STORE_ARGS,
         _store_loops_ref, pick={1: ...}),
    Case("store_overwrite_in_loop", "`y[i, 0] = v` every trip, `y[i, 1] = v` on some trips: the last write "
         "stays, earlier ones get no gradient", overwrite_loop, N,
         [In((N,)), In((M,), lo=np.r_[-1.0, -1, 0.2, -1, -1], hi=np.r_[1.0, 1, 1, 1, 1]), Out((N, 2)),
          Scalar(M)],
         _overwrite_ref),
    Case("store_copy_single_thread", "`y[j] = x[j]` in `for`, `w[k] = ...` in `while`, one thread",
         copy_single_thread, 1, [In((M,)), Out((M,)), Out((M,)), Scalar(M)],
         lambda x, y, w, n: (x, x * x)),
    Case("add_assign_for_depth1", "`o[i] += v` (own element) and `o[j] += v` (shared) in a `for` loop",
         accumulate_loops, N, ACC_ARGS, _accumulate_ref, pick={0: ..., 1: ...}),
    Case("sub_assign_for_depth1", "`o[i] -= v` in a `for` loop", accumulate_loops, N, ACC_ARGS,
         _accumulate_ref, pick={2: ...}),
    Case("add_sub_assign_for_depth2", "`o[i] += v` and `o[i] -= v` in nested `for` loops (triangular)",
         accumulate_loops, N, ACC_ARGS, _accumulate_ref, pick={3: ...}),
    Case("mul_assign", "`a[i, j] *= v` outside loops (initial values from the host)", mul_assign_loops, N,
         MUL_ARGS, _mul_assign_ref, pick={2: ...}),
    Case("mul_assign_for_depth1", "`a[i, j] *= v` in a `for` loop (initial values from the host)",
         mul_assign_loops, N, MUL_ARGS, _mul_assign_ref, pick={0: ...}),
    Case("mul_assign_varying_element", "`a[i, k % 2] *= v` in a `for` loop: each element rewritten on "
         "alternate trips", mul_assign_varying, N, [In((N, M)), Out((N, 2), init=_rand(N, 2)), Scalar(M)],
         _mul_assign_varying_ref, refuses=LOST_READS),
    Case("mul_assign_for_depth2", "`a[i, j] = x` then `a[i, j] *= v` in the inner of two `for` loops",
         mul_assign_loops, N, MUL_ARGS, _mul_assign_ref, pick={1: ...}),
    Case("vec_add_assign_for_depth1", "`ov[i] += gk.vec3d(...)` and `ov[i] -= ...` in a `for` loop",
         vec_accumulate, N, VEC_ACC_ARGS, _vec_accumulate_ref, pick={0: ...}),
    Case("vec_add_assign_for_depth2", "`ov[j] += gk.vec3d(...)` from every thread in nested `for` loops",
         vec_accumulate, N, VEC_ACC_ARGS, _vec_accumulate_ref, pick={1: ...}),
    Case("array_vec_component_store", "`ov[i][k] = v` and `ov[i].y = v` on vector array elements in loops",
         vec_components, N, [In((N,)), In((M,)), Out((N, 3), gk.vec3d), Out((N, 3), gk.vec3d, _rand(N, 3)),
                             Out((N, 2), gk.vec2d, _rand(N, 2)), Scalar(M)], _vec_components_ref,
         pick={0: ..., 2: np.s_[:, 1]}),
    Case("array_vec_component_augassign", "`ov[i][j % 3] += v` and `ov[i].x += v` in a `for` loop",
         vec_components, N, [In((N,)), In((M,)), Out((N, 3), gk.vec3d), Out((N, 3), gk.vec3d, _rand(N, 3)),
                             Out((N, 2), gk.vec2d, _rand(N, 2)), Scalar(M)], _vec_components_ref,
         pick={1: ..., 2: np.s_[:, 0]}),
    Case("array_mat_component_writes", "`om[i][j, k] = v` and `om[i][2, k] += v` in nested `for` loops",
         mat_components, N, [In((N,)), In((M,)), Out((N, 3, 3), gk.mat33d, _rand(N, 3, 3))],
         _mat_components_ref),
    Case("atomic_in_loop_taichi", "Taichi's `for l in range(3): loss[0] += gk.sin(x[i]) + 1.0`", atomics_loop,
         6, [In((6,)), Out((3,)), Scalar(M - 1)], _atomics_loop_ref, pick={0: np.s_[0]}),
    Case("atomic_add_sub_in_loop", "`gk.atomic_add/sub` on shared elements in `for` loops (depth 1 and 2)",
         atomics_loop, 6, [In((6,)), Out((3,)), Scalar(M - 1)], _atomics_loop_ref, pick={0: np.s_[1:3]}),
    Case("atomic_min_max_in_loop", "`gk.atomic_min/max` in nested `for` loops", atomics_min_max_loop, 6,
         [In((6,)), Out((2,)), Scalar(M - 1)], _atomics_min_max_loop_ref,
         refuses=MIN_MAX_REFUSAL),
    Case("store_read_back_in_loop", "`y[i, j] = y[i, j - 1] * a + x` reads the previous trip's store",
         read_back, N, [In((N,)), In((N, M)), Out((N, M)), Scalar(M)], _read_back_ref),
    Case("store_reversed_loop", "stores in `for j in reversed(range(...))` reading the later element",
         reversed_stores, N, [In((N, M)), Out((N, M)), Scalar(M)], _reversed_stores_ref),
    Case("store_break_continue", "stores and `+=` in a `for` loop with `continue` and `break`",
         store_break_continue, N, [In((N,), lo=0, hi=1), In((M,)), Out((N, M), init=_rand(N, M)),
                                   Out((N,), init=_rand(N)), Scalar(M)], _store_break_ref),
    Case("store_in_while", "`y[i, k] = v` in a `while` loop", while_stores, N,
         WHILE_ARGS, _while_stores_ref, pick={0: ...}),
    Case("augassign_nested_while", "`o[i] -= v` in a `while`, `o[i] += v` in a `while` inside it",
         while_stores, N, WHILE_ARGS, _while_stores_ref, pick={1: ...}),
    Case("float32_stores_in_loops", "float32: stores, `+=`, `-=` and vec3 `+=` in nested `for` loops",
         stores32, N, [In((N,), gk.float32), In((M,), gk.float32), Out((N, M), gk.float32),
             Out((N,), gk.float32, _rand(N)), Out((N, 3), gk.vec3, _rand(N, 3)), Scalar(M)], _stores32_ref,
         eps=1e-5),
])
