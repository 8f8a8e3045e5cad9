"""`CBackend`: the gradkit backend plugin interface on the system C compiler. Kernels become C through
gradkit's C-style emitter (codegen.py), are built into shared libraries (compiler.py), loaded with ctypes and
launched over host memory (memory.py). One device, "c"."""

from __future__ import annotations

import ctypes
import os
import re
import threading

import numpy as np

from gradkit.backends import CONTRACT_VERSION
from gradkit.backends.base import Backend, CompileOptions, DeviceInfo, KernelFault, fault_error
from gradkit.backends.host_memory import HostMemory
from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS
from gradkit.core.ir import Function, fingerprint

from . import compiler
from .codegen import CKernel

CHUNK = 1 << 22             # threads per call of a straight-line kernel (Ctrl-C is noticed between calls)
CHUNK_LOOPS = 1 << 14       # threads per call of a kernel with loops


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


class CompiledC:
    """A loaded kernel and its reusable argument block, with one pre-bound setter per parameter. Launches of
    one kernel take turns (`lock`): the block and the fault record are shared by them."""

    def __init__(self, fn: Function, options: CompileOptions, source: str, entry, kernel: CKernel):
        self.fn, self.options, self.source, self.entry = fn, options, source, entry
        self.can_fault = kernel.can_fault
        self.chunk = CHUNK_LOOPS if kernel.loops else CHUNK
        self.fault = np.zeros(8, np.int64)
        self.block = (ctypes.c_int64 * kernel.layout.size)()
        self.ptr = ctypes.addressof(self.block)
        self.as_f64 = (ctypes.c_double * kernel.layout.size).from_buffer(self.block)
        self.as_f32 = (ctypes.c_float * (2 * kernel.layout.size)).from_buffer(self.block)
        self.block[0] = self.fault.ctypes.data
        self.setters = [self._setter(slot, kind, t) for slot, kind, t in kernel.layout.slots]
        self.lock = threading.Lock()

    def _setter(self, slot: int, kind: str, t):
        block, f64, f32 = self.block, self.as_f64, self.as_f32
        if kind == "array":
            def set_array(a):
                block[slot] = a.buffer.ptr if a is not None else 0
                for k, extent in enumerate(a.shape if a is not None else (), start=slot + 1):
                    block[k] = extent
            return set_array
        if t is T.float64:
            def set_f64(v):
                f64[slot] = v
            return set_f64
        if t is T.float32:
            def set_f32(v):
                block[slot] = 0
                f32[2 * slot] = v
            return set_f32

        def set_int(v):
            block[slot] = int(v)
        return set_int

    def run(self, dim: tuple[int, ...], args: list, n: int) -> None:
        block = self.block
        for k in range(4):
            block[1 + k] = dim[k] if k < len(dim) else 1
        for setter, a in zip(self.setters, args):
            setter(a)
        if self.can_fault:
            self.fault[:] = 0
        for lo in range(0, n, self.chunk):
            self.entry(self.ptr, lo, min(lo + self.chunk, n))
        code = int(self.fault[:1].view(np.int32)[0]) if self.can_fault else 0
        if code:
            fault = KernelFault(code, *(int(v) for v in self.fault[1:5]))
            raise fault_error(self.fn, fault, self.options)


class CBackend(HostMemory, Backend):
    """Kernels as C built by the system compiler (`cc`, or $CC), OpenMP-parallel where it takes -fopenmp.
    Args: openmp (False: single-threaded; default: on unless GRADKIT_C_OPENMP=0), cc (the compiler)."""

    name = "c"
    # written against the contract as it stands: every primitive, atomic and feature of CONTRACT_VERSION
    contract_version = CONTRACT_VERSION
    adopt_align = 1             # generated C reads any C-contiguous host array (no aligned loads assumed)
    # The emitter spells every expandable prim itself (floored // and %, clamp, sign, integer abs, rsqrt).
    native_prims = frozenset(name for name, entry in BUILTINS.items() if entry.expand is not None)

    def __init__(self, openmp: bool | None = None, cc: str | None = None) -> None:
        self.openmp = os.environ.get("GRADKIT_C_OPENMP", "1") != "0" if openmp is None else openmp
        self.cc = cc

    def devices(self) -> list[DeviceInfo]:
        tool = compiler.toolchain(self.cc)
        parallel = self.openmp and tool.openmp
        threads = _threads() if parallel else 1
        how = f"OpenMP, {threads} threads" if parallel else "single-threaded" + (
            "" if tool.openmp else " (the compiler lacks OpenMP)")
        return [DeviceInfo("c", f"C via {tool.version}, {how}", 0,
                           {"fp64": True, "host_memory": True, "openmp": parallel, "threads": threads})]

    def compile(self, device: DeviceInfo, fn: Function, options: CompileOptions) -> CompiledC:
        tool = compiler.toolchain(self.cc)
        symbol = "gk_" + re.sub(r"\W", "_", fn.name)[:40] + "_" + fingerprint(fn)[:12]
        kernel = CKernel(fn, symbol, debug=options.debug, stack_size=options.stack_size, backend=self.name)
        source = kernel.build()
        flags = compiler.flags(tool, self.openmp, options.fast_math)
        entry = compiler.load(tool, source, symbol, flags, kernel.kernel_name)
        return CompiledC(fn, options, source, entry, kernel)

    def launch(self, compiled: CompiledC, dim: tuple[int, ...], args: list) -> None:
        n = 1
        for d in dim:
            n *= d
        if n <= 0:
            return
        with compiled.lock:
            compiled.run(tuple(dim), args, n)

    def synchronize(self, device: DeviceInfo) -> None:
        """Launches run to completion before returning: nothing to wait for."""

    def source(self, compiled: CompiledC) -> str:
        return compiled.source

    def conformance_snippets(self) -> dict:
        """The conformance suite's reference native functions in C (gradkit/conformance/suite/test_native.py):
        scalars by value, arrays as pointers to their flat data, `adj_<p>` accumulators in the adjoint."""
        return {
            "scaled_square": {"forward": "return a * x * x;", "replay": "return (a * x) * x;",
                              "adjoint": "adj_a += x * x * adj_ret; adj_x += 2.0f * a * x * adj_ret;"},
            "scale_into": {"forward": "out[i] = a * x[i];", "replay": "out[i] = a * x[i];",
                           "adjoint": "adj_a += x[i] * adj_out[i]; adj_x[i] += a * adj_out[i];"},
        }
