"""Capabilities and their lowering (core/passes/lower_capabilities.py, backends/capabilities.py): every
fallback on random and edge inputs against the builtins table's NumPy semantics (erf against math.erf), on
every device — the lowered IR uses only primitives every device has, so each device runs the expansion —
for targets shaped like old plugins; and a clear NotDeclaredError where nothing can be lowered."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradkit as gk
from gradkit.ad.pipeline import for_backend
from gradkit.backends.base import CompileOptions
from gradkit.backends.capabilities import (CONTRACT_VERSION, HISTORY, Capabilities, capabilities_of, defaults,
                                           everything, lower_for, target_of)
from gradkit.conformance.irkit import A, K
from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS
from gradkit.core.ir import copy_function, verify
from gradkit.core.ops import Op
from gradkit.core.passes.lower_capabilities import NotDeclaredError, Target, lower_capabilities

V1 = defaults(1)
# a contract-1 plugin: floored // and % reach it, no idiv/irem/shifts/bit ops/erf
TARGET_V1 = Target("old", V1.primitives, V1.atomics, V1.features)
# a plugin with C's division (idiv/irem) but no floored division, shifts or bit operations
TARGET_TRUNC = Target("trunc", (V1.primitives - {"floordiv", "mod"}) | {"idiv", "irem"}, V1.atomics)
# only float division: 32-bit integer division goes through float64
TARGET_FLOAT = Target("floaty", V1.primitives - {"floordiv", "mod"}, V1.atomics)
INTS = (T.int32, T.int64, T.uint32)


def _prim_kernel(name: str, types):
    k = K(**{f"x{j}": A(t) for j, t in enumerate(types)})
    i = k.tid()
    vals = [k.b.load(getattr(k, f"x{j}"), [i], comp=0) for j in range(len(types))]
    r = k.b.prim(name, *vals)
    k.b.store(k.add_param("out", A(r.type)), [i], r, comp=0)
    return k.fn(f"lowered_{name}"), r.type


def _run_lowered(device: str, name: str, cols, types, target: Target) -> np.ndarray:
    """Prim `name` lowered for `target`, then compiled and launched on `device` as it is."""
    fn, rtype = _prim_kernel(name, types)
    low = lower_capabilities(copy_function(fn), target)
    verify(low, scalar_only=True)
    used = {ins.attrs["name"] for ins in low.walk() if ins.op == Op.PRIM}
    assert name not in used and used <= target.prims, f"{name} lowered into undeclared {used - target.prims}"
    dev = gk.get_device(device)
    n = len(cols[0])
    arrays = [gk.array(np.asarray(c).astype(t.np_dtype), dtype=t, device=device) for c, t in zip(cols, types)]
    out = gk.zeros(n, dtype=rtype, device=device)
    # what the device itself lacks of the lowered IR (floordiv on cpu, say) is expanded as for any kernel
    compiled = dev.impl.compile(dev.info, for_backend(low, dev.impl.native_prims), CompileOptions())
    dev.impl.launch(compiled, (n,), [*arrays, out])
    dev.impl.synchronize(dev.info)
    return out.numpy()


def _ints(t, n, rng):
    info = np.iinfo(t.np_dtype)
    edges = [0, 1, 2, 7, info.max, info.max - 1] + ([-1, -2, -7, info.min, info.min + 1] if info.min else [])
    return np.concatenate([np.array(edges, t.np_dtype),
                           rng.integers(info.min, info.max, n, dtype=t.np_dtype, endpoint=True),
                           rng.integers(-40 if info.min else 0, 40, n).astype(t.np_dtype)])


@pytest.mark.parametrize("target", [TARGET_V1, TARGET_TRUNC], ids=lambda t: t.backend)
@pytest.mark.parametrize("name", ["shl", "shr", "bit_and", "bit_or", "bit_xor"])
@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_shifts_and_bit_operations_lowered_exactly(device, name, t, target, rng):
    a = _ints(t, 150, rng)
    b = rng.permutation(_ints(t, 150, rng))
    if name in ("shl", "shr"):
        b = rng.integers(-70 if t is not T.uint32 else 0, 70, len(a)).astype(t.np_dtype)
    got = _run_lowered(device, name, [a, b], [t, t], target)
    np.testing.assert_array_equal(got, np.asarray(BUILTINS[name].eval(a, b)).astype(t.np_dtype))


@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_bit_not_lowered_exactly(device, t, rng):
    a = _ints(t, 200, rng)
    np.testing.assert_array_equal(_run_lowered(device, "bit_not", [a], [t], TARGET_V1), np.invert(a))


@pytest.mark.parametrize("target", [TARGET_V1, TARGET_FLOAT], ids=lambda t: t.backend)
@pytest.mark.parametrize("name", ["idiv", "irem"])
@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_truncating_division_lowered_exactly(device, name, t, target, rng):
    a, b = _ints(t, 200, rng), rng.permutation(_ints(t, 200, rng))
    info = np.iinfo(t.np_dtype)
    keep = (b != 0) & ~((a == info.min) & (b == -1)) if info.min else b != 0    # C leaves these undefined
    a, b = a[keep], b[keep]
    if target is TARGET_FLOAT and t is T.int64:
        with pytest.raises(NotDeclaredError, match="'floaty' does not declare 'idiv'"):
            _run_lowered(device, name, [a, b], [t, t], target)
        return
    got = _run_lowered(device, name, [a, b], [t, t], target)
    np.testing.assert_array_equal(got, np.asarray(BUILTINS[name].eval(a, b)).astype(t.np_dtype))


@pytest.mark.parametrize("t", (T.float32, T.float64), ids=lambda t: t.name)
def test_erf_lowered_within_2_ulp(device, t, rng):
    if t is T.float64 and not gk.get_device(device).info.properties.get("fp64", True):
        pytest.skip("the device has no float64")     # the float64 pieces need it (the c, numpy, cpu do)
    x = np.concatenate([rng.uniform(-7, 7, 3000), rng.uniform(-1e-3, 1e-3, 200), 10.0 ** rng.uniform(-300, 0, 200),
                        [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 6.0, -6.0, 5.999, 1e300, np.inf, -np.inf, np.nan]])
    with np.errstate(over="ignore"):                        # 1e300 is inf in float32
        x = x.astype(t.np_dtype)
    got = _run_lowered(device, "erf", [x], [t], TARGET_V1)
    want = np.array([math.erf(float(v)) if not np.isnan(v) else np.nan for v in x]).astype(t.np_dtype)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))      # erf(-0) = -0
    fin = ~np.isnan(want)
    ulps = np.abs(got[fin].astype(np.float64) - want[fin]) / np.spacing(np.abs(want[fin]).astype(t.np_dtype))
    assert ulps.max() <= 2, f"erf {t.name}: {ulps.max()} ULP at {x[fin][np.argmax(ulps)]!r}"


def _atomic_kernel(kind: str, exclusive: bool):
    k = K(x=A(T.float32), out=A(T.float32), old=A(T.float32))
    i = k.tid()
    v = k.b.load(k.x, [i], comp=0)
    zero = k.b.const(0, T.int32)
    idx = [i] if exclusive else [zero]
    r = k.b.atomic(kind, k.out, idx, v, comp=0, exclusive=exclusive)
    k.b.store(k.old, [i], r, comp=0)
    return k.fn(f"atomic_{kind}")


@pytest.mark.parametrize("kind", ["xchg", "min", "max"])
def test_exclusive_atomics_become_a_load_and_a_store(device, kind, rng):
    fn = _atomic_kernel(kind, exclusive=True)
    low = lower_capabilities(copy_function(fn), Target("plain", V1.primitives, frozenset({"add"})))
    assert not [ins for ins in low.walk() if ins.op == Op.ATOMIC]
    n = 64
    x0, out0 = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, out = gk.array(x0, device=device), gk.array(out0, device=device)
    old = gk.zeros(n, device=device)
    dev = gk.get_device(device)
    compiled = dev.impl.compile(dev.info, for_backend(low, dev.impl.native_prims), CompileOptions())
    dev.impl.launch(compiled, (n,), [x, out, old])
    dev.impl.synchronize(dev.info)
    want = {"xchg": x0, "min": np.minimum(out0, x0), "max": np.maximum(out0, x0)}[kind]
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(old.numpy(), out0)


def test_shared_atomics_need_cas_or_raise_naming_backend_and_feature():
    fn = _atomic_kernel("xchg", exclusive=False)
    with pytest.raises(NotDeclaredError) as err:
        lower_capabilities(copy_function(fn), Target("oldplugin", V1.primitives, V1.atomics))
    assert err.value.backend == "oldplugin" and err.value.feature == "atomic_xchg"
    assert "backend 'oldplugin' does not declare 'atomic_xchg'" in str(err.value)
    assert isinstance(err.value, gk.CompileError)
    low = lower_capabilities(copy_function(fn), Target("caslike", V1.primitives, V1.atomics, frozenset({"cas"})))
    (ins,) = [i for i in low.walk() if i.op == Op.ATOMIC]
    assert ins.attrs["kind"] == "xchg" and ins.attrs["cas"] is True


@pytest.mark.parametrize("t", (T.float32, T.float64), ids=lambda t: t.name)
def test_float_rem_lowered_to_exact_fmod(device, t, rng):
    big, tiny = np.finfo(t.np_dtype).max, np.finfo(t.np_dtype).tiny
    edges = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3, -7.25, 40.0, 8193.0, -1e5, 3e7, 1e20, -6.5e33,
                      big, -big, tiny / 8, np.inf, -np.inf, np.nan], t.np_dtype)
    a, b = (c.ravel() for c in np.meshgrid(edges, edges))
    a = np.concatenate([a, rng.uniform(-50, 50, 300).astype(t.np_dtype)])
    b = np.concatenate([b, rng.uniform(-5, 5, 300).astype(t.np_dtype)])
    got = _run_lowered(device, "rem", [a, b], [t, t], TARGET_V1)
    with np.errstate(all="ignore"):
        want = np.fmod(a, b)
    np.testing.assert_array_equal(got, want)                      # NaN where fmod is NaN, else exact
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))     # fmod(-4, 2) = -0


def test_without_a_fallback_the_error_names_the_feature():
    k = K(x=A(T.float32))
    k.b.emit(Op.PUSH, [k.b.load(k.x, [k.tid()], comp=0)], [], {"stack": 0})
    with pytest.raises(NotDeclaredError, match="backend 'nostack' does not declare 'stack'"):
        lower_capabilities(copy_function(k.fn("pushes")), Target("nostack", V1.primitives, V1.atomics))


def test_defaults_follow_the_history():
    assert HISTORY[-1].version == CONTRACT_VERSION
    assert "erf" not in V1.primitives and "xchg" not in V1.atomics and "floordiv" in V1.primitives
    v2 = defaults(2)
    assert {"erf", "idiv", "irem", "shl", "shr", "bit_and", "bit_not"} <= v2.primitives and "xchg" in v2.atomics
    assert "threads" not in v2.features and "threads" in everything().features
    for older, newer in zip(HISTORY, HISTORY[1:]):        # versions only add
        a, b = defaults(older.version), defaults(newer.version)
        assert a.primitives <= b.primitives and a.atomics <= b.atomics and a.features <= b.features


def test_capabilities_of_a_plugin():
    class Unversioned:
        name = "u"

    class Declared:
        name, contract_version = "d", 3
        capabilities = {"primitives": {"add", "mul"}}

    class Current:
        name, contract_version = "c", CONTRACT_VERSION

    assert capabilities_of(Unversioned()) == V1          # older than versioning: read as 1
    d = capabilities_of(Declared())
    assert d.primitives == {"add", "mul"} and d.atomics == everything().atomics
    assert capabilities_of(Current()) == everything()
    assert Capabilities(frozenset(), frozenset({"xchg"})).declares("atomic_xchg")
    assert target_of(Declared()).prims == {"add", "mul"}


def test_a_current_plugin_gets_its_ir_unchanged():
    fn, _ = _prim_kernel("erf", [T.float32])

    class Current:
        name, contract_version = "c", CONTRACT_VERSION

    class Old:
        name, contract_version = "o", 1

    assert lower_for(Current(), fn) is fn
    low = lower_for(Old(), fn)
    assert low is not fn and "erf" not in {i.attrs.get("name") for i in low.walk()}
    assert "erf" in {i.attrs.get("name") for i in fn.walk()}       # the input is left as it was


def test_builtin_backends_declare_the_whole_contract():
    from gradkit.backends import registry
    for name in ("cpu",):
        assert capabilities_of(registry.get_backend(name)) == everything()
