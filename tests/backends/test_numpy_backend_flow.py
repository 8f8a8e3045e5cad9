"""The NumPy reference backend: structured control flow, components, atomics, the value stack, bounds
faults, and a launch through gradkit's runtime (kernels built by hand as lowered IR)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradkit.backends.base import CompileOptions
from gradkit.core import types as T
from gradkit.core.errors import SourceLoc, StackOverflowError

plugin = pytest.importorskip("gradkit_numpy_backend", reason="pip install -e examples/numpy_backend")
BE = plugin.NumpyBackend()
DEV = BE.devices()[0]
F32, F64, I32, I64, U32, BOOL = T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_


from tests.backends.numpy_ir_helpers import *  # noqa: F401,F403  (K, run, arrays, BE, DEV, type aliases)


# --------------------------------------------------------------------------- structured control flow

def test_if_else_divergent_with_side_effects_and_nesting(rng):
    """y = sqrt(x) (x > 0.5: also 2x), else -x*x; `hit_then`/`hit_else` stores only for masked threads."""
    n = 200
    x = rng.uniform(-1, 1, n)
    k = K(x=arr(F64), y=arr(F64), hit_then=arr(I32), hit_else=arr(I32))
    b = k.b
    i = tid(b)
    v = b.load(k.x, [i], comp=0)

    def then(bt):
        bt.store(k.hit_then, [i], c(bt, 1), comp=0)
        r = bt.prim("sqrt", v)
        (r2,) = if_(bt, bt.prim("gt", v, c(bt, 0.5, F64)),
                    lambda b2: [b2.mul(r, c(b2, 2.0, F64))], lambda b2: [r], [F64])
        return [r2]

    def other(be):
        be.store(k.hit_else, [i], c(be, 2), comp=0)
        return [be.neg(be.mul(v, v))]

    (r,) = if_(b, b.prim("gt", v, c(b, 0.0, F64)), then, other, [F64])
    b.store(k.y, [i], r, comp=0)
    _, y, ht, he = run(k.fn(), n, x, np.zeros(n), np.zeros(n, np.int32), np.zeros(n, np.int32))
    want = np.where(x > 0, np.sqrt(np.abs(x)) * np.where(x > 0.5, 2, 1), -x * x)
    np.testing.assert_allclose(y, want, rtol=1e-14)
    np.testing.assert_array_equal(ht, (x > 0) * 1)
    np.testing.assert_array_equal(he, (x <= 0) * 2)


def test_for_nested_with_carried_values_and_divergent_trip_counts(rng):
    """s = 0; for j in range(cnt[i]): t = 0; for q in range(j + 1): t += x[(i + q) % n]; s = 0.5 s + t;
    then for j in range(cnt[i], -1, -2): s += j  (negative step); then a uniform loop inside a branch."""
    n = 64
    x, cnt = rng.uniform(-1, 1, n), rng.integers(0, 8, n).astype(np.int32)
    k = K(x=arr(F64), cnt=arr(I32), y=arr(F64))
    b = k.b
    i = tid(b)
    m = b.load(k.cnt, [i], comp=0)
    one, nn = c(b, 1), shape(b, k.x)

    def outer(bb, j, s):
        def inner(b2, q, t):
            idx = b2.prim("mod", b2.add(i, q), nn)
            return [b2.add(t, b2.load(k.x, [idx], comp=0))]
        (t,) = for_(bb, c(bb, 0), bb.add(j, one), one, [c(bb, 0.0, F64)], inner)
        return [bb.add(bb.mul(s, c(bb, 0.5, F64)), t)]

    (s,) = for_(b, c(b, 0), m, one, [c(b, 0.0, F64)], outer)
    (s,) = for_(b, m, c(b, -1), c(b, -2), [s], lambda bb, j, acc: [bb.add(acc, bb.cast(j, F64))])
    (s,) = if_(b, b.prim("gt", m, c(b, 3)),
               lambda bt: for_(bt, c(bt, 3), c(bt, 11), c(bt, 2), [s],
                               lambda b2, j, acc: [b2.mul(acc, c(b2, 1.5, F64))]),
               lambda be: [s], [F64])
    b.store(k.y, [i], s, comp=0)
    *_, y = run(k.fn(), n, x, cnt, np.zeros(n))
    want = np.zeros(n)
    for t in range(n):
        s = 0.0
        for j in range(cnt[t]):
            s = 0.5 * s + sum(x[(t + q) % n] for q in range(j + 1))
        for j in range(cnt[t], -1, -2):
            s += j
        if cnt[t] > 3:
            for _ in range(3, 11, 2):
                s *= 1.5
        want[t] = s
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=1e-13)


def test_while_divergent_collatz_with_carried_values(rng):
    """Collatz steps per thread (trip counts differ wildly), a float carried along, and an
    inner while whose condition is uniform."""
    n = 100
    start = rng.integers(1, 60, n).astype(np.int32)
    k = K(x0=arr(I32), steps=arr(I32), acc=arr(F32))
    b = k.b
    i = tid(b)
    one = c(b, 1)

    def body(bb, v, steps, acc):
        (v2,) = if_(bb, bb.prim("eq", bb.prim("mod", v, c(bb, 2)), c(bb, 0)),
                    lambda bt: [bt.prim("floordiv", v, c(bt, 2))],
                    lambda be: [be.add(be.mul(v, c(be, 3)), one)], [I32])
        (_, bump) = while_(bb, [c(bb, 0), c(bb, 0.0, F32)],            # uniform: runs 3 times
                           lambda b2, q, f: b2.prim("lt", q, c(b2, 3)),
                           lambda b2, q, f: [b2.add(q, one), b2.add(f, c(b2, 0.25, F32))])
        return [v2, bb.add(steps, one), bb.add(bb.mul(acc, c(bb, 0.5, F32)), bb.add(bb.cast(v2, F32), bump))]

    v, steps, acc = while_(b, [b.load(k.x0, [i], comp=0), c(b, 0), c(b, 0.0, F32)],
                           lambda bb, v, s, a: bb.prim("ne", v, one), body)
    b.store(k.steps, [i], steps, comp=0)
    b.store(k.acc, [i], acc, comp=0)
    _, got_steps, got_acc = run(k.fn(), n, start, np.zeros(n, np.int32), np.zeros(n, np.float32))
    want_steps, want_acc = np.zeros(n, np.int32), np.zeros(n)
    for t in range(n):
        v, s, a = int(start[t]), 0, 0.0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s, a = s + 1, 0.5 * a + v + 0.75
        want_steps[t], want_acc[t] = s, a
    assert len(set(want_steps)) > 10
    np.testing.assert_array_equal(got_steps, want_steps)
    np.testing.assert_allclose(got_acc, want_acc, rtol=1e-5)


def test_multidimensional_tid_and_shape():
    k = K(out=arr(I32, 3), lin=arr(I32, 3))
    b = k.b
    i, j, q = (tid(b, a, 3) for a in range(3))
    code = b.add(b.add(b.mul(i, c(b, 100)), b.mul(j, c(b, 10))), q)
    b.store(k.out, [i, j, q], code, comp=0)
    ext = b.mul(b.mul(shape(b, k.out, 0), shape(b, k.out, 1)), shape(b, k.out, 2))
    lin1 = tid(b, 0, 1)                                   # a 1-d tid in a 3-d launch: the linear id
    b.store(k.lin, [i, j, q], b.add(b.mul(lin1, c(b, 1000)), ext), comp=0)
    out, lin = run(k.fn(), (2, 3, 4), np.zeros((2, 3, 4)), np.zeros((2, 3, 4)))
    ii, jj, qq = np.indices((2, 3, 4))
    np.testing.assert_array_equal(out, ii * 100 + jj * 10 + qq)
    np.testing.assert_array_equal(lin, np.arange(24).reshape(2, 3, 4) * 1000 + 24)
    k2 = K(out=arr(F64, 2))
    i, j = tid(k2.b, 0, 2), tid(k2.b, 1, 2)
    k2.b.store(k2.out, [j, i], k2.b.cast(k2.b.sub(i, j), F64), comp=0)     # transposed write
    (out2,) = run(k2.fn(), (5, 3), np.zeros((3, 5)))
    np.testing.assert_array_equal(out2, (np.arange(5)[None, :] - np.arange(3)[:, None]).astype(float))


# --------------------------------------------------------------------------- components, stores, atomics

def test_vector_elements_components_and_last_store_wins(rng):
    """An element of a vec3 array is 3 consecutive scalars; duplicate stores: the highest thread id wins."""
    n = 20
    v = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    k = K(v=arr(T.vec3), out=arr(T.vec3), last=arr(I32))
    b = k.b
    i = tid(b)
    x, y, z = (b.load(k.v, [i], comp=q) for q in range(3))
    b.store(k.out, [i], b.add(x, y), comp=2)
    b.store(k.out, [i], z, comp=0)
    b.store(k.last, [c(b, 0)], i, comp=0)                         # every thread, one element
    b.store(k.last, [b.add(c(b, 1), b.prim("floordiv", i, c(b, 2)))], i, comp=0)   # pairs collide
    _, out, last = run(k.fn(), n, v, np.zeros((n, 3)), np.zeros(1 + n // 2, np.int32))
    np.testing.assert_array_equal(out[:, 2], v[:, 0] + v[:, 1])
    np.testing.assert_array_equal(out[:, 0], v[:, 2])
    assert (out[:, 1] == 0).all()
    np.testing.assert_array_equal(last, [n - 1, *range(1, n, 2)])


def _sequential(kind, init, idx, vals):
    """Atomics as one thread after another in thread order: final array and each thread's old value."""
    data, old = init.copy(), np.zeros_like(vals)
    op = {"add": np.add, "sub": np.subtract, "min": np.minimum, "max": np.maximum}[kind]
    for t, (p, v) in enumerate(zip(idx, vals)):
        old[t] = data[p]
        data[p] = op(data[p], v)
    return data, old


def _atomic_kernel(kind, t, comp=0, dtype=None, cond=False):
    k = K(idx=arr(I32), val=arr(t), data=arr(dtype or t), old=arr(t))
    b = k.b
    i = tid(b)
    p, v = b.load(k.idx, [i], comp=0), b.load(k.val, [i], comp=0)

    def update(bb):
        return [bb.atomic(kind, k.data, [p], v, comp=comp)]

    if cond:   # only threads with a positive value update
        (r,) = if_(b, b.prim("gt", v, c(b, 0.0, t)), update, lambda be: [c(be, -1.0, t)], [t])
    else:
        (r,) = update(b)
    b.store(k.old, [i], r, comp=0)
    return k.fn()


@pytest.mark.parametrize("kind", ["add", "sub", "min", "max"])
@pytest.mark.parametrize("t", [F32, F64, I32], ids=lambda t: t.name)
@pytest.mark.parametrize("pattern", ["few_bins", "skewed", "one_element", "distinct"])
def test_atomics_apply_in_thread_order(kind, t, pattern, rng):
    n = 1000
    idx = {"few_bins": rng.integers(0, 5, n), "one_element": np.zeros(n, int),
           "distinct": rng.permutation(n),
           "skewed": np.where(rng.random(n) < 0.3, 7, rng.integers(0, 200, n))}[pattern].astype(np.int32)
    size = int(idx.max()) + 1
    vals = (rng.uniform(-1, 1, n) if t.is_float else rng.integers(-50, 50, n)).astype(t.np_dtype)
    init = (rng.uniform(-1, 1, size) if t.is_float else rng.integers(-50, 50, size)).astype(t.np_dtype)
    _, _, data, old = run(_atomic_kernel(kind, t), n, idx, vals, init, np.zeros(n, t.np_dtype))
    want_data, want_old = _sequential(kind, init, idx, vals)
    np.testing.assert_array_equal(old, want_old)          # bit-exact: same roundings in the same order
    np.testing.assert_array_equal(data, want_data)
    if kind in ("add", "sub") and t.is_float:              # and close to the float64 truth
        sign = 1 if kind == "add" else -1
        truth = init.astype(np.float64) + sign * np.bincount(idx, vals.astype(np.float64), minlength=size)
        tol = 1e-4 if t is F32 else 1e-12
        np.testing.assert_allclose(data, truth, rtol=tol, atol=tol)


def test_atomics_under_a_mask_and_on_vector_components(rng):
    n = 300
    idx = rng.integers(0, 4, n).astype(np.int32)
    vals = rng.uniform(-1, 1, n)
    init = rng.uniform(-1, 1, (4, 3))
    _, _, data, old = run(_atomic_kernel("add", F64, comp=1, dtype=T.vec3d, cond=True), n, idx, vals, init,
                          np.zeros(n))
    on = vals > 0
    want_col, want_old = _sequential("add", init[:, 1], idx[on], vals[on])
    np.testing.assert_array_equal(data[:, 1], want_col)
    np.testing.assert_array_equal(data[:, [0, 2]], init[:, [0, 2]])
    np.testing.assert_array_equal(old[on], want_old)
    assert (old[~on] == -1).all()


# --------------------------------------------------------------------------- the reverse pass's value stack

def _stack_kernel():
    """for j in range(cnt[i]): push(x[i] * j: f32), push(big + j: i64)
    then for j in range(cnt[i]): q = pop i64, w = pop f32, acc = 3 acc + w + (q - big); finally pop again."""
    k = K(x=arr(F32), cnt=arr(I32), y=arr(F64), extra=arr(F32))
    b = k.b
    i = tid(b)
    m, xi, big, one = b.load(k.cnt, [i], comp=0), b.load(k.x, [i], comp=0), c(b, 2 ** 40 + 3, I64), c(b, 1)

    def pushes(bb, j):
        bb.emit("push", [bb.mul(xi, bb.cast(j, F32))], [], {"stack": 0})
        bb.emit("push", [bb.add(big, bb.cast(j, I64))], [], {"stack": 1})
        return []

    for_(b, c(b, 0), m, one, [], pushes)

    def pops(bb, j, acc):
        q = bb.emit("pop", [], [I64], {"stack": 1}).result
        w = bb.emit("pop", [], [F32], {"stack": 0}).result
        return [bb.add(bb.add(bb.mul(acc, c(bb, 3.0, F64)), bb.cast(w, F64)), bb.cast(bb.sub(q, big), F64))]

    (acc,) = for_(b, c(b, 0), m, one, [c(b, 0.0, F64)], pops)
    b.store(k.y, [i], acc, comp=0)
    b.store(k.extra, [i], b.emit("pop", [], [F32], {"stack": 0}).result, comp=0)    # empty: gives 0
    fn = k.fn()
    fn.attrs["stack_sites"] = {0: SourceLoc("model.py", 12, 4), 1: SourceLoc("model.py", 12, 4)}
    return fn


def test_stack_push_pop_is_lifo_and_exact(rng):
    n = 50
    x, cnt = rng.uniform(-2, 2, n).astype(np.float32), rng.integers(0, 7, n).astype(np.int32)
    *_, y, extra = run(_stack_kernel(), n, x, cnt, np.zeros(n), np.full(n, 9, np.float32), stack_size=12)
    want = np.zeros(n)
    for t in range(n):
        acc = 0.0
        for j in reversed(range(cnt[t])):
            acc = 3 * acc + float(np.float32(x[t] * np.float32(j))) + j
        want[t] = acc
    np.testing.assert_array_equal(y, want)
    assert (extra == 0).all()


def test_stack_overflow_raises_stack_overflow_error(rng):
    n = 50
    x, cnt = rng.uniform(-2, 2, n).astype(np.float32), rng.integers(0, 7, n).astype(np.int32)
    cnt[17] = 7                                  # 14 pushes onto a 12-slot stack
    with pytest.raises(StackOverflowError, match=r"model\.py:12.*capacity 12 slots") as err:
        run(_stack_kernel(), n, x, cnt, np.zeros(n), np.zeros(n, np.float32), stack_size=12)
    assert "adjoint_stack_size" in str(err.value)


# --------------------------------------------------------------------------- bounds faults

def _shift_kernel(ndim=1):
    """y[i] = x[i + 1] (1-d) or y[i, j] = x[i, j + 1] (2-d)."""
    k = K(x=arr(F64, ndim), y=arr(F64, ndim))
    b = k.b
    idx = [tid(b, a, ndim) for a in range(ndim)]
    src = idx[:-1] + [b.add(idx[-1], c(b, 1))]
    b.store(k.y, idx, b.load(k.x, src, comp=0), comp=0)
    return k.fn("shift")


@pytest.mark.parametrize("debug", [True, False])
def test_out_of_bounds_raises_index_error(debug):
    msg = r"'shift': index 10 out of range for axis 0 of array 'x' with extent 10$"
    with pytest.raises(IndexError, match=msg):
        run(_shift_kernel(), 10, np.arange(10.0), np.zeros(10), debug=debug)
    with pytest.raises(IndexError, match=r"index 4 out of range for axis 1 of array 'x' with extent 4"):
        run(_shift_kernel(2), (3, 4), np.zeros((3, 4)), np.zeros((3, 4)), debug=debug)
    k = K(y=arr(F64))
    k.b.store(k.y, [k.b.neg(tid(k.b))], c(k.b, 1.0, F64), comp=0)      # y[-i]: no Python wrap-around
    with pytest.raises(IndexError, match="index -1 out of range"):
        run(k.fn(), 3, np.zeros(3), debug=debug)


def test_masked_out_threads_do_not_fault():
    """if i < len(x): y[i] = x[i] + atomic, launched with more threads than elements: no fault."""
    k = K(x=arr(F64), y=arr(F64), total=arr(F64))
    b = k.b
    i = tid(b)

    def then(bt):
        v = bt.load(k.x, [i], comp=0)
        bt.atomic("add", k.total, [c(bt, 0)], v, comp=0)
        bt.store(k.y, [i], bt.mul(v, v), comp=0)
        return []

    if_(b, b.prim("lt", i, shape(b, k.x)), then, lambda be: [])
    x = np.arange(10.0)
    _, y, total = run(k.fn(), 25, x, np.zeros(10), np.zeros(1), debug=True)
    np.testing.assert_array_equal(y, x * x)
    assert total[0] == x.sum()


# --------------------------------------------------------------------------- through gradkit's runtime

def test_runtime_launch_on_numpy_device():
    """A hand-built kernel through gradkit's own device and array objects (zero-copy host arrays)."""
    import gradkit as gk
    dev = gk.get_device("numpy")
    x = gk.array(np.linspace(-1, 1, 16), device="numpy")
    y = gk.zeros(16, dtype=gk.float64, device="numpy")
    k = K(x=arr(F64), y=arr(F64), a=F64)
    i = tid(k.b)
    k.b.store(k.y, [i], k.b.mul(k.a, k.b.prim("exp", k.b.load(k.x, [i], comp=0))), comp=0)
    compiled = dev.impl.compile(dev.info, k.fn(), CompileOptions())
    dev.impl.launch(compiled, (16,), [x, y, 0.5])
    np.testing.assert_allclose(y.numpy(), 0.5 * np.exp(np.linspace(-1, 1, 16)), rtol=1e-15)
    assert math.isclose(float(y.numpy()[0]), 0.5 * math.exp(-1), rel_tol=1e-15)
