"""The NumPy reference backend plugin (examples/numpy_backend): discovery through its entry point,
and its interpreter of lowered IR against NumPy float64 / plain-Python references.

Kernels are lowered IR built by hand with the IR builder, launched with fake array objects
(`SimpleNamespace(buffer=..., shape=...)`), so these tests need neither the frontend nor the runtime.
Needs `pip install -e examples/numpy_backend`.
"""

from __future__ import annotations

import importlib.metadata
import math
from types import SimpleNamespace

import numpy as np
import pytest

from gradkit.backends.base import CompileOptions
from gradkit.core import ir
from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS
from gradkit.core.errors import CompileError, SourceLoc, StackOverflowError

plugin = pytest.importorskip("gradkit_numpy_backend", reason="pip install -e examples/numpy_backend")
BE = plugin.NumpyBackend()
DEV = BE.devices()[0]
F32, F64, I32, I64, U32, BOOL = T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_


# --------------------------------------------------------------------------- building and running IR

class K:
    """A lowered kernel under construction: `K(x=arr(F32), a=F32)`; `k.x` is a parameter's value."""

    def __init__(self, **params):
        self.params = [ir.Param(name, t) for name, t in params.items()]
        self.body = ir.Region()
        self.b = ir.Builder(self.body)

    def __getattr__(self, name):
        for p in self.__dict__.get("params", []):
            if p.name == name:
                return p.value
        raise AttributeError(name)

    def fn(self, name: str = "k") -> ir.Function:
        fn = ir.Function(name, self.params, self.body, [])
        ir.verify(fn, scalar_only=True)
        return fn


def arr(dtype, ndim: int = 1):
    return T.array_type(dtype, ndim)


def tid(b, axis: int = 0, ndim: int = 1):
    return b.emit("tid", [], [I32], {"axis": axis, "ndim": ndim}).result


def shape(b, a, axis: int = 0):
    return b.emit("shape", [a], [I32], {"axis": axis}).result


def c(b, value, t=I32):
    return b.const(value, t)


def for_(b, start, stop, step, init, body):
    """`for iv in range(start, stop, step)` carrying `init`; body(builder, iv, *carried) -> new carried."""
    region = ir.Region(params=[ir.Value(start.type, "iv"), *[ir.Value(v.type) for v in init]])
    region.yields = list(body(b.at(region), *region.params))
    return b.emit("for", [start, stop, step, *init], [v.type for v in init], regions=[region]).results


def if_(b, cond, then, other, types=()):
    """then(builder) / other(builder) -> yielded values (of `types`)."""
    rt, re = ir.Region(), ir.Region()
    rt.yields, re.yields = list(then(b.at(rt)) or []), list(other(b.at(re)) or [])
    return b.emit("if", [cond], list(types), regions=[rt, re]).results


def while_(b, init, cond, body):
    """cond(builder, *carried) -> bool value; body(builder, *carried) -> new carried."""
    rc = ir.Region(params=[ir.Value(v.type) for v in init])
    rb = ir.Region(params=[ir.Value(v.type) for v in init])
    rc.yields = [cond(b.at(rc), *rc.params)]
    rb.yields = list(body(b.at(rb), *rb.params))
    return b.emit("while", list(init), [v.type for v in init], regions=[rc, rb]).results


def run(fn: ir.Function, dim, *args, debug: bool = False, stack_size: int = 64) -> list[np.ndarray]:
    """Launch `fn` on the numpy backend; NumPy array arguments go in as fake gradkit arrays.
    Returns every array argument's contents after the launch, in parameter order."""
    compiled = BE.compile(DEV, fn, CompileOptions(debug=debug, stack_size=stack_size))
    launch_args, arrays = [], []
    for p, a in zip(fn.params, args):
        if p.type.is_array:
            a = np.ascontiguousarray(a, dtype=p.type.scalar.np_dtype)
            buf = BE.alloc(DEV, a.nbytes)
            BE.copy_from_host(DEV, buf, a)
            launch_args.append(SimpleNamespace(buffer=buf, shape=a.shape[:p.type.ndim]))
            arrays.append((buf, a))
        else:
            launch_args.append(a)
    BE.launch(compiled, tuple(dim) if not isinstance(dim, int) else (dim,), launch_args)
    out = []
    for buf, a in arrays:
        host = np.empty_like(a)
        BE.copy_to_host(DEV, buf, host)
        out.append(host)
    return out


# --------------------------------------------------------------------------- the plugin itself

def test_discovered_through_entry_point():
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group="gradkit.backends")}
    assert "numpy" in eps
    assert eps["numpy"].value == "gradkit_numpy_backend:NumpyBackend"
    assert eps["numpy"].load() is plugin.NumpyBackend
    import gradkit as gk
    assert "numpy" in gk.backends.available()
    dev = gk.get_device("numpy")
    assert dev.backend == "numpy" and dev.description == "NumPy reference interpreter (float64-capable)"


def test_memory_interface():
    src = np.arange(12, dtype=np.float64).reshape(3, 4)
    buf = BE.alloc(DEV, src.nbytes)
    assert buf.dtype == np.uint8 and buf.nbytes == src.nbytes and not buf.any()
    BE.copy_from_host(DEV, buf, src)
    assert BE.host_view(DEV, buf) is buf
    other = BE.alloc(DEV, src.nbytes)
    BE.copy(DEV, other, buf, src.nbytes)
    back = np.empty_like(src)
    BE.copy_to_host(DEV, other, back)
    np.testing.assert_array_equal(back, src)
    BE.fill_zero(DEV, other, 8 * 4)
    BE.copy_to_host(DEV, other, back)
    assert not back.ravel()[:4].any() and (back.ravel()[4:] == src.ravel()[4:]).all()


def test_compile_keeps_ir_and_rejects_what_is_not_lowered_ir():
    k = K(x=arr(F32))
    i = tid(k.b)
    k.b.store(k.x, [i], k.b.prim("sin", k.b.load(k.x, [i], comp=0)), comp=0)
    fn = k.fn()
    assert BE.source(BE.compile(DEV, fn, CompileOptions())) == str(fn)
    k2 = K(x=arr(F32))
    k2.b.emit("call", [], [], {"func": fn})
    with pytest.raises(CompileError, match="'call' is not part of lowered IR"):
        BE.compile(DEV, k2.fn(), CompileOptions())
    k3 = K(x=arr(T.vec3))
    k3.b.load(k3.x, [tid(k3.b)], comp=None, type=F32)
    with pytest.raises(CompileError, match="without a component index"):
        BE.compile(DEV, k3.fn(), CompileOptions())


# --------------------------------------------------------------------------- every scalar primitive

def _floor_div(a, b):
    return np.where(b == 0, 0.0, np.floor(a / np.where(b == 0, 1, b)))


def _floor_mod(a, b):
    return np.where(b == 0, 0.0, a - b * np.floor(a / np.where(b == 0, 1, b)))


FLOATS, INTS, NUMERIC = (F32, F64), (I32, I64, U32), (F32, F64, I32, I64, U32)
# name -> (float64 reference, argument types, domain of each argument for float types)
REFERENCE = {
    "add": (np.add, NUMERIC, None), "sub": (np.subtract, NUMERIC, None), "mul": (np.multiply, NUMERIC, None),
    "div": (np.divide, FLOATS, [(-3, 3), (0.5, 3)]),
    "floordiv": (_floor_div, NUMERIC, [(-9, 9), (0.5, 3)]), "mod": (_floor_mod, NUMERIC, [(-9, 9), (0.5, 3)]),
    "pow": (np.power, FLOATS, [(0.2, 3), (-2, 2)]),
    "min": (np.minimum, NUMERIC, None), "max": (np.maximum, NUMERIC, None),
    "atan2": (np.arctan2, FLOATS, None), "neg": (np.negative, NUMERIC, None),
    "abs": (np.abs, (F32, F64, I32, I64), None), "sign": (np.sign, (F32, F64, I32, I64), None),
    "floor": (np.floor, FLOATS, None), "ceil": (np.ceil, FLOATS, None),
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), FLOATS, None),
    "clamp": (lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), NUMERIC, [(-3, 3), (-2, 0), (0, 2)]),
    "sqrt": (np.sqrt, FLOATS, [(0, 9)]), "exp": (np.exp, FLOATS, None),
    "log": (np.log, FLOATS, [(0.1, 9)]), "log2": (np.log2, FLOATS, [(0.1, 9)]),
    "log10": (np.log10, FLOATS, [(0.1, 9)]),
    "sin": (np.sin, FLOATS, None), "cos": (np.cos, FLOATS, None), "tan": (np.tan, FLOATS, [(-1.3, 1.3)]),
    "asin": (np.arcsin, FLOATS, [(-1, 1)]), "acos": (np.arccos, FLOATS, [(-1, 1)]),
    "atan": (np.arctan, FLOATS, None), "sinh": (np.sinh, FLOATS, None), "cosh": (np.cosh, FLOATS, None),
    "tanh": (np.tanh, FLOATS, None),
    "lt": (np.less, NUMERIC, None), "le": (np.less_equal, NUMERIC, None), "gt": (np.greater, NUMERIC, None),
    "ge": (np.greater_equal, NUMERIC, None), "eq": (np.equal, NUMERIC + (BOOL,), None),
    "ne": (np.not_equal, NUMERIC + (BOOL,), None),
    "and": (np.logical_and, (BOOL,), None), "or": (np.logical_or, (BOOL,), None),
    "not": (np.logical_not, (BOOL,), None),
    "where": (lambda cnd, a, b: np.where(cnd, a, b), NUMERIC + (BOOL,), None),
}
SPECIAL = {"cast"}   # tested over every pair of scalar types below


def _takes_scalars(b) -> bool:
    for arity in ([b.arity] if b.arity else [1, 2, 3]):
        for t in (F32, I32, BOOL):
            try:
                b.result_type([t] * arity, {"to": F64})
                return True
            except Exception:
                pass
    return False


def test_reference_table_covers_every_scalar_primitive():
    scalar_prims = {name for name, b in BUILTINS.items() if _takes_scalars(b)}
    assert scalar_prims == set(REFERENCE) | SPECIAL


def _sample(rng, t, n, domain=(-3, 3), zeros=False, slot=0):
    if t is BOOL:
        return rng.random(n) < 0.5
    if t.is_float:
        lo, hi = domain
        x = rng.uniform(lo, hi, n)
        x[:4] = np.clip([0.5, -0.5, 1.5, -2.0], lo, hi)          # ties for round, exact ints for floor
        return x.astype(t.np_dtype)
    lo = 0 if t is U32 else -20
    x = rng.integers(lo, 21, n)
    if zeros:
        x[:3] = 0
    elif lo < 0 and t.bits == 32:
        x[slot] = np.iinfo(np.int32).max     # overflows wrap as in C; one per argument keeps float64 exact
    return x.astype(t.np_dtype)


def _prim_kernel(name, arg_types, attrs=None):
    k = K(**{f"a{j}": arr(t) for j, t in enumerate(arg_types)}, out=arr(BUILTINS[name].result_type(
        arg_types, attrs or {})))
    i = tid(k.b)
    xs = [k.b.load(p.value, [i], comp=0) for p in k.params[:-1]]
    k.b.store(k.out, [i], k.b.prim(name, *xs, **(attrs or {})), comp=0)
    return k.fn(name)


CASES = [(name, t) for name, (_, types, _) in REFERENCE.items() for t in types]


@pytest.mark.parametrize("name,t", CASES, ids=[f"{n}-{t.name}" for n, t in CASES])
def test_scalar_primitive_matches_float64_reference(name, t, rng):
    ref, _, domains = REFERENCE[name]
    arity = BUILTINS[name].arity
    arg_types = [BOOL, t, t] if name == "where" else [t] * arity
    n = 97
    args = []
    for j, at in enumerate(arg_types):
        dom = domains[j] if domains and at.is_float else (-3, 3)
        args.append(_sample(rng, at, n, dom, zeros=name in ("floordiv", "mod") and j == 1, slot=j))
    fn = _prim_kernel(name, arg_types)
    rtype = BUILTINS[name].result_type(arg_types, {})
    *_, got = run(fn, n, *args, np.zeros(n, rtype.np_dtype))
    want = ref(*[a.astype(np.float64) if a.dtype != bool else a for a in args])
    assert got.dtype == rtype.np_dtype
    if rtype.is_float:
        tol = dict(rtol=2e-6, atol=2e-6) if rtype is F32 else dict(rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(got, want, **tol, equal_nan=True)
    else:   # integers wrap modulo 2**bits (e.g. int32 max + x, -x for uint32), as in C
        np.testing.assert_array_equal(got, np.asarray(want).astype(np.int64).astype(rtype.np_dtype))


SCALARS = (F32, F64, I32, I64, U32, BOOL)


@pytest.mark.parametrize("src", SCALARS, ids=[t.name for t in SCALARS])
@pytest.mark.parametrize("dst", SCALARS, ids=[t.name for t in SCALARS])
def test_cast(src, dst, rng):
    n = 64
    x = _sample(rng, src, n, (0, 9) if dst is U32 else (-9, 9))
    if src.is_float:
        x[:6] = [2.75, 3.0, 0.0, 7.5, 1e-3, 0.5] if dst is U32 else [-2.75, 3.0, 0.0, -7.5, -1e-3, 0.5]
    (_, got) = run(_prim_kernel("cast", [src], {"to": dst}), n, x, np.zeros(n, dst.np_dtype))
    x64 = x.astype(np.float64)
    if dst.is_bool:
        want = x64 != 0
    elif dst.is_int:
        want = np.trunc(x64).astype(np.int64).astype(dst.np_dtype)      # toward zero; ints wrap
    else:
        want = x64
    if dst is F32:
        np.testing.assert_allclose(got, want, rtol=6e-8, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


def test_float32_stays_float32():
    """Computation happens in the IR's dtype: 1000 float32 additions round like float32, not float64."""
    k = K(out=arr(F32))
    b = k.b
    (s,) = for_(b, c(b, 0), c(b, 1000), c(b, 1), [c(b, 0.0, F32)],
                lambda bb, j, acc: [bb.add(acc, bb.const(0.1, F32))])
    b.store(k.out, [tid(b)], s, comp=0)
    (got,) = run(k.fn(), 1, np.zeros(1, np.float32))
    want = np.float32(0)
    for _ in range(1000):
        want = np.float32(want + np.float32(0.1))
    assert got[0] == want and abs(float(want) - 100.0) > 1e-5


def test_scalar_parameters_of_every_type():
    for t in SCALARS:
        k = K(s=t, out=arr(t))
        k.b.store(k.out, [tid(k.b)], k.s, comp=0)
        value = {BOOL: True, U32: 4_000_000_000, I64: -(2 ** 40) - 3}.get(t, -2.5 if t.is_float else -7)
        (got,) = run(k.fn(), 3, value, np.zeros(3, t.np_dtype))
        assert (got == t.np_dtype.type(value)).all(), t


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
