"""Helpers for the OpenCL backend tests (hand-built lowered IR, fake arrays), plus tests that need no
interesting kernel: device discovery and errors, memory, the program caches and build failures.

Every test_opencl_* module imports from here; they all skip only when no OpenCL device exists.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("pyopencl", reason="the OpenCL backend needs pyopencl: pip install pyopencl "
                                       "pocl-binary-distribution")

from gradkit.ad.pipeline import for_backend
from gradkit.backends.base import CompileOptions, DeviceInfo
from gradkit.backends.opencl import (
    OpenCLBackend,
    ops,
    program,
)
from gradkit.backends.opencl import backend as backend_mod
from gradkit.backends.opencl import devices as devices_mod
from gradkit.conformance import irkit
from gradkit.core import ir
from gradkit.core import types as T
from gradkit.core.errors import CompileError, DeviceError

BE = OpenCLBackend()
try:
    DEVICES = BE.devices()
except DeviceError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"no OpenCL device: {exc}", allow_module_level=True)
DEV = DEVICES[0]
F32, F64, I32, I64, U32, BOOL = T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_
NP_OF = {F32: np.float32, F64: np.float64, I32: np.int32, I64: np.int64, U32: np.uint32, BOOL: np.bool_}


def A(dtype, ndim: int = 1) -> T.ArrayType:
    return T.array_type(dtype, ndim)


class K(irkit.K):
    """A lowered kernel under construction (gradkit.conformance.irkit's), with `k.c(value)` constants."""

    def c(self, value, t=I32) -> ir.Value:
        return self.b.const(value, t)


def for_(b: ir.Builder, start, stop, step, inits: list, body) -> list:
    """`for iv in range(start, stop, step)` carrying `inits`; body(builder, iv, carried) -> new carried."""
    region = ir.Region(params=[ir.Value(start.type, "j")] + [ir.Value(v.type, "c") for v in inits])
    region.yields = list(body(b.at(region), region.params[0], region.params[1:]))
    return b.emit("for", [start, stop, step, *inits], [v.type for v in inits], regions=[region]).results


def if_(b: ir.Builder, cond, then, other, types: list) -> list:
    """An `if` yielding values of `types`; then/other(builder) -> values."""
    t, e = ir.Region(), ir.Region()
    t.yields, e.yields = list(then(b.at(t))), list(other(b.at(e)))
    return b.emit("if", [cond], types, regions=[t, e]).results


def while_(b: ir.Builder, inits: list, cond, body) -> list:
    """`while cond(carried): carried = body(carried)`; cond(builder, carried) -> bool value."""
    c = ir.Region(params=[ir.Value(v.type, "w") for v in inits])
    w = ir.Region(params=[ir.Value(v.type, "w") for v in inits])
    c.yields = [cond(b.at(c), c.params)]
    w.yields = list(body(b.at(w), w.params))
    return b.emit("while", inits, [v.type for v in inits], regions=[c, w]).results


def arr(data, dtype=None, shape=None) -> SimpleNamespace:
    """A fake runtime array on the OpenCL device holding a copy of `data` (`shape`: element shape, for
    vector dtypes whose trailing axis holds the components)."""
    data = np.ascontiguousarray(data, dtype=dtype)
    buf = BE.alloc(DEV, data.nbytes)
    BE.copy_from_host(DEV, buf, data)
    return SimpleNamespace(buffer=buf, shape=tuple(shape if shape is not None else data.shape),
                           np_dtype=data.dtype, full_shape=data.shape)


def host(a: SimpleNamespace) -> np.ndarray:
    out = np.empty(a.full_shape, a.np_dtype)
    BE.copy_to_host(DEV, a.buffer, out)
    return out


def compile_fn(fn: ir.Function, device: DeviceInfo = DEV, **options):
    """Compile hand-built scalar IR as the runtime would: after the backend stage (floored //, %, clamp, sign
    and integer abs expanded, core/passes/expand.py)."""
    return BE.compile(device, for_backend(fn, BE.native_prims), CompileOptions(**options))


def run(fn: ir.Function, dim, args, **options):
    """Compile and launch; returns the compiled kernel (its `.source` is the OpenCL C)."""
    compiled = compile_fn(fn, **options)
    BE.launch(compiled, dim if isinstance(dim, tuple) else (dim,), args)
    BE.synchronize(DEV)
    return compiled


def apply(name: str, inputs: list[np.ndarray], types: list, **attrs) -> np.ndarray:
    """Run prim `name` elementwise over `inputs` (one thread per element) and return the results."""
    (out,) = apply_all(inputs, types, [(name, list(range(len(inputs))), attrs)])
    return out


def apply_all(inputs: list[np.ndarray], types: list, calls: list[tuple]) -> list[np.ndarray]:
    """One kernel computing several prims elementwise: `calls` = [(name, input indices, attrs)], one
    output array each (fewer kernels to build keeps cold test runs short)."""
    k = K(**{f"x{j}": A(t) for j, t in enumerate(types)})
    i = k.tid()
    vals = [k.b.load(getattr(k, f"x{j}"), [i], comp=0) for j in range(len(types))]
    outs = []
    for m, (name, idx, attrs) in enumerate(calls):
        r = k.b.prim(name, *[vals[j] for j in idx], **attrs)
        p = ir.Param(f"out{m}", A(r.type))
        k.params.append(p)
        k.b.store(p.value, [i], r, comp=0)
        outs.append(arr(np.zeros(len(inputs[0]), NP_OF[r.type])))
    args = [arr(x, NP_OF[t]) for x, t in zip(inputs, types)]
    run(k.fn(f"prims_{calls[0][0]}"), len(inputs[0]), [*args, *outs])
    return [host(o) for o in outs]


# --------------------------------------------------------------------------- devices

def test_devices_are_named_in_order_with_properties():
    assert [d.name for d in DEVICES] == [f"opencl:{k}" for k in range(len(DEVICES))]
    for d in DEVICES:
        assert "(" in d.description and d.description.strip()
        for key in ("fp64", "compute_units", "max_work_group_size", "workgroup_size", "type"):
            assert key in d.properties
        assert d.properties["compute_units"] >= 1
        wg = d.properties["workgroup_size"]
        assert wg & (wg - 1) == 0 and wg <= d.properties["max_work_group_size"]
    kinds = [d.properties["type"] == "gpu" for d in DEVICES]
    assert kinds == sorted(kinds, reverse=True), "GPUs must come first"


def test_gpus_are_listed_first(monkeypatch):
    cl = devices_mod.cl

    def dev(name, kind):
        return SimpleNamespace(name=name, type=kind)

    plats = [SimpleNamespace(name="cpu-plat", get_devices=lambda: [dev("c0", cl.device_type.CPU)]),
             SimpleNamespace(name="empty", get_devices=lambda: (_ for _ in ()).throw(cl.RuntimeError("none"))),
             SimpleNamespace(name="gpu-plat", get_devices=lambda: [dev("g0", cl.device_type.GPU),
                                                                   dev("g1", cl.device_type.GPU)])]
    monkeypatch.setattr(cl, "get_platforms", lambda: plats)
    monkeypatch.setattr(devices_mod, "build_failure", lambda d: None)
    assert [d.name for d in devices_mod.discover()] == ["g0", "g1", "c0"]


def test_devices_whose_compiler_fails_are_left_out(monkeypatch):
    """PoCL 3.0 (LLVM 14) offers an AMD Zen 5 CPU but rejects every program built for it: such a device is
    not offered, and when no device is left the error names each one, its compiler's complaint and the fix."""
    cl = devices_mod.cl
    real = devices_mod.discover()
    broken = "error: unknown target CPU 'generic'"

    def dev(name):
        return SimpleNamespace(name=name, type=cl.device_type.CPU,
                               platform=SimpleNamespace(version="OpenCL 3.0 PoCL 3.0-rc2 LLVM 14.0.6"))

    plats = [SimpleNamespace(name="old-pocl", get_devices=lambda: [dev("pthread-old")]),
             SimpleNamespace(name="new-pocl", get_devices=lambda: [dev("pthread-new")])]
    monkeypatch.setattr(cl, "get_platforms", lambda: plats)
    monkeypatch.setattr(devices_mod, "build_failure", lambda d: broken if d.name == "pthread-old" else None)
    assert [d.name for d in devices_mod.discover()] == ["pthread-new"]
    monkeypatch.setattr(devices_mod, "build_failure", lambda d: broken)
    with pytest.raises(DeviceError, match=r"no OpenCL device can compile kernels: pthread-old \(.*PoCL 3.0.*\): "
                                          r"error: unknown target CPU 'generic'.*pthread-new.*pocl-opencl-icd"):
        devices_mod.discover()
    monkeypatch.undo()
    # the probe itself, on the real devices: each one offered builds the one-line kernel
    assert all(devices_mod.build_failure(d) is None for d in real)


def test_missing_pyopencl_is_a_device_error(monkeypatch):
    monkeypatch.setattr(devices_mod, "cl", None)
    with pytest.raises(DeviceError, match=r"pip install 'gradkit\[opencl\]' \(pyopencl and pocl-binary-distribution"):
        OpenCLBackend().devices()


def test_no_platform_or_device_is_a_device_error(monkeypatch):
    cl = devices_mod.cl

    def no_platform():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platform)
    with pytest.raises(DeviceError, match="no OpenCL platform.*pocl-binary-distribution.*driver"):
        OpenCLBackend().devices()
    monkeypatch.setattr(cl, "get_platforms", list)
    with pytest.raises(DeviceError, match=r"no OpenCL device.*pip install 'gradkit\[opencl\]'"):
        OpenCLBackend().devices()


# --------------------------------------------------------------------------- memory

def test_memory_round_trip_copy_and_zero():
    data = np.arange(1000, dtype=np.float32) * 0.5
    a = arr(data)
    assert a.buffer.nbytes == data.nbytes and BE.host_view(DEV, a.buffer) is None
    np.testing.assert_array_equal(host(a), data)
    fresh = BE.alloc(DEV, 4000)
    got = np.full(1000, 7, np.float32)
    BE.copy_to_host(DEV, fresh, got)
    assert not got.any(), "alloc must zero-fill"
    BE.copy(DEV, fresh, a.buffer, 2000)
    BE.copy_to_host(DEV, fresh, got)
    np.testing.assert_array_equal(got[:500], data[:500])
    assert not got[500:].any()
    BE.fill_zero(DEV, a.buffer, 6)         # not a multiple of 4: byte pattern
    np.testing.assert_array_equal(host(a)[2:], data[2:])
    assert host(a)[0] == 0 and host(a)[1].view(np.uint32) & 0xFFFF == 0
    empty = BE.alloc(DEV, 0)
    assert empty.nbytes == 0
    BE.copy_from_host(DEV, empty, np.zeros(0, np.float32))
    BE.copy_to_host(DEV, empty, np.zeros(0, np.float32))


# --------------------------------------------------------------------------- building and caching

def _scale_kernel(factor: float = 2.0) -> ir.Function:
    k = K(x=A(F32), y=A(F32))
    i = k.tid()
    k.b.store(k.y, [i], k.b.mul(k.b.load(k.x, [i], comp=0), k.c(factor, F32)), comp=0)
    return k.fn("scale")


class DictCache:
    def __init__(self):
        self.data: dict[str, bytes] = {}

    def get(self, key):
        return self.data.get(key)

    def put(self, key, data):
        self.data[key] = data


def test_source_and_memory_cache():
    fn = _scale_kernel(3.0)
    c1 = compile_fn(fn)
    src = BE.source(c1)
    assert "__kernel void" in src and "get_global_id(0)" in src and "0x1.8p+1f" in src
    state = c1.state
    before = len(state.programs)
    c2 = compile_fn(_scale_kernel(3.0))        # same source: built once per device
    assert len(state.programs) == before and c2.source == c1.source


def test_binary_disk_cache_and_corrupt_entry(monkeypatch):
    cache = DictCache()
    fn = _scale_kernel(5.0)
    OpenCLBackend().compile(DEV, fn, CompileOptions(cache=cache))
    (key,) = cache.data
    assert key.startswith("opencl-binary:") and cache.data[key]
    fresh = OpenCLBackend()            # empty in-memory caches: must load the binary
    built = []
    monkeypatch.setattr(program, "build_from_source", lambda *a: built.append(a) or pytest.fail("rebuilt"))
    c = fresh.compile(DEV, fn, CompileOptions(cache=cache))
    x, y = fresh.alloc(DEV, 32), fresh.alloc(DEV, 32)      # buffers of this backend's own context
    fresh.copy_from_host(DEV, x, np.arange(8, dtype=np.float32))
    fresh.launch(c, (8,), [SimpleNamespace(buffer=x, shape=(8,)), SimpleNamespace(buffer=y, shape=(8,))])
    got = np.zeros(8, np.float32)
    fresh.copy_to_host(DEV, y, got)
    np.testing.assert_array_equal(got, np.arange(8) * 5.0)
    monkeypatch.undo()

    cache.data[key] = b"\x7fELF this is not a program binary"
    monkeypatch.setattr(program, "_warned_corrupt", False)
    with pytest.warns(RuntimeWarning, match="unusable.*rebuilding"):
        c = OpenCLBackend().compile(DEV, fn, CompileOptions(cache=cache))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # warned once per process only
        cache.data[key] = b"junk"
        OpenCLBackend().compile(DEV, fn, CompileOptions(cache=cache))
    assert cache.data[key] != b"junk", "a rebuilt program replaces the corrupt entry"


def test_build_failure_is_a_compile_error_with_log_and_source(monkeypatch):
    monkeypatch.setitem(ops.CODE_FOR_OP, "mul", lambda a, t, at: f"({a[0]} *** {a[1]})")
    with pytest.raises(CompileError) as info:
        compile_fn(_scale_kernel(7.0))
    text = str(info.value)
    assert "in kernel 'scale'" in text and "generated OpenCL C" in text and "***" in text
    assert "error" in text.lower()          # the compiler's build log


def test_float64_on_a_device_without_fp64_is_a_compile_error():
    k = K(x=A(F64), y=A(F64))
    i = k.tid()
    k.b.store(k.y, [i], k.b.load(k.x, [i], comp=0), comp=0)
    no_fp64 = DeviceInfo(DEV.name, DEV.description, DEV.ordinal, dict(DEV.properties, fp64=False))
    with pytest.raises(CompileError, match=r"kernel 'copy64'.*lacks float64.*cl_khr_fp64"):
        BE.compile(no_fp64, k.fn("copy64"), CompileOptions())
    # a float32 kernel still compiles there (no float64 sneaks in, e.g. through reductions)
    k = K(x=A(F32), s=A(F32))
    k.b.atomic("add", k.s, [k.c(0)], k.b.load(k.x, [k.tid()], comp=0), comp=0)
    c = BE.compile(no_fp64, k.fn("sum32"), CompileOptions())
    assert "double" not in c.source and "cl_khr_fp64" not in c.source
    x, s = arr(np.ones(1000, np.float32)), arr(np.zeros(1, np.float32))
    BE.launch(c, (1000,), [x, s])
    assert host(s)[0] == 1000


def test_empty_launch_is_a_no_op():
    c = compile_fn(_scale_kernel())
    BE.launch(c, (0,), [arr(np.zeros(1, np.float32)), arr(np.zeros(1, np.float32))])
    BE.launch(c, (3, 0), [arr(np.zeros(1, np.float32)), arr(np.zeros(1, np.float32))])


def test_pre_bound_packer_and_unused_parameters():
    k = K(unused=A(F32), x=A(F32), s=F32, y=A(F32), flag=BOOL)
    i = k.tid()
    v = k.b.mul(k.b.load(k.x, [i], comp=0), k.s)
    k.b.store(k.y, [i], k.b.select(k.flag, v, k.b.neg(v)), comp=0)
    c = compile_fn(k.fn("packer"))
    assert "unused" not in c.source and "uchar p4_flag_arg" in c.source
    x, y = arr(np.arange(5, dtype=np.float32)), arr(np.zeros(5, np.float32))
    for flag, sign in ((True, 1), (np.bool_(False), -1)):
        BE.launch(c, (5,), [None, x, np.float32(1.5), y, flag])
        np.testing.assert_array_equal(host(y), sign * 1.5 * np.arange(5))


def test_kernel_work_group_limit_lowers_the_work_group(monkeypatch):
    cl = devices_mod.cl
    real = cl.Kernel.get_work_group_info

    def limited(self, param, dev):
        value = real(self, param, dev)
        return min(value, 8) if param == cl.kernel_work_group_info.WORK_GROUP_SIZE else value

    monkeypatch.setattr(cl.Kernel, "get_work_group_info", limited)
    k = K(x=A(F32), s=A(F32))
    k.b.atomic("add", k.s, [k.c(0)], k.b.load(k.x, [k.tid()], comp=0), comp=0)
    c = compile_fn(k.fn("limited"))
    assert c.workgroup <= 8 and f"reqd_work_group_size({c.workgroup}, 1, 1)" in c.source
    x, s = arr(np.ones(1001, np.float32)), arr(np.zeros(1, np.float32))
    BE.launch(c, (1001,), [x, s])
    assert host(s)[0] == 1001


def test_literals_are_exact():
    for v in (0.1, 1e-45, 5e-324, 123456.789, 3.4028234663852886e38, -2.5):
        assert float.fromhex(ops.literal(v, F32).strip("()f")) == float(np.float32(v))
        assert float.fromhex(ops.literal(v, F64).strip("()")) == v
        assert ops.literal(v, F32).endswith("f)")
    assert ops.literal(-0.0, F32) == "(-0x0p+0f)" and ops.literal(3.0, F64) == "(0x1.8p+1)"
    assert ops.literal(1e300, F32) == "INFINITY" and ops.literal(float("-inf"), F64) == "(-((double)INFINITY))"
    assert ops.literal(float("nan"), F32) == "NAN"
    assert ops.literal(-2**31, I32) == "(-2147483647-1)" and ops.literal(-2**63, I64).startswith("(-9223372036854775807L")
    assert ops.literal(2**32 - 1, U32) == "(4294967295u)" and ops.literal(True, BOOL) == "true"
    assert backend_mod.CLBuffer is not None


def test_cpu_devices_compute_float32_sin_through_double():
    k = K(x=A(F32), y=A(F32))
    i = k.tid()
    k.b.store(k.y, [i], k.b.prim("sin", k.b.load(k.x, [i], comp=0)), comp=0)
    src = compile_fn(k.fn("sine")).source
    cpu_fp64 = DEV.properties["type"] != "gpu" and DEV.properties["fp64"]
    assert ("(float)sin((double)" in src) == cpu_fp64
    assert "(float)sin(" not in ops.formatter(ops.op_table(False), "sin")(["x"], F32, {})


def test_launch_fast_path_stays_cheap():
    """Arguments are packed by a pre-built function; nothing is rebuilt or read back per launch."""
    import time
    c = compile_fn(_scale_kernel(9.0))
    x, y = arr(np.ones(16, np.float32)), arr(np.zeros(16, np.float32))
    BE.launch(c, (16,), [x, y])
    BE.synchronize(DEV)
    reps = 300
    t = time.perf_counter()
    for _ in range(reps):
        BE.launch(c, (16,), [x, y])
    BE.synchronize(DEV)
    per_launch = (time.perf_counter() - t) / reps
    assert per_launch < 1e-3, f"{per_launch * 1e6:.0f} us per launch"
    assert (host(y) == 9.0).all()
