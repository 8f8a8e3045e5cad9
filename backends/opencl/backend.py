"""The OpenCL backend plugin (`opencl`): OpenCL C built and launched with pyopencl. On machines without a
GPU it runs on PoCL's CPU device (pocl-binary-distribution); on a GPU the same code runs unchanged."""

from __future__ import annotations

import hashlib
import threading
import warnings

import numpy as np

from ...backends.base import Backend, DeviceInfo, KernelFault, fault_error
from ...core.errors import CompileError, DeviceError
from ...core.ir import fingerprint
from .codegen import OpenCLCodegen

try:
    import pyopencl as cl
except ImportError:  # reported when devices are asked for
    cl = None

INSTALL = "pip install pyopencl pocl-binary-distribution (a CPU OpenCL device), or install a GPU vendor's OpenCL driver"


class CLBuffer:
    __slots__ = ("buf", "nbytes")

    def __init__(self, buf, nbytes):
        self.buf, self.nbytes = buf, nbytes


def workgroup_size(dev) -> int:
    """256 work-items per group on GPUs (a multiple of every vendor's warp/wavefront), 64 on CPU devices such as
    PoCL (fewer, larger groups amortise its per-group overhead), never above the device's limit (power of two)."""
    want = 256 if dev.type & cl.device_type.GPU else 64
    limit = dev.max_work_group_size
    while want > limit:
        want //= 2
    return max(want, 1)


class CompiledCL:
    def __init__(self, fn, options, device, kernel, source, workgroup):
        self.fn, self.options, self.device, self.kernel, self.source = fn, options, device, kernel, source
        self.workgroup = workgroup
        self.can_fault = options.debug or any(i.op == "push" for i in fn.walk())


class OpenCLBackend(Backend):
    """OpenCL devices, GPUs first: "opencl:0", "opencl:1", ..."""

    name = "opencl"

    def __init__(self) -> None:
        self._devs = None
        self._ctx: dict = {}
        self._lock = threading.Lock()

    def _cl_devices(self):
        if cl is None:
            raise DeviceError(f"the OpenCL backend needs pyopencl: {INSTALL}")
        if self._devs is None:
            try:
                platforms = cl.get_platforms()
            except cl.Error as exc:
                raise DeviceError(f"no OpenCL platform found ({exc}); {INSTALL}") from None
            devs = [d for p in platforms for d in p.get_devices()]
            if not devs:
                raise DeviceError(f"no OpenCL device found; {INSTALL}")
            devs.sort(key=lambda d: 0 if d.type & cl.device_type.GPU else 1)
            self._devs = devs
        return self._devs

    def devices(self):
        out = []
        for k, d in enumerate(self._cl_devices()):
            out.append(DeviceInfo(f"opencl:{k}", f"{d.name.strip()} ({d.platform.name.strip()})", k,
                                  {"fp64": "cl_khr_fp64" in d.extensions, "compute_units": d.max_compute_units,
                                   "max_work_group_size": d.max_work_group_size}))
        return out

    def _context(self, info):
        st = self._ctx.get(info.ordinal)
        if st is None:
            with self._lock:
                st = self._ctx.get(info.ordinal)
                if st is None:
                    dev = self._cl_devices()[info.ordinal]
                    ctx = cl.Context([dev])
                    st = self._ctx[info.ordinal] = {"ctx": ctx, "queue": cl.CommandQueue(ctx), "dev": dev,
                                                    "programs": {}, "fault": None}
        return st

    # Memory ---------------------------------------------------------------------
    def alloc(self, device, nbytes):
        st = self._context(device)
        buf = cl.Buffer(st["ctx"], cl.mem_flags.READ_WRITE, size=max(nbytes, 8))
        cl.enqueue_fill_buffer(st["queue"], buf, np.uint8(0), 0, max(nbytes, 8))
        return CLBuffer(buf, nbytes)

    def copy_from_host(self, device, dst, src):
        cl.enqueue_copy(self._context(device)["queue"], dst.buf, np.ascontiguousarray(src), is_blocking=True)

    def copy_to_host(self, device, src, dst):
        cl.enqueue_copy(self._context(device)["queue"], dst, src.buf, is_blocking=True)

    def copy(self, device, dst, src, nbytes):
        if nbytes:
            cl.enqueue_copy(self._context(device)["queue"], dst.buf, src.buf, byte_count=nbytes)

    def fill_zero(self, device, buf, nbytes):
        if nbytes:
            cl.enqueue_fill_buffer(self._context(device)["queue"], buf.buf, np.uint8(0), 0, nbytes)

    # Code -----------------------------------------------------------------------
    def compile(self, device, fn, options):
        st = self._context(device)
        name = f"gk_{fn.name}_{fingerprint(fn)[:12]}"
        wg = workgroup_size(st["dev"])
        source = OpenCLCodegen(fn, name, options.debug, options.stack_size, device.properties.get("fp64", False),
                               wg).build()
        from ... import __version__ as gradkit_version
        key = hashlib.sha256(f"{gradkit_version}|{source}|{st['dev'].name}|{st['dev'].driver_version}|"
                             f"{st['dev'].platform.version}".encode()).hexdigest()
        program = st["programs"].get(key)
        if program is None:
            program = self._build(st, source, key, options.cache, fn)
            st["programs"][key] = program
        return CompiledCL(fn, options, device, cl.Kernel(program, name), source, wg)

    def _build(self, st, source, key, cache, fn):
        ctx, dev = st["ctx"], st["dev"]
        if cache is not None:
            blob = cache.get("opencl:" + key)
            if blob is not None:
                try:
                    return cl.Program(ctx, [dev], [blob]).build()
                except Exception as exc:
                    warnings.warn(f"gradkit: ignoring an unusable OpenCL cache entry ({exc}); rebuilding")
        try:
            program = cl.Program(ctx, source).build()
        except cl.RuntimeError as exc:
            raise CompileError(f"in kernel '{fn.attrs.get('source_name', fn.name)}': OpenCL build failed:\n{exc}\n"
                               f"--- generated OpenCL C ---\n{source}") from None
        if cache is not None:
            try:
                cache.put("opencl:" + key, program.binaries[0])
            except Exception:
                pass
        return program

    def launch(self, compiled, dim, args):
        st = self._context(compiled.device)
        n = 1
        for d in dim:
            n *= d
        fault = st["fault"]
        if fault is None:
            fault = st["fault"] = cl.Buffer(st["ctx"], cl.mem_flags.READ_WRITE, size=32)
        if compiled.can_fault:
            cl.enqueue_fill_buffer(st["queue"], fault, np.int32(0), 0, 32)
        dims = list(dim) + [1] * (4 - len(dim))
        kargs = [fault, np.int64(n), *[np.int64(x) for x in dims]]
        for p, a in zip(compiled.fn.params, args):
            if p.type.is_array:
                kargs.append(a.buffer.buf)
                kargs += [np.int64(e) for e in a.shape]
            else:
                kargs.append(p.type.np_dtype.type(a))
        compiled.kernel.set_args(*kargs)
        wg = compiled.workgroup
        cl.enqueue_nd_range_kernel(st["queue"], compiled.kernel, ((n + wg - 1) // wg * wg,), (wg,))
        if compiled.can_fault:
            rec = np.zeros(8, np.int32)
            cl.enqueue_copy(st["queue"], rec, fault, is_blocking=True)
            if rec[0]:
                raise fault_error(compiled.fn, KernelFault(int(rec[0]), int(rec[1]), int(rec[2]), int(rec[3]),
                                                           int(rec[4])), compiled.options)

    def synchronize(self, device):
        self._context(device)["queue"].finish()

    def source(self, compiled):
        return compiled.source
