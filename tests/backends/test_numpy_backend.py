"""The NumPy reference backend plugin (examples/numpy_backend): discovery through its entry point,
and its interpreter of lowered IR against NumPy float64 / plain-Python references.

Kernels are lowered IR built by hand with the IR builder, launched with fake array objects
(`SimpleNamespace(buffer=..., shape=...)`), so these tests need neither the frontend nor the runtime.
Needs `pip install -e examples/numpy_backend`.
"""

from __future__ import annotations

import importlib.metadata
import math

import numpy as np
import pytest

from gradkit.backends.base import CompileOptions
from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS
from gradkit.core.builtins.bits import OPERATORS
from gradkit.core.errors import CompileError
from tests.builtin_table import BINARY, UNARY

plugin = pytest.importorskip("gradkit_numpy_backend", reason="pip install -e examples/numpy_backend")
BE = plugin.NumpyBackend()
DEV = BE.devices()[0]
F32, F64, I32, I64, U32, BOOL = T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_


from tests.backends.numpy_ir_helpers import *  # noqa: F401,F403  (K, run, arrays, BE, DEV, type aliases)


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
    k3 = K(x=arr(F32))                   # well typed, but lowered IR always names the component
    k3.b.load(k3.x, [tid(k3.b)])
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
    "rem": (lambda a, b: np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))), NUMERIC,   # C's %, x % 0 = 0
            [(-9, 9), (0.5, 3)]),
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
    "tanh": (np.tanh, FLOATS, None), "erf": (np.vectorize(math.erf, otypes=[float]), FLOATS, None),
    "idiv": (lambda a, b: np.trunc(a / b), INTS, None), "irem": (lambda a, b: a - b * np.trunc(a / b), INTS, None),
    "lt": (np.less, NUMERIC, None), "le": (np.less_equal, NUMERIC, None), "gt": (np.greater, NUMERIC, None),
    "ge": (np.greater_equal, NUMERIC, None), "eq": (np.equal, NUMERIC + (BOOL,), None),
    "ne": (np.not_equal, NUMERIC + (BOOL,), None),
    "and": (np.logical_and, (BOOL,), None), "or": (np.logical_or, (BOOL,), None),
    "not": (np.logical_not, (BOOL,), None),
    "where": (lambda cnd, a, b: np.where(cnd, a, b), NUMERIC + (BOOL,), None),
    "bit_and": (np.bitwise_and, INTS, None), "bit_or": (np.bitwise_or, INTS, None),
    "bit_xor": (np.bitwise_xor, INTS, None), "bit_not": (np.invert, INTS, None),
    "shl": (lambda a, n: np.left_shift(a, n & (a.dtype.itemsize * 8 - 1)), INTS, None),     # counts mod width
    "shr": (lambda a, n: np.right_shift(a, n & (a.dtype.itemsize * 8 - 1)), INTS, None),
    "stop_gradient": (lambda x: x, FLOATS, None),      # identity; its (absent) derivative: test_decompositions
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
    """Every scalar primitive is checked op by op here, or through tests/builtin_table.py's rows (which run
    on the numpy device too, forward and both gradient modes)."""
    scalar_prims = {name for name, b in BUILTINS.items() if _takes_scalars(b)}
    assert set(REFERENCE) | SPECIAL <= scalar_prims
    assert scalar_prims - set(UNARY) - set(BINARY) <= set(REFERENCE) | SPECIAL


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
        if name in ("idiv", "irem") and j == 1:      # C's / and %: the expansion of // and % never divides by 0
            args[-1][args[-1] == 0] = 1
    fn = _prim_kernel(name, arg_types)
    rtype = BUILTINS[name].result_type(arg_types, {})
    *_, got = run(fn, n, *args, np.zeros(n, rtype.np_dtype))
    if name in OPERATORS:       # bitwise: computed on the integers themselves (the width matters for shifts)
        want = ref(*args)
    else:
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
