"""The OpenCL backend plugin (`opencl`): lowered IR → OpenCL C (codegen.py), built and launched with pyopencl.

Devices are every OpenCL device of every platform, GPUs first ("opencl:0", "opencl:1", ...). Without a
GPU, PoCL (pocl-binary-distribution) offers the host CPU as an OpenCL device; the same code runs on a
GPU unchanged. One context and in-order queue per device, made on first use.

Launches bind arguments through pyopencl's generated setter (scalar types declared once per compiled
kernel, `set_scalar_arg_dtypes`) and enqueue a 1-D NDRange of n threads rounded up to the device's
work-group size. Only kernels that can fault (debug bounds checks, value stack) take the fault record,
which is read back after their launch; other launches stay asynchronous until `synchronize`.

Measured on PoCL 3 (pocl-binary-distribution), 2 x86 cores, 2^24 float32:
  W1 y = sin(x)*x + 0.5*x*x: 166 ms (PoCL's float32 sin dominates: 250 ms before computing it through
     double, 12 ms for the kernel without sin); work-group sizes 16..1024 all within noise.
  W2 atomic_add(loss, 0, x*x): 22 ms as a work-group reduction (relative error 7e-6), 520 ms with one
     compare-and-swap per thread (relative error 2e-2, float32 accumulation order); 64 per group is where
     W2 stopped improving, so CPU devices get 64, GPUs 256.
  W3 backward (n-body, 2048 bodies): its adds onto adj_x[j], the same element for every thread at each
     iteration, queued and summed per work-group (aggregate.py): 17-34 ms against 20-35 ms with plain
     atomics, interleaved in one process on a loaded machine (never slower in 5 runs). The target is a GPU,
     which serialises the 4M same-address atomics (H100: 2.91 ms against JAX's 0.097 ms before).
  Launch of a tiny kernel: 6.5 us asynchronous (4 us of it in clEnqueueNDRangeKernel, 0.8 us setting
     arguments, 0.2 us packing them).
"""

from __future__ import annotations

import re
import threading

import numpy as np

from ...backends.base import Backend, CompileOptions, DeviceInfo, KernelFault, fault_error
from ...backends.capabilities import CONTRACT_VERSION
from ...core.errors import DeviceError, allocation_error
from ...core.ir import Function, fingerprint
from ...core.locks import fork_safe
from ...core.ops import LOOPS
from . import devices as D
from .codegen import Codegen, Generated
from .devices import DeviceState, cl
from .ops import op_table
from .program import get_program


class CLBuffer:
    """Device memory: a `cl.Buffer` of at least one byte (OpenCL has no empty buffers) and its size."""

    __slots__ = ("buf", "nbytes")

    def __init__(self, buf, nbytes: int) -> None:
        self.buf, self.nbytes = buf, nbytes

    def __repr__(self) -> str:
        return f"<CLBuffer {self.nbytes} bytes>"


CHUNK_MAX = 1 << 22          # threads per enqueue of a straight-line kernel (PoCL: ~40 ms of W1)
CHUNK_MAX_LOOPS = 1 << 14    # threads per enqueue of a kernel with loops


class CompiledCL:
    """A built kernel with its pre-bound argument packing (see `make_packer`)."""

    def __init__(self, fn: Function, options: CompileOptions, device: DeviceInfo, state: DeviceState,
                 kernel, gen: Generated) -> None:
        self.fn, self.options, self.device, self.state, self.kernel = fn, options, device, state, kernel
        self.source, self.workgroup, self.can_fault, self.ndims = gen.source, gen.workgroup, gen.can_fault, gen.ndims
        self.pack = make_packer(fn, gen)
        loops = any(i.op in LOOPS for i in fn.walk())
        step = CHUNK_MAX_LOOPS if loops else CHUNK_MAX       # threads per enqueue of a large launch
        self.chunk_max = max(step // self.workgroup, 1) * self.workgroup
        kernel.set_scalar_arg_dtypes(arg_dtypes(fn, gen))


def arg_dtypes(fn: Function, gen: Generated) -> list:
    """Per kernel argument: None for a buffer, else the NumPy dtype pyopencl packs the value as."""
    out: list = [None] if gen.can_fault else []
    out += [np.int64] * (1 + gen.ndims)
    for entry in gen.args:
        out.append(None if entry[0] == "buffer" else np.int64 if entry[0] == "extent" else np.dtype(entry[2]))
    return out


def make_packer(fn: Function, gen: Generated):
    """A generated function (args, n, dims) -> tuple of kernel arguments (fault record added by launch)."""
    parts = ["n"] + [f"dims[{k}]" for k in range(gen.ndims)]
    for entry in gen.args:
        p = entry[1]
        if entry[0] == "buffer":
            parts.append(f"args[{p}].buffer.buf")
        elif entry[0] == "extent":
            parts.append(f"args[{p}].shape[{entry[2]}]")
        elif fn.params[p].type.is_bool:
            parts.append(f"(1 if args[{p}] else 0)")
        else:
            parts.append(f"args[{p}]")
    src = f"def pack(args, n, dims):\n    return ({', '.join(parts)},)\n"
    namespace: dict = {}
    exec(compile(src, f"<gradkit opencl packer {gen.name}>", "exec"), namespace)  # noqa: S102 (our own code)
    return namespace["pack"]


class OpenCLBackend(Backend):
    """OpenCL devices, GPUs first: "opencl:0", "opencl:1", ..."""

    name = "opencl"
    contract_version = CONTRACT_VERSION     # built in: implements the whole contract, as it stands

    def conformance_snippets(self) -> dict:
        """The conformance suite's native snippets for this backend (backends/native_snippets.py)."""
        from ..native_snippets import OPENCL
        return OPENCL

    def __init__(self) -> None:
        self._devs: list | None = None
        self._infos: list[DeviceInfo] | None = None
        self._states: dict[int, DeviceState] = {}
        self._lock = fork_safe(threading.Lock())

    # Devices ---------------------------------------------------------------------
    def devices(self) -> list[DeviceInfo]:
        if self._infos is None:
            self._devs = D.discover()
            self._infos = [D.info(d, k) for k, d in enumerate(self._devs)]
        return list(self._infos)

    def _state(self, device: DeviceInfo) -> DeviceState:
        D.check_process(device.name)
        st = self._states.get(device.ordinal)
        if st is None:
            with self._lock:
                st = self._states.get(device.ordinal)
                if st is None:
                    self.devices()
                    if not 0 <= device.ordinal < len(self._devs):
                        raise DeviceError(f"no OpenCL device {device.name!r} (found {len(self._devs)})")
                    st = self._states[device.ordinal] = DeviceState(self._devs[device.ordinal])
        return st

    # Memory ----------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> CLBuffer:
        st = self._state(device)
        size = max(int(nbytes), 1)
        if size > st.dev.max_mem_alloc_size:        # the driver's answer would be INVALID_BUFFER_SIZE
            raise allocation_error(nbytes, device.name, D.memory_limits(st.dev))
        try:
            buf = cl.Buffer(st.ctx, cl.mem_flags.READ_WRITE, size=size)
        except cl.Error as exc:
            raise allocation_error(nbytes, device.name, f"{D.memory_limits(st.dev)}; the driver said {exc}") \
                from None
        try:        # many drivers only find out at first use that the memory is not there
            _fill_zero(st.queue, buf, size)
        except cl.Error as exc:
            buf.release()
            raise allocation_error(nbytes, device.name, f"{D.memory_limits(st.dev)}; the driver said {exc}") \
                from None
        return CLBuffer(buf, int(nbytes))

    def copy_from_host(self, device: DeviceInfo, dst: CLBuffer, src: np.ndarray) -> None:
        if src.nbytes:
            cl.enqueue_copy(self._state(device).queue, dst.buf, np.ascontiguousarray(src), is_blocking=True)

    def copy_to_host(self, device: DeviceInfo, src: CLBuffer, dst: np.ndarray) -> None:
        if dst.nbytes:
            cl.enqueue_copy(self._state(device).queue, dst, src.buf, is_blocking=True)

    def copy(self, device: DeviceInfo, dst: CLBuffer, src: CLBuffer, nbytes: int) -> None:
        if nbytes:
            cl.enqueue_copy(self._state(device).queue, dst.buf, src.buf, byte_count=int(nbytes))

    def fill_zero(self, device: DeviceInfo, buf: CLBuffer, nbytes: int) -> None:
        if nbytes:
            _fill_zero(self._state(device).queue, buf.buf, int(nbytes))

    def host_view(self, device: DeviceInfo, buf: CLBuffer) -> None:
        return None      # device memory: the runtime copies

    # Code ------------------------------------------------------------------------
    def compile(self, device: DeviceInfo, fn: Function, options: CompileOptions) -> CompiledCL:
        st = self._state(device)
        fp64 = bool(device.properties.get("fp64", "cl_khr_fp64" in st.extensions))
        name = "gk_" + re.sub(r"\W", "_", fn.name)[:40] + "_" + fingerprint(fn)[:12]
        kernel_name = fn.attrs.get("source_name", fn.name)
        wg = st.workgroup
        while True:
            gen = Codegen(fn, name, debug=options.debug, stack_size=options.stack_size, fp64=fp64,
                          device_extensions=st.extensions, workgroup=wg,
                          tree_reduction=D.is_gpu(st.dev), ptx_atomics=st.ptx_atomics,
                          local_mem=st.dev.local_mem_size,
                          ops=op_table(fp64 and not D.is_gpu(st.dev)), proven=options.proven).build()
            program = get_program(st, gen.source, kernel_name, options.cache, options.fast_math)
            kernel = cl.Kernel(program, name)
            limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, st.dev)
            if limit >= wg or wg == 1:
                break
            wg = D.floor_pow2(limit)      # e.g. a big value stack leaves fewer registers per work-item
        return CompiledCL(fn, options, device, st, kernel, gen)

    def launch(self, compiled: CompiledCL, dim: tuple[int, ...], args: list) -> None:
        n = 1
        for d in dim:
            n *= d
        if n <= 0:
            return
        dims = tuple(dim) + (1,) * (compiled.ndims - len(dim))
        packed = compiled.pack(args, n, dims)
        st = compiled.state
        if st.pid != D.PID:         # made by the process this one was forked from
            D.check_process(compiled.device.name)
        if not compiled.can_fault:
            _enqueue(compiled, n, packed)
            return
        with st.lock:
            rec = st.fault_record()
            _enqueue(compiled, n, (rec, *packed))
            out = np.zeros(5, np.int64)
            cl.enqueue_copy(st.queue, out, rec, is_blocking=True)
            code = int(out[:1].view(np.int32)[0])
            if code:
                _fill_zero(st.queue, rec, 40)
        if code:
            fault = KernelFault(code, int(out[1]), int(out[2]), int(out[3]), int(out[4]))
            raise fault_error(compiled.fn, fault, compiled.options)

    def synchronize(self, device: DeviceInfo) -> None:
        self._state(device).queue.finish()

    def source(self, compiled: CompiledCL) -> str:
        return compiled.source


def _enqueue(compiled: CompiledCL, n: int, packed: tuple) -> None:
    """Enqueue n threads: at once when they fit one chunk (the launch stays asynchronous), else chunk by chunk
    at growing global offsets with at most two chunks in flight, so Ctrl-C is noticed between chunks; an
    interrupted launch lets its enqueued chunks finish before KeyboardInterrupt propagates."""
    st, wg = compiled.state, compiled.workgroup
    step = compiled.chunk_max
    if n <= step:
        with st.lock:
            compiled.kernel(st.queue, ((n + wg - 1) // wg * wg,), (wg,), *packed)
        return
    in_flight: list = []
    try:
        for lo in range(0, n, step):
            size = min(step, n - lo)
            with st.lock:
                in_flight.append(compiled.kernel(st.queue, ((size + wg - 1) // wg * wg,), (wg,), *packed,
                                                 global_offset=(lo,)))
            if len(in_flight) > 1:
                in_flight.pop(0).wait()
    except BaseException:
        st.queue.finish()
        raise


def _fill_zero(queue, buf, nbytes: int) -> None:
    pattern = np.uint32(0) if nbytes % 4 == 0 else np.uint8(0)
    cl.enqueue_fill_buffer(queue, buf, pattern, 0, nbytes)
