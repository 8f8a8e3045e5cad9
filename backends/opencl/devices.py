"""OpenCL device discovery and per-device state (context, in-order queue, built programs).

Every device of every platform is offered, GPUs first; `DeviceError` says what is missing and how to
get it when pyopencl or any OpenCL device is absent. A device's context and queue are made on first use.
"""

from __future__ import annotations

import threading

import numpy as np

from ...backends.base import DeviceInfo
from ...core.errors import DeviceError, format_bytes

try:
    import pyopencl as cl
except ImportError:     # reported when devices are asked for
    cl = None

INSTALL = ("pip install pyopencl pocl-binary-distribution (PoCL gives a CPU OpenCL device), or install "
           "your GPU vendor's OpenCL driver")

GPU_WORKGROUP = 256     # a multiple of every vendor's warp / wavefront width
CPU_WORKGROUP = 64      # PoCL on a CPU: see the measurements in backend.py's docstring


def discover() -> list:
    """Every OpenCL device of every platform, GPUs first (stable otherwise); DeviceError if none."""
    if cl is None:
        raise DeviceError(f"the OpenCL backend needs the pyopencl package, which is not installed: {INSTALL}")
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise DeviceError(f"no OpenCL platform found ({exc}); {INSTALL}") from None
    devices = []
    for platform in platforms:
        try:
            devices += platform.get_devices()
        except cl.Error:          # a platform without devices (e.g. a GPU driver with no GPU present)
            continue
    if not devices:
        names = ", ".join(p.name.strip() for p in platforms) or "none"
        raise DeviceError(f"no OpenCL device found (platforms: {names}); {INSTALL}")
    devices.sort(key=lambda d: 0 if d.type & cl.device_type.GPU else 1)
    return devices


def is_gpu(dev) -> bool:
    return bool(dev.type & cl.device_type.GPU)


def workgroup_size(dev) -> int:
    """The work-group size launches use: a power of two within the device's limit."""
    want = GPU_WORKGROUP if is_gpu(dev) else CPU_WORKGROUP
    return floor_pow2(min(want, dev.max_work_group_size))


def floor_pow2(n: int) -> int:
    return 1 << (max(int(n), 1).bit_length() - 1)


def extensions(dev) -> frozenset:
    return frozenset(dev.extensions.split())


def info(dev, ordinal: int) -> DeviceInfo:
    """The DeviceInfo for `dev` named "opencl:<ordinal>"."""
    ext = extensions(dev)
    return DeviceInfo(
        f"opencl:{ordinal}", f"{dev.name.strip()} ({dev.platform.name.strip()})", ordinal,
        {"fp64": "cl_khr_fp64" in ext, "compute_units": dev.max_compute_units,
         "max_work_group_size": dev.max_work_group_size, "workgroup_size": workgroup_size(dev),
         "type": "gpu" if is_gpu(dev) else "cpu" if dev.type & cl.device_type.CPU else "other",
         "int64_atomics": {"cl_khr_int64_base_atomics", "cl_khr_int64_extended_atomics"} <= ext,
         "global_mem_bytes": dev.global_mem_size, "platform": dev.platform.name.strip(),
         "driver_version": dev.driver_version, "opencl_version": dev.version})


def memory_limits(dev) -> str:
    """The device's allocation limits, for the error an allocation past them gets."""
    largest, total = format_bytes(dev.max_mem_alloc_size), format_bytes(dev.global_mem_size)
    return (f"its largest single buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE) is {largest} and its global memory "
            f"(CL_DEVICE_GLOBAL_MEM_SIZE) {total}")


PTX_PROBE = """
__kernel void probe(__global float* p, __global double* q) {
    float r; double s;
    asm volatile("atom.global.add.f32 %0, [%1], %2;" : "=f"(r) : "l"(p), "f"(1.0f) : "memory");
    asm volatile("atom.global.add.f64 %0, [%1], %2;" : "=d"(s) : "l"(q), "d"(1.0) : "memory");
}
"""


def _builds(ctx, source: str) -> bool:
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cl.Program(ctx, source).build()
        return True
    except cl.Error:
        return False


class DeviceState:
    """One device's context, in-order queue, built programs and fault record (made lazily)."""

    def __init__(self, dev) -> None:
        self.dev = dev
        self.ctx = cl.Context([dev])
        self.queue = cl.CommandQueue(self.ctx)
        self.extensions = extensions(dev)
        self.workgroup = workgroup_size(dev)
        self.programs: dict[str, object] = {}      # sha256(source, options) -> cl.Program
        self.lock = threading.RLock()              # launches set kernel arguments, then enqueue
        self.build_options: list[str] = []
        if dev.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
            # float32 `/` and sqrt correctly rounded, as NumPy and the CPU backend compute them
            self.build_options.append("-cl-fp32-correctly-rounded-divide-sqrt")
        self._fault = None
        self._ptx_atomics = None

    @property
    def ptx_atomics(self) -> bool:
        """Whether the device's compiler takes inline PTX float atomics (NVIDIA GPUs); probed once by
        building a one-line program, since drivers do not advertise it."""
        if self._ptx_atomics is None:
            self._ptx_atomics = "NVIDIA" in self.dev.vendor.upper() and _builds(self.ctx, PTX_PROBE)
        return self._ptx_atomics

    def identity(self) -> str:
        """What a program binary depends on besides its source: device, driver and platform versions."""
        d = self.dev
        return f"{d.name}|{d.vendor}|{d.driver_version}|{d.version}|{d.platform.version}"

    def fault_record(self):
        """The 5 × int64 fault record (zero-filled), allocated on first use."""
        if self._fault is None:
            buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size=40)
            cl.enqueue_fill_buffer(self.queue, buf, np.uint32(0), 0, 40)
            self._fault = buf
        return self._fault
