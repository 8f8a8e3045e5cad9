"""Helpers for the LLVM backend tests (hand-built lowered IR, fake arrays), plus tests of the helpers'
subjects that need no kernel: memory, devices and the argument packer."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("llvmlite")

from gradkit.backends.base import CompileOptions  # noqa: E402
from gradkit.backends.llvm import LLVMBackend  # noqa: E402
from gradkit.backends.llvm.layout import analyze  # noqa: E402
from gradkit.core import ir  # noqa: E402
from gradkit.core import types as T  # noqa: E402

BE = LLVMBackend()
DEV = BE.devices()[0]
NP_OF = {T.float32: np.float32, T.float64: np.float64, T.int32: np.int32, T.int64: np.int64,
         T.uint32: np.uint32, T.bool_: np.bool_}


def arr(data, shape=None) -> SimpleNamespace:
    """A fake runtime array on the LLVM backend holding a copy of `data` (shape: element shape)."""
    data = np.ascontiguousarray(data)
    buf = BE.alloc(DEV, data.nbytes)
    BE.copy_from_host(DEV, buf, data)
    return SimpleNamespace(buffer=buf, shape=tuple(shape if shape is not None else data.shape), np_dtype=data.dtype,
                           full_shape=data.shape)


def host(a: SimpleNamespace) -> np.ndarray:
    """The live host view of a fake array, with its original dtype and shape."""
    return BE.host_view(DEV, a.buffer).view(a.np_dtype).reshape(a.full_shape)


class KernelBuilder:
    """Builds a lowered kernel by hand: parameters, then instructions through `.b` (an ir.Builder)."""

    def __init__(self, name: str = "k"):
        self.name, self.params, self.body = name, [], ir.Region()
        self.b = ir.Builder(self.body)

    def array(self, name: str, dtype, ndim: int = 1) -> ir.Value:
        p = ir.Param(name, T.array_type(dtype, ndim))
        self.params.append(p)
        return p.value

    def scalar(self, name: str, dtype) -> ir.Value:
        p = ir.Param(name, dtype)
        self.params.append(p)
        return p.value

    def tid(self, axis: int = 0, ndim: int = 1) -> ir.Value:
        return self.b.emit("tid", [], [T.int32], {"axis": axis, "ndim": ndim}, hint=f"t{axis}").result

    def function(self) -> ir.Function:
        fn = ir.Function(self.name, self.params, self.body, [])
        ir.verify(fn, scalar_only=True)
        return fn


def compile_fn(fn: ir.Function, **options):
    return BE.compile(DEV, fn, CompileOptions(**options))


def run(fn: ir.Function, dim, args, **options):
    """Compile (without a cache unless given) and launch once; returns the compiled kernel."""
    ck = compile_fn(fn, **options)
    BE.launch(ck, tuple(dim) if not isinstance(dim, int) else (dim,), args)
    return ck


def map_kernel(name: str, in_types, out_type, emit) -> ir.Function:
    """out[i] = emit(b, *ins[i]) over 1-D arrays."""
    kb = KernelBuilder(name)
    ins = [kb.array(f"x{k}", t) for k, t in enumerate(in_types)]
    out = kb.array("out", out_type)
    i = kb.tid()
    vals = [kb.b.load(a, [i], comp=0) for a in ins]
    kb.b.store(out, [i], emit(kb.b, *vals), comp=0)
    return kb.function()


def apply(name: str, in_types, out_type, emit, inputs: list[np.ndarray]) -> np.ndarray:
    """Run a map kernel over NumPy inputs and return the output array."""
    fn = map_kernel(name, in_types, out_type, emit)
    n = len(inputs[0])
    out = arr(np.zeros(n, NP_OF[out_type]))
    run(fn, n, [arr(x) for x in inputs] + [out])
    return host(out).copy()


# --------------------------------------------------------------------------- tests of the plumbing

def test_device_and_memory_roundtrip():
    assert DEV.name == "cpu" and "thread" in DEV.description
    buf = BE.alloc(DEV, 1000)
    assert buf.ptr % 64 == 0 and buf.nbytes == 1000 and not BE.host_view(DEV, buf).any()
    src = np.arange(250, dtype=np.float32)
    BE.copy_from_host(DEV, buf, src)
    out = np.empty(250, np.float32)
    BE.copy_to_host(DEV, buf, out)
    assert np.array_equal(out, src)
    other = BE.alloc(DEV, 1000)
    BE.copy(DEV, other, buf, 400)
    assert np.array_equal(BE.host_view(DEV, other).view(np.float32)[:100], src[:100])
    assert not BE.host_view(DEV, other)[400:].any()
    BE.fill_zero(DEV, buf, 1000)
    assert not BE.host_view(DEV, buf).any()
    assert BE.host_view(DEV, buf).ctypes.data == buf.ptr          # zero-copy
    assert BE.alloc(DEV, 0).nbytes == 0


def test_packer_layout():
    kb = KernelBuilder()
    a = kb.array("a", T.vec3, 2)
    kb.scalar("s", T.float32)
    kb.scalar("n", T.int64)
    kb.scalar("flag", T.bool_)
    i, j = kb.tid(0, 2), kb.tid(1, 2)
    kb.b.store(a, [i, j], kb.b.const(1.0, T.float32), comp=2)
    lay = analyze(kb.function())
    assert lay.grid_ndim == 2 and lay.slots == [2, 5, 6, 7]
    x = arr(np.zeros((3, 4, 3), np.float32), shape=(3, 4))
    block = np.frombuffer(lay.pack((3, 4), [x, 1.5, -7, True]), np.int64)
    assert list(block[:2]) == [3, 4] and block[2] == x.buffer.ptr and list(block[3:5]) == [3, 4]
    assert np.frombuffer(block[5:6].tobytes()[:4], np.float32)[0] == 1.5
    assert block[6] == -7 and block[7] == 1
