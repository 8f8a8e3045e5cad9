"""LLVM backend kernels from hand-built lowered IR: control flow, multi-dim thread ids, atomics, the value
stack, debug bounds checks, the disk cache, vectorisation and launch overhead."""

from __future__ import annotations

import timeit
import warnings

import numpy as np
import pytest

from gradkit.backends.llvm import LLVMBackend, jit
from gradkit.backends.llvm.backend import PARALLEL_WORK
from gradkit.core import ir
from gradkit.core import types as T
from gradkit.core.errors import StackOverflowError

from test_llvm_support import BE, DEV, KernelBuilder, arr, compile_fn, host, run

F32, I32 = T.float32, T.int32
BIG = PARALLEL_WORK * 2       # enough threads for a launch split across the pool


def _for(b: ir.Builder, start, stop, step, init: list, body_fn) -> list:
    """Emit `for iv in range(start, stop, step)` carrying `init`; body_fn(b, iv, *carried) -> new carried."""
    region = ir.Region(params=[ir.Value(start.type, "iv")] + [ir.Value(v.type, "c") for v in init])
    region.yields = list(body_fn(b.at(region), *region.params))
    return b.emit("for", [start, stop, step, *init], [v.type for v in init], regions=[region]).results


def _if(b: ir.Builder, cond, then_fn, else_fn, types) -> list:
    then_r, else_r = ir.Region(), ir.Region()
    then_r.yields = list(then_fn(b.at(then_r)))
    else_r.yields = list(else_fn(b.at(else_r)))
    return b.emit("if", [cond], types, regions=[then_r, else_r]).results


def w1_function() -> ir.Function:
    kb = KernelBuilder("w1")
    x, y = kb.array("x", F32), kb.array("y", F32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)
    b.store(y, [i], b.add(b.mul(b.prim("sin", xi), xi), b.mul(b.mul(b.const(0.5, F32), xi), xi)), comp=0)
    return kb.function()


# --------------------------------------------------------------------------- control flow

@pytest.mark.parametrize("n", [1000, BIG])
def test_if_with_results(n, rng):
    kb = KernelBuilder()
    x, y = kb.array("x", F32), kb.array("y", F32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)
    (r,) = _if(b, b.prim("gt", xi, b.const(0.0, F32)), lambda t: [t.prim("sin", xi)], lambda e: [e.mul(xi, xi)],
               [F32])
    b.store(y, [i], r, comp=0)
    xs = rng.uniform(-3, 3, n).astype(np.float32)
    out = arr(np.zeros(n, np.float32))
    run(kb.function(), n, [arr(xs), out])
    np.testing.assert_allclose(host(out), np.where(xs > 0, np.sin(xs), xs * xs), rtol=1e-6, atol=1e-7)


def test_for_with_carried_values_and_negative_steps(rng):
    # y[i] = sum_{j in range(i % 7)} j * x[i]  +  sum_{j in range(10, -1, -3)} j   (steps 1 and -3)
    kb = KernelBuilder()
    x, y = kb.array("x", F32), kb.array("y", F32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)
    m = b.prim("mod", i, b.const(7, I32))
    (acc,) = _for(b, b.const(0, I32), m, b.const(1, I32), [b.const(0.0, F32)],
                  lambda bb, j, a: [bb.add(a, bb.mul(bb.cast(j, F32), xi))])
    (cnt,) = _for(b, b.const(10, I32), b.const(-1, I32), b.const(-3, I32), [b.const(0, I32)],
                  lambda bb, j, a: [bb.add(a, j)])
    b.store(y, [i], b.add(acc, b.cast(cnt, F32)), comp=0)
    n = 777
    xs = rng.uniform(-1, 1, n).astype(np.float32)
    out = arr(np.zeros(n, np.float32))
    run(kb.function(), n, [arr(xs), out])
    ks = np.arange(n) % 7
    np.testing.assert_allclose(host(out), ks * (ks - 1) / 2 * xs + sum(range(10, -1, -3)), rtol=1e-5, atol=1e-5)


def test_for_with_runtime_step(rng):
    # y[i] = number of j in range(s, e, step) for scalar parameters (positive and negative step)
    kb = KernelBuilder()
    y = kb.array("y", I32)
    s, e, st = kb.scalar("s", I32), kb.scalar("e", I32), kb.scalar("st", I32)
    b, i = kb.b, kb.tid()
    (c,) = _for(b, s, b.add(e, i), st, [b.const(0, I32)], lambda bb, j, a: [bb.add(a, bb.const(1, I32))])
    b.store(y, [i], c, comp=0)
    fn = kb.function()
    ck = compile_fn(fn)
    for start, end, step in [(0, 10, 3), (20, 5, -4), (3, 3, 1), (10, 0, 2)]:
        out = arr(np.zeros(16, np.int32))
        BE.launch(ck, (16,), [out, start, end, step])
        np.testing.assert_array_equal(host(out), [len(range(start, end + k, step)) for k in range(16)])


def test_while_collatz(rng):
    kb = KernelBuilder()
    x, y = kb.array("x", I32), kb.array("y", I32)
    b, i = kb.b, kb.tid()
    v0 = b.load(x, [i], comp=0)
    cond = ir.Region(params=[ir.Value(I32, "v"), ir.Value(I32, "n")])
    cb = b.at(cond)
    cond.yields = [cb.prim("ne", cond.params[0], cb.const(1, I32))]
    body = ir.Region(params=[ir.Value(I32, "v"), ir.Value(I32, "n")])
    bb = b.at(body)
    v, cnt = body.params
    even = bb.prim("eq", bb.prim("mod", v, bb.const(2, I32)), bb.const(0, I32))
    nxt = bb.select(even, bb.prim("floordiv", v, bb.const(2, I32)), bb.add(bb.mul(v, bb.const(3, I32)), bb.const(1, I32)))
    body.yields = [nxt, bb.add(cnt, bb.const(1, I32))]
    _, steps = b.emit("while", [v0, b.const(0, I32)], [I32, I32], regions=[cond, body]).results
    b.store(y, [i], steps, comp=0)
    xs = rng.integers(1, 1000, 300).astype(np.int32)
    out = arr(np.zeros(300, np.int32))
    run(kb.function(), 300, [arr(xs), out])

    def collatz(v):
        k = 0
        while v != 1:
            v, k = (v // 2 if v % 2 == 0 else 3 * v + 1), k + 1
        return k
    np.testing.assert_array_equal(host(out), [collatz(int(v)) for v in xs])


def test_nested_loops_and_branches(rng):
    # y[i] = sum_{j<4} (if x[i] > j: sum_{k<j} k*x[i] else -j)
    kb = KernelBuilder()
    x, y = kb.array("x", F32), kb.array("y", F32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)

    def outer(bb, j, acc):
        jf = bb.cast(j, F32)

        def then(tb):
            (s,) = _for(tb, tb.const(0, I32), j, tb.const(1, I32), [tb.const(0.0, F32)],
                        lambda kb2, k, a: [kb2.add(a, kb2.mul(kb2.cast(k, F32), xi))])
            return [s]
        (v,) = _if(bb, bb.prim("gt", xi, jf), then, lambda eb: [eb.neg(jf)], [F32])
        return [bb.add(acc, v)]

    (tot,) = _for(b, b.const(0, I32), b.const(4, I32), b.const(1, I32), [b.const(0.0, F32)], outer)
    b.store(y, [i], tot, comp=0)
    xs = rng.uniform(-1, 5, 500).astype(np.float32)
    out = arr(np.zeros(500, np.float32))
    run(kb.function(), 500, [arr(xs), out])
    ref = sum(np.where(xs > j, j * (j - 1) / 2 * xs, -j) for j in range(4))
    np.testing.assert_allclose(host(out), ref, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- thread ids

@pytest.mark.parametrize("dims", [(5, 7), (3, 4, 5), (2, 3, 4, 5), (257, 1031), (2, 3, 300, 301)])
def test_multidim_tid(dims):
    g = len(dims)
    kb = KernelBuilder()
    y = kb.array("y", T.int64, g)
    lin = kb.array("lin", I32, g)
    b = kb.b
    ids = [kb.tid(k, g) for k in range(g)]
    code = b.const(0, T.int64)
    for t in ids:
        code = b.add(b.mul(code, b.const(1000, T.int64)), b.cast(t, T.int64))
    b.store(y, ids, code, comp=0)
    b.store(lin, ids, kb.tid(0, 1), comp=0)          # a 1-D tid in an n-D launch: the linear id
    out, lout = arr(np.zeros(dims, np.int64)), arr(np.zeros(dims, np.int32))
    run(kb.function(), dims, [out, lout])
    grid = np.indices(dims)
    ref = np.zeros(dims, np.int64)
    for k in range(g):
        ref = ref * 1000 + grid[k]
    np.testing.assert_array_equal(host(out), ref)
    np.testing.assert_array_equal(host(lout).reshape(-1), np.arange(np.prod(dims)))


def test_multidim_launch_with_wrong_rank_raises():
    kb = KernelBuilder()
    y = kb.array("y", I32, 2)
    i, j = kb.tid(0, 2), kb.tid(1, 2)
    kb.b.store(y, [i, j], i, comp=0)
    ck = compile_fn(kb.function())
    with pytest.raises(ValueError, match="dim"):
        BE.launch(ck, (12,), [arr(np.zeros((3, 4), np.int32))])


def test_vector_components_and_shape():
    # a vec3 array: out[i] = x[i].z - x[i].x + len(x)
    kb = KernelBuilder()
    x, y = kb.array("x", T.vec3), kb.array("y", F32)
    b, i = kb.b, kb.tid()
    n = b.cast(b.emit("shape", [x], [I32], {"axis": 0}).result, F32)
    b.store(y, [i], b.add(b.sub(b.load(x, [i], comp=2), b.load(x, [i], comp=0)), n), comp=0)
    xs = np.arange(30, dtype=np.float32).reshape(10, 3)
    out = arr(np.zeros(10, np.float32))
    run(kb.function(), 10, [arr(xs, shape=(10,)), out])
    np.testing.assert_array_equal(host(out), xs[:, 2] - xs[:, 0] + 10)


# --------------------------------------------------------------------------- atomics

def _atomic_kernel(kind, t, exclusive=False, nbins=None, keep_old=False):
    kb = KernelBuilder()
    x, acc = kb.array("x", t), kb.array("acc", t)
    old = kb.array("old", t) if keep_old else None
    b, i = kb.b, kb.tid()
    idx = b.prim("mod", i, b.const(nbins, I32)) if nbins else i
    r = b.atomic(kind, acc, [idx], b.load(x, [i], comp=0), comp=0, exclusive=exclusive)
    if keep_old:
        b.store(old, [i], r, comp=0)
    return kb.function()


@pytest.mark.parametrize("t", [T.int32, T.int64, T.uint32], ids=lambda t: t.name)
def test_int_atomic_add_sub_exact_under_contention(t, rng):
    n, bins = BIG, 3
    npt = {T.int32: np.int32, T.int64: np.int64, T.uint32: np.uint32}[t]
    xs = rng.integers(0, 1000, n).astype(npt)
    acc = arr(np.zeros(bins, npt))
    run(_atomic_kernel("add", t, nbins=bins), n, [arr(xs), acc])
    ref = np.array([xs[k::bins].astype(np.int64).sum() for k in range(bins)])
    np.testing.assert_array_equal(host(acc).astype(np.int64), ref.astype(npt).astype(np.int64))
    run(_atomic_kernel("sub", t, nbins=bins), n, [arr(xs), acc])
    assert not host(acc).any()


def test_atomic_returns_unique_old_values():
    # every thread adds 1 to one counter: the old values are a permutation of 0..n-1
    n = BIG
    old = arr(np.zeros(n, np.int32))
    acc = arr(np.zeros(1, np.int32))
    run(_atomic_kernel("add", I32, nbins=1, keep_old=True), n, [arr(np.ones(n, np.int32)), acc, old])
    assert host(acc)[0] == n
    np.testing.assert_array_equal(np.sort(host(old)), np.arange(n))


@pytest.mark.parametrize("t", [T.float32, T.float64], ids=lambda t: t.name)
def test_float_atomic_sum_within_tolerance(t, rng):
    n = BIG
    npt = np.float32 if t is T.float32 else np.float64
    xs = rng.uniform(0, 1, n).astype(npt)
    acc = arr(np.zeros(4, npt))
    run(_atomic_kernel("add", t, nbins=4), n, [arr(xs), acc])
    ref = np.array([xs[k::4].astype(np.float64).sum() for k in range(4)])
    np.testing.assert_allclose(host(acc), ref, rtol=1e-3 if t is T.float32 else 1e-10)


@pytest.mark.parametrize("t", [T.float32, T.int32, T.uint32, T.int64], ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["min", "max"])
def test_atomic_min_max(kind, t, rng):
    n = BIG
    npt = {T.float32: np.float32, T.int32: np.int32, T.uint32: np.uint32, T.int64: np.int64}[t]
    lo = 0 if t.kind == "uint" else -10**6
    xs = rng.integers(lo, 10**6, n).astype(npt)
    start = np.full(5, 0 if kind == "max" and t.kind == "uint" else (xs.min() + xs.max()) // 2, npt)
    acc = arr(start.copy())
    run(_atomic_kernel(kind, t, nbins=5), n, [arr(xs), acc])
    red = np.minimum if kind == "min" else np.maximum
    np.testing.assert_array_equal(host(acc), [red(start[k], red.reduce(xs[k::5])) for k in range(5)])


def _reduction_kernel(t, also_load=False):
    # if x[i] > 0.25: acc[k] += x[i]  else: acc[2] -= x[i]   (k a scalar parameter); optionally reads acc
    kb = KernelBuilder()
    x, acc = kb.array("x", t), kb.array("acc", t)
    k = kb.scalar("k", I32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)
    if also_load:
        xi = b.add(xi, b.mul(b.load(acc, [b.const(3, I32)], comp=0), xi))
    thr = b.const(0.25 if t.is_float else 250, t)
    _if(b, b.prim("gt", xi, thr), lambda tb: [tb.atomic("add", acc, [k], xi, comp=0)] and [],
        lambda eb: [eb.atomic("sub", acc, [eb.add(eb.const(1, I32), eb.const(1, I32))], xi, comp=0)] and [], [])
    return kb.function()


@pytest.mark.parametrize("t", [T.float32, T.float64, T.int32, T.int64], ids=lambda t: t.name)
@pytest.mark.parametrize("n", [1000, 1 << 22])
def test_reduction_onto_fixed_elements_is_deferred_and_accurate(t, n, rng):
    npt = {T.float32: np.float32, T.float64: np.float64, T.int32: np.int32, T.int64: np.int64}[t]
    xs = (rng.uniform(0, 1, n) if t.is_float else rng.integers(0, 1000, n)).astype(npt)
    acc = arr(np.zeros(4, npt))
    ck = run(_reduction_kernel(t), n, [arr(xs), acc, 1])
    src = BE.source(ck)
    assert src.count("atomicrmw") == 2 and "partial" in src         # one atomic per site, after the loop
    x64 = xs.astype(np.float64)
    big = x64 > (0.25 if t.is_float else 250)
    ref = [0, x64[big].sum(), -x64[~big].sum(), 0]
    if t.is_float:
        np.testing.assert_allclose(host(acc), ref, rtol=1e-6 if t is T.float32 else 1e-12)
    else:
        np.testing.assert_array_equal(host(acc), np.array(ref, np.int64).astype(npt))


def test_unconditional_reduction_is_vectorised(rng):
    kb = KernelBuilder()
    x, acc = kb.array("x", F32), kb.array("acc", F32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)
    b.atomic("add", acc, [b.const(0, I32)], b.mul(xi, xi), comp=0)
    xs = rng.uniform(-1, 1, BIG).astype(np.float32)
    out = arr(np.zeros(1, np.float32))
    ck = run(kb.function(), BIG, [arr(xs), out])
    assert "x double>" in BE.source(ck)                   # float64 partial sums, SIMD
    np.testing.assert_allclose(host(out)[0], (xs.astype(np.float64) ** 2).sum(), rtol=1e-6)


def test_reduction_into_an_array_the_kernel_reads_stays_atomic(rng):
    xs = rng.uniform(0, 1, 5000).astype(np.float32)
    acc = arr(np.zeros(4, np.float32))
    ck = run(_reduction_kernel(T.float32, also_load=True), 5000, [arr(xs), acc, 0])
    assert "partial" not in BE.source(ck)
    np.testing.assert_allclose(host(acc)[[0, 2]], [xs[xs > 0.25].sum(), -xs[xs <= 0.25].sum()], rtol=1e-4)


def test_exclusive_atomics_are_plain_and_vectorised(rng):
    n = 10_000
    xs = rng.uniform(-1, 1, n).astype(np.float32)
    ys = rng.uniform(-1, 1, n).astype(np.float32)
    acc, old = arr(ys.copy()), arr(np.zeros(n, np.float32))
    ck = run(_atomic_kernel("add", F32, exclusive=True, keep_old=True), n, [arr(xs), acc, old])
    np.testing.assert_array_equal(host(acc), ys + xs)
    np.testing.assert_array_equal(host(old), ys)
    src = BE.source(ck)
    assert "atomicrmw" not in src and "x float>" in src


# --------------------------------------------------------------------------- value stack

def _stack_kernel(depth_param=True):
    # push x[i]*j for j < m, then pop m times: acc = acc*0.5 + pop()  (LIFO order matters), plus one extra pop
    kb = KernelBuilder()
    x, y, extra = kb.array("x", F32), kb.array("y", F32), kb.array("extra", F32)
    m = kb.scalar("m", I32)
    b, i = kb.b, kb.tid()
    xi = b.load(x, [i], comp=0)

    def push(bb, j):
        bb.emit("push", [bb.mul(xi, bb.cast(j, F32))], [], {"stack": 3})
        return []
    _for(b, b.const(0, I32), m, b.const(1, I32), [], push)

    def pop(bb, j, acc):
        v = bb.emit("pop", [], [F32], {"stack": 3}).result
        return [bb.add(bb.mul(acc, bb.const(0.5, F32)), v)]
    (acc,) = _for(b, b.const(0, I32), m, b.const(1, I32), [b.const(0.0, F32)], pop)
    b.store(y, [i], acc, comp=0)
    b.store(extra, [i], b.emit("pop", [], [F32], {"stack": 3}).result, comp=0)   # empty stack → 0
    fn = kb.function()
    fn.attrs["stack_sites"] = {3: None}
    return fn


@pytest.mark.parametrize("n", [100, BIG // 64])
def test_value_stack_lifo(n, rng):
    m = 20
    xs = rng.uniform(-1, 1, n).astype(np.float32)
    out, extra = arr(np.zeros(n, np.float32)), arr(np.ones(n, np.float32))
    run(_stack_kernel(), n, [arr(xs), out, extra, m], stack_size=64)
    ref = np.zeros(n)
    for j in reversed(range(m)):
        ref = ref * 0.5 + xs * j
    np.testing.assert_allclose(host(out), ref, rtol=1e-5, atol=1e-6)
    assert not host(extra).any()


@pytest.mark.parametrize("n", [10, BIG // 16])
def test_value_stack_overflow_raises(n):
    xs = np.ones(n, np.float32)
    out, extra = arr(np.zeros(n, np.float32)), arr(np.zeros(n, np.float32))
    ck = compile_fn(_stack_kernel(), stack_size=8)
    with pytest.raises(StackOverflowError, match="capacity 8 slots"):
        BE.launch(ck, (n,), [arr(xs), out, extra, 9])
    BE.launch(ck, (n,), [arr(xs), out, extra, 8])        # fits: no error, and the next launch is clean


# --------------------------------------------------------------------------- debug bounds checks

def _shift_kernel():
    # y[i] = x[i + 1] (reads one past the end), then z[2*i] = 1 (writes past the end)
    kb = KernelBuilder("shift")
    x, y, z = kb.array("x", F32), kb.array("y", F32), kb.array("z", F32)
    b, i = kb.b, kb.tid()
    b.store(y, [i], b.load(x, [b.add(i, b.const(1, I32))], comp=0), comp=0)
    b.store(z, [b.mul(i, b.const(2, I32))], b.const(1.0, F32), comp=0)
    return kb.function()


def test_debug_bounds_check_raises_and_skips():
    n = 10
    x = arr(np.arange(n, dtype=np.float32) + 1)
    y, z = arr(np.full(n, -1.0, np.float32)), arr(np.zeros(n, np.float32))
    ck = compile_fn(_shift_kernel(), debug=True)
    # threads run in order on a core, so thread 5's store to z[10] is the first fault here
    with pytest.raises(IndexError, match=r"kernel 'shift': index 1[0-9] out of range for axis 0 of array '[xz]' "
                                         r"with extent 10"):
        BE.launch(ck, (n,), [x, y, z])
    np.testing.assert_array_equal(host(y), np.r_[np.arange(2, n + 1), 0])    # the bad load gave 0
    np.testing.assert_array_equal(host(z), np.where(np.arange(n) % 2 == 0, 1, 0))


def test_debug_bounds_check_2d_reports_axis():
    kb = KernelBuilder("k2")
    x = kb.array("x", F32, 2)
    i, j = kb.tid(0, 2), kb.tid(1, 2)
    kb.b.store(x, [j, i], kb.b.const(1.0, F32), comp=0)       # transposed: axis 0 overflows
    ck = compile_fn(kb.function(), debug=True)
    with pytest.raises(IndexError, match="axis 0 .* extent 3"):
        BE.launch(ck, (3, 5), [arr(np.zeros((3, 5), np.float32))])


# --------------------------------------------------------------------------- cache

class DictCache:
    def __init__(self):
        self.data, self.gets, self.puts = {}, 0, 0

    def get(self, key):
        self.gets += 1
        return self.data.get(key)

    def put(self, key, blob):
        self.puts += 1
        self.data[key] = bytes(blob)


def _check_w1(ck, backend):
    xs = np.linspace(-2, 2, 1000, dtype=np.float32)
    x, y = arr(xs), arr(np.zeros(1000, np.float32))
    backend.launch(ck, (1000,), [x, y])
    np.testing.assert_allclose(host(y), np.sin(xs) * xs + 0.5 * xs * xs, rtol=1e-6, atol=1e-6)


def test_cache_miss_hit_and_corruption(tmp_path):
    from gradkit.runtime.cache import KernelCache
    for cache in (DictCache(), KernelCache(tmp_path)):
        fresh = LLVMBackend()
        ck = fresh.compile(DEV, w1_function(), _opts(cache))
        assert not ck.cache_hit
        _check_w1(ck, fresh)
        hit = LLVMBackend().compile(DEV, w1_function(), _opts(cache))      # a new process, in effect
        assert hit.cache_hit and "<" in LLVMBackend().source(hit)
        _check_w1(hit, fresh)
        assert not LLVMBackend().compile(DEV, w1_function(), _opts(cache, debug=True)).cache_hit


def test_corrupt_cache_entry_warns_once_and_recompiles():
    cache = DictCache()
    LLVMBackend().compile(DEV, w1_function(), _opts(cache))
    (key,) = cache.data
    good = cache.data[key]
    be = LLVMBackend()
    for k, bad in enumerate((good[:-100], good[:40] + bytes(200) + good[240:], b"junk")):
        cache.data[key] = bad
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ck = be.compile(DEV, w1_function(), _opts(cache))
        assert not ck.cache_hit
        _check_w1(ck, be)
        assert len(caught) == (1 if k == 0 else 0)        # once per backend instance
        assert cache.data[key] == good                     # the rebuilt kernel replaced the entry

    class Broken:
        def get(self, key):
            raise OSError("disk on fire")

        def put(self, key, blob):
            pass
    with pytest.warns(RuntimeWarning, match="disk on fire"):
        _check_w1(LLVMBackend().compile(DEV, w1_function(), _opts(Broken())), be)


def _opts(cache, debug=False):
    from gradkit.backends.base import CompileOptions
    return CompileOptions(debug=debug, cache=cache)


# --------------------------------------------------------------------------- code quality and speed

def test_w1_is_vectorised_and_correct(rng):
    ck = compile_fn(w1_function())
    src = BE.source(ck)
    width = "<8 x float>" if "+avx2" in jit.host_features() else "<4 x float>"
    assert width in src
    assert "@llvm.sin" not in src and "call float @sin" not in src       # no scalar libm call
    n = BIG
    xs = rng.uniform(-2, 2, n).astype(np.float32)
    x, y = arr(xs), arr(np.zeros(n, np.float32))
    BE.launch(ck, (n,), [x, y])
    x64 = xs.astype(np.float64)
    np.testing.assert_allclose(host(y), np.sin(x64) * x64 + 0.5 * x64 * x64, rtol=2e-6, atol=1e-7)


def test_tiny_launch_overhead():
    ck = compile_fn(w1_function())
    x, y = arr(np.ones(4, np.float32)), arr(np.zeros(4, np.float32))
    args = [x, y]
    BE.launch(ck, (4,), args)
    per = min(timeit.repeat(lambda: BE.launch(ck, (4,), args), number=2000, repeat=5)) / 2000
    assert per < 20e-6, f"tiny launch took {per * 1e6:.1f} µs"      # ~2.5 µs measured; loose for CI noise
