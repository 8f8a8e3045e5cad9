"""Atomics on the OpenCL backend under heavy contention (integer sums exact, float sums within tolerance),
the old values they return, exclusive (plain read-modify-write) updates, and the work-group reductions
that replace atomics onto one element only where the IR makes that safe."""

from __future__ import annotations

import numpy as np
import pytest
from gradkit.core import types as T
from test_opencl_support import (
    BE,
    DEV,
    F32,
    F64,
    I32,
    I64,
    U32,
    A,
    K,
    arr,
    compile_fn,
    devices_mod,
    for_,
    host,
    if_,
    run,
)

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Same random inputs for a test whatever ran before it in this process (xdist, -k)."""
    global RNG
    RNG = np.random.default_rng([11, sum(map(ord, request.node.name))])
N = 1 << 16
SLOTS = 3


def _scatter(kind: str, t, values: np.ndarray, slots: int = SLOTS):
    """s[i % slots] <kind>= v[i] over N threads (non-constant index: real atomics, old value unused)."""
    k = K(v=A(t), s=A(t))
    b, i = k.b, k.tid()
    b.atomic(kind, k.s, [b.prim("mod", i, k.c(slots))], b.load(k.v, [i], comp=0), comp=0)
    init = {"min": values.max(), "max": values.min()}.get(kind, 0)
    s = arr(np.full(slots, init, values.dtype))
    c = run(k.fn(f"scatter_{kind}"), len(values), [arr(values), s])
    assert "gk_acc" not in c.source
    return host(s)


def _np_scatter(kind, values, slots=SLOTS):
    groups = [values[j::slots] for j in range(slots)]
    if kind == "add":
        return np.array([g.astype(np.float64 if values.dtype.kind == "f" else values.dtype).sum() for g in groups])
    if kind == "sub":
        return -_np_scatter("add", values, slots)
    return np.array([g.min() if kind == "min" else g.max() for g in groups])


@pytest.mark.parametrize("t", [I32, I64, U32], ids=["i32", "i64", "u32"])
@pytest.mark.parametrize("kind", ["add", "sub", "min", "max"])
def test_integer_atomics_are_exact_under_contention(kind, t):
    dt = np.dtype(t.np_dtype)
    big = 1 << 40 if t is I64 else 1000                    # int64 sums pass 2^32
    values = RNG.integers(0 if t is U32 else -big, big, N).astype(dt)
    got = _scatter(kind, t, values)
    with np.errstate(over="ignore"):
        ref = _np_scatter(kind, values).astype(dt)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("t", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("kind", ["add", "sub", "min", "max"])
def test_float_atomics_under_contention(kind, t):
    dt = np.dtype(t.np_dtype)
    values = RNG.uniform(0.0, 1.0, N).astype(dt)
    got = _scatter(kind, t, values)
    ref = _np_scatter(kind, values)
    if kind in ("min", "max"):
        np.testing.assert_array_equal(got, ref.astype(dt))
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-4 if t is F32 else 1e-12)


@pytest.mark.parametrize("t", [I32, I64, U32, F32, F64], ids=["i32", "i64", "u32", "f32", "f64"])
def test_atomics_return_the_old_value(t):
    """Every thread adds 1 to one counter and keeps what it saw: the tickets are 0..n-1, each once."""
    k = K(cnt=A(t), tickets=A(t), lo=A(t), seen=A(t))
    b, i = k.b, k.tid()
    one = k.c(1.0 if t.is_float else 1, t)
    old = b.atomic("add", k.cnt, [k.c(0)], one, comp=0)
    b.store(k.tickets, [i], old, comp=0)
    b.store(k.seen, [i], b.atomic("min", k.lo, [k.c(0)], b.cast(i, t), comp=0), comp=0)
    n = 20000
    dt = np.dtype(t.np_dtype)
    cnt, tickets, lo, seen = arr(np.zeros(1, dt)), arr(np.zeros(n, dt)), arr(np.full(1, n, dt)), arr(np.zeros(n, dt))
    c = run(k.fn("tickets"), n, [cnt, tickets, lo, seen])
    assert "gk_acc" not in c.source                     # the old value is used: no deferred reduction
    assert host(cnt)[0] == n
    np.testing.assert_array_equal(np.sort(host(tickets)), np.arange(n).astype(dt))
    assert host(lo)[0] == 0
    s = host(seen)
    assert ((s >= 0) & (s <= n)).all() and (s == n).sum() >= 1   # old minima; someone saw the initial n


@pytest.mark.parametrize("t", [I32, F32, F64], ids=["i32", "f32", "f64"])
def test_exclusive_atomics_are_plain_updates_returning_the_old_value(t):
    k = K(a=A(t), v=A(t), o_add=A(t), o_sub=A(t), o_min=A(t), o_max=A(t))
    b, i = k.b, k.tid()
    v = b.load(k.v, [i], comp=0)
    for kind in ("add", "sub", "min", "max"):
        old = b.atomic(kind, k.a, [i], v, comp=0, exclusive=True)
        b.store(getattr(k, f"o_{kind}"), [i], old, comp=0)
    n = 999
    dt = np.dtype(t.np_dtype)
    a0 = RNG.integers(-50, 50, n).astype(dt)
    vs = RNG.integers(-50, 50, n).astype(dt)
    outs = [arr(np.zeros(n, dt)) for _ in range(4)]
    a = arr(a0)
    c = run(k.fn("exclusive"), n, [a, arr(vs), *outs])
    assert "atomic" not in c.source.split("__kernel")[1]
    s1 = a0 + vs
    s2 = s1 - vs
    s3 = np.minimum(s2, vs)
    s4 = np.maximum(s3, vs)
    for out, ref in zip(outs, (a0, s1, s2, s3)):
        np.testing.assert_array_equal(host(out), ref)
    np.testing.assert_array_equal(host(a), s4)


# --------------------------------------------------------------------------- reductions onto one element

def _w2(t=F32):
    k = K(x=A(t), loss=A(t))
    b, i = k.b, k.tid()
    x = b.load(k.x, [i], comp=0)
    b.atomic("add", k.loss, [k.c(0)], b.mul(x, x), comp=0)
    return k.fn("w2")


@pytest.mark.parametrize("gpu_code", [False, True], ids=["device", "gpu-code"])
@pytest.mark.parametrize("t", [F32, F64], ids=["f32", "f64"])
def test_w2_sum_onto_one_element_is_a_work_group_reduction_and_accurate(t, gpu_code, monkeypatch):
    if gpu_code:       # the code a GPU gets (tree reduction), run on whatever device this is
        monkeypatch.setattr(devices_mod, "is_gpu", lambda dev: True)
    n = (1 << 20) + 17                      # not a multiple of the work-group size
    dt = np.dtype(t.np_dtype)
    x = RNG.uniform(-1, 1, n).astype(dt)
    loss = arr(np.zeros(1, dt))
    c = run(_w2(t), n, [arr(x), loss])
    assert "gk_acc0" in c.source and "barrier(CLK_LOCAL_MEM_FENCE)" in c.source
    assert ("s >>= 1" in c.source) == (gpu_code or DEV.properties["type"] == "gpu")
    ref = (x.astype(np.float64) ** 2).sum()
    assert abs(host(loss)[0] - ref) / ref < (2e-5 if t is F32 else 1e-12)


def test_reduction_is_not_used_when_the_kernel_also_reads_the_element():
    k = K(x=A(F32), loss=A(F32), seen=A(F32))
    b, i = k.b, k.tid()
    b.atomic("add", k.loss, [k.c(0)], b.load(k.x, [i], comp=0), comp=0)
    b.store(k.seen, [i], b.load(k.loss, [k.c(0)], comp=0), comp=0)     # must see its own contribution
    n = 5000
    seen = arr(np.zeros(n, np.float32))
    c = run(k.fn("readback"), n, [arr(np.ones(n, np.float32)), arr(np.zeros(1, np.float32)), seen])
    assert "gk_acc" not in c.source
    assert (host(seen) >= 1).all()


def test_reductions_in_branches_on_vector_components_and_integers():
    k = K(x=A(F32), acc=A(T.vec2), npos=A(I32), total=A(I64))
    b, i = k.b, k.tid()
    x = b.load(k.x, [i], comp=0)
    pos = b.prim("gt", x, k.c(0.0, F32))

    def then(bb):
        bb.atomic("add", k.acc, [k.c(0)], x, comp=0)
        bb.atomic("add", k.npos, [k.c(0)], k.c(1), comp=0)
        return []

    if_(b, pos, then, lambda bb: [], [])
    b.atomic("sub", k.acc, [k.c(0)], b.mul(x, x), comp=1)
    b.atomic("add", k.total, [k.c(0)], b.cast(i, I64), comp=0)
    n = 300001
    xs = RNG.uniform(-1, 1, n).astype(np.float32)
    acc, npos, total = arr(np.zeros((1, 2), np.float32), shape=(1,)), arr(np.zeros(1, np.int32)), \
        arr(np.zeros(1, np.int64))
    c = run(k.fn("reductions"), n, [arr(xs), acc, npos, total])
    assert "gk_acc3" in c.source
    got = host(acc)[0]
    x64 = xs.astype(np.float64)
    np.testing.assert_allclose(got, [x64[x64 > 0].sum(), -(x64 ** 2).sum()], rtol=2e-5)
    assert host(npos)[0] == (xs > 0).sum() and host(total)[0] == n * (n - 1) // 2


@pytest.mark.parametrize("workgroup", [None, 512])
def test_reduction_together_with_a_value_stack(workgroup, monkeypatch):
    """Parameter gradients in adjoint kernels: a loop that pushes, plus a sum onto one element. The thread
    body is then a function of its own, so a CPU runtime does not keep a stack per work-item across the
    reduction's barrier (4096 slots at 512 work-items crashed PoCL before)."""
    if workgroup is not None:
        state = BE._state(DEV)
        monkeypatch.setattr(state, "workgroup", min(workgroup, DEV.properties["max_work_group_size"]))
    k = K(x=A(F32), g=A(F32))
    b, i = k.b, k.tid()
    x = b.load(k.x, [i], comp=0)

    def push(bb, j, c):
        bb.emit("push", [bb.mul(c[0], x)], [], {"stack": 0})
        return [bb.mul(c[0], x)]

    for_(b, k.c(0), k.c(3), k.c(1), [k.c(1.0, F32)], push)

    def pop(bb, j, c):
        return [bb.add(c[0], bb.emit("pop", [], [F32], {"stack": 0}).result)]

    (s,) = for_(b, k.c(0), k.c(3), k.c(1), [k.c(0.0, F32)], pop)
    b.atomic("add", k.g, [k.c(0)], s, comp=0)
    n = 100000
    xs = RNG.uniform(-1, 1, n).astype(np.float32)
    g = arr(np.zeros(1, np.float32))
    c = run(k.fn("stack_reduce"), n, [arr(xs), g])           # default 4096-slot stack
    assert "gk_stack" in c.source and "gk_acc0" in c.source and "_thread(" in c.source
    x64 = xs.astype(np.float64)
    ref = (x64 + x64 ** 2 + x64 ** 3).sum()
    assert abs(host(g)[0] - ref) / abs(ref) < 1e-4


def test_w1_elementwise_and_launch_rounding():
    k = K(x=A(F32), y=A(F32))
    b, i = k.b, k.tid()
    x = b.load(k.x, [i], comp=0)
    b.store(k.y, [i], b.add(b.mul(b.prim("sin", x), x), b.mul(b.mul(k.c(0.5, F32), x), x)), comp=0)
    fn = k.fn("w1")
    wg = compile_fn(fn).workgroup
    for n in (1, wg - 1, wg, wg + 1, 100003):
        xs = RNG.uniform(-3, 3, n + 5).astype(np.float32)
        y = arr(np.full(n + 5, 7.0, np.float32))
        run(fn, n, [arr(xs), y])
        x64 = xs[:n].astype(np.float64)
        got = host(y)
        np.testing.assert_allclose(got[:n], np.sin(x64) * x64 + 0.5 * x64 * x64, rtol=1e-5, atol=1e-6)
        assert (got[n:] == 7.0).all(), "threads past n must not run"


@pytest.mark.parametrize("t", [F32, F64], ids=["f32", "f64"])
def test_float_adds_use_native_ptx_atomics_only_where_the_probe_passed(t):
    from gradkit.backends.opencl.codegen import Codegen
    k = K(x=A(t), out=A(t))
    b, i = k.b, k.tid()
    b.atomic("add", k.out, [k.c(0)], b.load(k.x, [i], comp=0), comp=0)
    b.store(k.x, [i], b.load(k.out, [k.c(0)], comp=0), comp=0)         # read back: not a reduction
    fn = k.fn("scatter")
    common = dict(debug=False, stack_size=8, fp64=True, device_extensions=frozenset(
        {"cl_khr_int64_base_atomics", "cl_khr_fp64"}), workgroup=64)
    native = Codegen(fn, "k", ptx_atomics=True, **common).build().source
    plain = Codegen(fn, "k", **common).build().source
    ptx = "f32" if t is F32 else "f64"
    assert "#define GK_PTX_ATOMICS 1" in native and "#define GK_PTX_ATOMICS" not in plain
    assert f"atom.global.add.{ptx}" in native          # inside #ifdef: the CAS loop stays for other devices
    assert "atomic_cmpxchg" in plain or "atom_cmpxchg" in plain
