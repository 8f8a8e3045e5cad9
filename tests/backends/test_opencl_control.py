"""Structured control flow, multi-dimensional thread ids, vector/bool arrays, the value stack and debug
bounds checks on the OpenCL backend, each against a NumPy reference computed in the test."""

from __future__ import annotations

import numpy as np
import pytest
from gradkit.core import ir
from gradkit.core import types as T
from gradkit.core.errors import StackOverflowError
from test_opencl_support import BOOL, F32, F64, I32, I64, A, K, arr, compile_fn, for_, host, if_, run, while_

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Same random inputs for a test whatever ran before it in this process (xdist, -k)."""
    global RNG
    RNG = np.random.default_rng([3, sum(map(ord, request.node.name))])


def test_if_with_results_and_if_with_only_side_effects():
    k = K(x=A(F32), y=A(F32), hit=A(I32))
    b, i = k.b, k.tid()
    x = b.load(k.x, [i], comp=0)
    pos = b.prim("gt", x, k.c(0.0, F32))
    (r,) = if_(b, pos, lambda bb: [bb.prim("sqrt", x)], lambda bb: [bb.mul(x, k.c(-2.0, F32))], [F32])
    b.store(k.y, [i], r, comp=0)
    then = ir.Region()
    b.at(then).store(k.hit, [i], k.c(1), comp=0)
    b.emit("if", [pos], [], regions=[then, ir.Region()])
    xs = RNG.uniform(-2, 2, 777).astype(np.float32)
    y, hit = arr(np.zeros(777, np.float32)), arr(np.zeros(777, np.int32))
    run(k.fn("branches"), 777, [arr(xs), y, hit])
    np.testing.assert_array_equal(host(y), np.where(xs > 0, np.sqrt(np.abs(xs)), xs * np.float32(-2)))
    np.testing.assert_array_equal(host(hit), (xs > 0).astype(np.int32))


def test_for_loops_carry_values_in_every_direction():
    k = K(x=A(F32), dot=A(F32), fib=A(I64), down=A(I32), dyn=A(I32), empty=A(I32), step=I32)
    b, i = k.b, k.tid()
    zero, one = k.c(0), k.c(1)
    (s,) = for_(b, zero, i, one, [k.c(0.0, F32)],
                lambda bb, j, c: [bb.add(c[0], bb.mul(bb.load(k.x, [j], comp=0), bb.cast(j, F32)))])
    b.store(k.dot, [i], s, comp=0)
    fa, _ = for_(b, zero, i, one, [k.c(0, I64), k.c(1, I64)], lambda bb, j, c: [c[1], bb.add(c[0], c[1])])
    b.store(k.fib, [i], fa, comp=0)
    (d,) = for_(b, i, k.c(-1), k.c(-2), [zero], lambda bb, j, c: [bb.add(c[0], j)])
    b.store(k.down, [i], d, comp=0)
    (n,) = for_(b, i, k.c(-1), k.step, [zero], lambda bb, j, c: [bb.add(c[0], one)])
    b.store(k.dyn, [i], n, comp=0)
    (e,) = for_(b, k.c(5), k.c(0), one, [k.c(42)], lambda bb, j, c: [k.c(-1)])
    b.store(k.empty, [i], e, comp=0)
    n_thr = 60
    xs = RNG.uniform(-1, 1, n_thr).astype(np.float32)
    outs = [arr(np.zeros(n_thr, t)) for t in (np.float32, np.int64, np.int32, np.int32, np.int32)]
    run(k.fn("loops"), n_thr, [arr(xs), *outs, -3])
    dot, fib, down, dyn, empty = map(host, outs)
    ref = np.array([np.float32(sum(np.float32(xs[j]) * np.float32(j) for j in range(t))) for t in range(n_thr)])
    np.testing.assert_allclose(dot, ref, rtol=1e-5, atol=1e-5)
    f = [0, 1]
    while len(f) < n_thr + 1:
        f.append(f[-1] + f[-2])
    np.testing.assert_array_equal(fib, f[:n_thr])                    # int64: fib(59) > 2^31
    np.testing.assert_array_equal(down, [sum(range(t, -1, -2)) for t in range(n_thr)])
    np.testing.assert_array_equal(dyn, [len(range(t, -1, -3)) for t in range(n_thr)])
    assert (empty == 42).all()


def test_while_loop_collatz_and_nested_regions():
    k = K(x=A(F32), steps=A(I32), nest=A(F32))
    b, i = k.b, k.tid()
    two = k.c(2)

    def step(bb, c):
        n, cnt = c
        even = bb.prim("eq", bb.prim("mod", n, two), k.c(0))
        nxt = bb.select(even, bb.prim("floordiv", n, two), bb.add(bb.mul(n, k.c(3)), k.c(1)))
        return [nxt, bb.add(cnt, k.c(1))]

    _, count = while_(b, [b.add(i, k.c(1)), k.c(0)], lambda bb, c: bb.prim("ne", c[0], k.c(1)), step)
    b.store(k.steps, [i], count, comp=0)

    x = b.load(k.x, [i], comp=0)

    def outer(bb, j, c):
        (inner,) = for_(bb, k.c(0), bb.add(j, k.c(1)), k.c(1), [k.c(0.0, F32)],
                        lambda b2, m, s: [b2.add(s[0], b2.mul(x, b2.cast(m, F32)))])
        odd = bb.prim("eq", bb.prim("mod", j, two), k.c(1))
        (acc,) = if_(bb, odd, lambda b2: [b2.add(c[0], inner)], lambda b2: [b2.sub(c[0], inner)], [F32])
        return [acc]

    (total,) = for_(b, k.c(0), k.c(4), k.c(1), [k.c(0.0, F32)], outer)
    b.store(k.nest, [i], total, comp=0)
    n = 300
    xs = RNG.uniform(-1, 1, n).astype(np.float32)
    steps, nest = arr(np.zeros(n, np.int32)), arr(np.zeros(n, np.float32))
    run(k.fn("whiles"), n, [arr(xs), steps, nest])

    def collatz(v):
        c = 0
        while v != 1:
            v, c = (v // 2 if v % 2 == 0 else 3 * v + 1), c + 1
        return c

    np.testing.assert_array_equal(host(steps), [collatz(t + 1) for t in range(n)])
    ref = sum((1 if j % 2 else -1) * xs.astype(np.float64) * sum(range(j + 1)) for j in range(4))
    np.testing.assert_allclose(host(nest), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dims", [(7, 5), (2, 3, 4), (2, 3, 2, 5), (1, 1, 9)], ids=str)
def test_multi_dimensional_tid_is_row_major_and_shape_gives_extents(dims):
    nd = len(dims)
    k = K(out=A(I32, nd), ext=A(I32))
    b = k.b
    coords = [k.tid(axis, nd) for axis in range(nd)]
    code = k.c(0)
    for c in coords:
        code = b.add(b.mul(code, k.c(10)), c)
    b.store(k.out, coords, code, comp=0)
    for axis in range(nd):
        b.store(k.ext, [k.c(axis)], b.emit("shape", [k.out], [I32], {"axis": axis}).result, comp=0)
    out, ext = arr(np.full(dims, -1, np.int32)), arr(np.zeros(nd, np.int32))
    run(k.fn(f"grid{nd}"), tuple(dims), [out, ext])
    idx = np.indices(dims)
    ref = np.zeros(dims, np.int64)
    for a in range(nd):
        ref = ref * 10 + idx[a]
    np.testing.assert_array_equal(host(out), ref)
    np.testing.assert_array_equal(host(ext), dims)


def test_vector_and_bool_arrays():
    k = K(v=A(T.vec3), m=A(T.vec2, 2), flags=A(BOOL), out=A(F32), mo=A(F32, 2), neg=A(BOOL))
    b, i = k.b, k.tid()
    comps = [b.load(k.v, [i], comp=c) for c in range(3)]
    b.store(k.out, [i], b.add(comps[0], b.add(b.mul(comps[1], k.c(2.0, F32)), b.mul(comps[2], k.c(3.0, F32)))),
            comp=0)
    b.store(k.v, [i], comps[0], comp=2)
    j = b.prim("mod", i, k.c(4))
    r = b.prim("floordiv", i, k.c(4))
    b.store(k.mo, [r, j], b.load(k.m, [r, j], comp=1), comp=0)
    f = b.load(k.flags, [i], comp=0)
    b.store(k.neg, [i], b.prim("and", b.prim("not", f), b.prim("gt", comps[0], k.c(0.0, F32))), comp=0)
    n = 12
    v = RNG.uniform(-1, 1, (n, 3)).astype(np.float32)
    m = RNG.uniform(-1, 1, (3, 4, 2)).astype(np.float32)
    flags = RNG.integers(0, 2, n).astype(bool)
    va, out, mo, neg = arr(v, shape=(n,)), arr(np.zeros(n, np.float32)), arr(np.zeros((3, 4), np.float32)), \
        arr(np.zeros(n, bool))
    run(k.fn("vectors"), n, [va, arr(m, shape=(3, 4)), arr(flags), out, mo, neg])
    two, three = np.float32(2), np.float32(3)
    np.testing.assert_array_equal(host(out), v[:, 0] + (v[:, 1] * two + v[:, 2] * three))   # same order
    np.testing.assert_array_equal(host(va)[:, 2], v[:, 0])
    np.testing.assert_array_equal(host(mo), m[..., 1])
    np.testing.assert_array_equal(host(neg), ~flags & (v[:, 0] > 0))


# --------------------------------------------------------------------------- the value stack

def _pop(b, t):
    return b.emit("pop", [], [t], {"stack": 0}).result


def test_value_stack_is_lifo_per_thread_for_every_type():
    m = 6
    k = K(x=A(F32), of=A(F32, 2), oi=A(I64, 2), od=A(F64, 2), ob=A(BOOL, 2), empty=A(I32))
    b, i = k.b, k.tid()
    x = b.load(k.x, [i], comp=0)

    def push_body(bb, j, c):
        bb.emit("push", [bb.add(x, bb.cast(j, F32))], [], {"stack": 0})
        bb.emit("push", [bb.mul(bb.cast(j, I64), k.c(1_000_000_000_007, I64))], [], {"stack": 0})
        bb.emit("push", [bb.prim("sqrt", bb.cast(bb.add(j, i), F64))], [], {"stack": 0})
        bb.emit("push", [bb.prim("eq", bb.prim("mod", j, k.c(2)), k.c(0))], [], {"stack": 0})
        return []

    for_(b, k.c(0), k.c(m), k.c(1), [], push_body)

    def pop_body(bb, j, c):
        back = bb.sub(k.c(m - 1), j)
        bb.store(k.ob, [i, back], _pop(bb, BOOL), comp=0)
        bb.store(k.od, [i, back], _pop(bb, F64), comp=0)
        bb.store(k.oi, [i, back], _pop(bb, I64), comp=0)
        bb.store(k.of, [i, back], _pop(bb, F32), comp=0)
        return []

    for_(b, k.c(0), k.c(m), k.c(1), [], pop_body)
    b.store(k.empty, [i], b.add(_pop(b, I32), k.c(5)), comp=0)     # popping an empty stack gives 0
    n = 100
    xs = RNG.uniform(-1, 1, n).astype(np.float32)
    outs = [arr(np.zeros((n, m), t)) for t in (np.float32, np.int64, np.float64, bool)] + [arr(np.zeros(n, np.int32))]
    c = run(k.fn("stack"), n, [arr(xs), *outs], stack_size=4 * m)
    assert "gk_stack[24]" in c.source and c.can_fault
    js = np.arange(m)
    np.testing.assert_array_equal(host(outs[0]), xs[:, None] + js[None, :].astype(np.float32))
    np.testing.assert_array_equal(host(outs[1]), np.broadcast_to(js * 1_000_000_000_007, (n, m)))
    np.testing.assert_array_equal(host(outs[2]), np.sqrt((js[None, :] + np.arange(n)[:, None]).astype(float)))
    np.testing.assert_array_equal(host(outs[3]), np.broadcast_to(js % 2 == 0, (n, m)))
    assert (host(outs[4]) == 5).all()


def _pusher():
    k = K(out=A(I32))
    b, i = k.b, k.tid()

    def push(bb, j, c):
        bb.emit("push", [j], [], {"stack": 3})
        return []

    for_(b, k.c(0), i, k.c(1), [], push)
    (total,) = for_(b, k.c(0), i, k.c(1), [k.c(0)], lambda bb, j, c: [bb.add(c[0], _pop(bb, I32))])
    b.store(k.out, [i], total, comp=0)
    fn = k.fn("pusher")
    fn.attrs["source_name"] = "pusher_src"
    return fn


def test_value_stack_overflow_raises_and_skips_the_push():
    out = arr(np.zeros(20, np.int32))
    run(_pusher(), 9, [out], stack_size=8)          # thread 8 pushes exactly 8 values: fits
    np.testing.assert_array_equal(host(out)[:9], [sum(range(t)) for t in range(9)])
    out = arr(np.zeros(20, np.int32))
    with pytest.raises(StackOverflowError, match=r"kernel 'pusher_src'.*capacity 8 slots.*adjoint_stack_size"):
        run(_pusher(), 10, [out], stack_size=8)      # thread 9 pushes 9
    got = host(out)
    np.testing.assert_array_equal(got[:9], [sum(range(t)) for t in range(9)])   # threads that fit are right
    run(_pusher(), 20, [out], stack_size=32)        # enough room: no fault, and no stale fault record
    np.testing.assert_array_equal(host(out), [sum(range(t)) for t in range(20)])


# --------------------------------------------------------------------------- debug bounds checks

def test_debug_bounds_checks_raise_index_error_and_skip_the_access():
    k = K(x=A(F32), y=A(F32))
    b, i = k.b, k.tid()
    b.store(k.y, [i], b.load(k.x, [b.add(i, k.c(3))], comp=0), comp=0)
    fn = k.fn("shifted")
    xs = np.arange(10, dtype=np.float32)
    y = arr(np.full(10, -1.0, np.float32))
    with pytest.raises(IndexError, match=r"kernel 'shifted': index 1[0-2] out of range for axis 0 of array "
                                         r"'x' with extent 10"):
        run(fn, 10, [arr(xs), y], debug=True)
    np.testing.assert_array_equal(host(y), np.r_[xs[3:], 0, 0, 0])     # out-of-range loads gave 0
    plain = compile_fn(fn)
    assert not plain.can_fault and "gk_fault" not in plain.source


def test_debug_bounds_checks_name_the_axis_for_stores_atomics_and_negative_indices():
    k = K(out=A(F32, 2))
    b, i = k.b, k.tid()
    b.store(k.out, [i, b.add(i, k.c(2))], k.c(1.0, F32), comp=0)
    out = arr(np.zeros((4, 5), np.float32))
    with pytest.raises(IndexError, match=r"index 5 out of range for axis 1 of array 'out' with extent 5"):
        run(k.fn("diag"), 4, [out], debug=True)
    ref = np.zeros((4, 5), np.float32)
    ref[[0, 1, 2], [2, 3, 4]] = 1
    np.testing.assert_array_equal(host(out), ref)

    k = K(s=A(I32), x=A(F32))
    b, i = k.b, k.tid()
    b.atomic("add", k.s, [i], k.c(1), comp=0)
    b.store(k.x, [b.sub(i, k.c(1))], k.c(2.0, F32), comp=0)
    s, x = arr(np.zeros(3, np.int32)), arr(np.zeros(8, np.float32))
    with pytest.raises(IndexError, match=r"index (3|4|-1) out of range for axis 0"):
        run(k.fn("scatter"), 5, [s, x], debug=True)
    np.testing.assert_array_equal(host(s), [1, 1, 1])
    np.testing.assert_array_equal(host(x), [2, 2, 2, 2, 0, 0, 0, 0])
    # a fault does not leak into the next launch
    s2 = arr(np.zeros(8, np.int32))
    k = K(s=A(I32))
    k.b.atomic("add", k.s, [k.tid()], k.c(1), comp=0)
    run(k.fn("fine"), 8, [s2], debug=True)
    assert (host(s2) == 1).all()


def test_bounds_fault_site_indexes_bounds_sites():
    from gradkit.backends.base import bounds_sites
    k = K(src=A(F32), dst=A(F32), other=A(F32))
    b, i = k.b, k.tid()
    v = b.load(k.src, [i], comp=0)                                       # site 0
    b.store(k.dst, [i], v, comp=0)                                       # site 1
    b.store(k.dst, [i], b.load(k.other, [b.add(i, k.c(100))], comp=0), comp=0)   # sites 2 (bad), 3
    fn = k.fn("sites")
    assert [ins.args[0].hint for ins in bounds_sites(fn)] == ["src", "dst", "other", "dst"]
    with pytest.raises(IndexError, match=r"index 10[0-3] out of range for axis 0 of array 'other' with extent 4"):
        run(fn, 4, [arr(np.zeros(4, np.float32)) for _ in range(3)], debug=True)
