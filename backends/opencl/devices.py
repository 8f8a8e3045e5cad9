"""OpenCL device discovery and per-device state (context, in-order queue, built programs).

Every device of every platform whose compiler builds a one-line kernel is offered, GPUs first;
`DeviceError` says what is missing and how to get it when pyopencl or any usable OpenCL device is absent.
A device's context and queue are made on first use.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from ...backends.base import DeviceInfo
from ...core.errors import DeviceError, format_bytes
from ...core.locks import fork_safe

try:
    import pyopencl as cl
except ImportError:     # reported when devices are asked for
    cl = None

INSTALL = ("pip install 'gradkit[opencl]' (pyopencl and pocl-binary-distribution: PoCL gives a CPU OpenCL device), or install "
           "your GPU vendor's OpenCL driver")
NEWER_POCL = ("a PoCL whose LLVM knows this CPU, e.g. Debian's pocl-opencl-icd (`make test` installs it as root "
              "when needed)")

GPU_WORKGROUP = 256     # a multiple of every vendor's warp / wavefront width
CPU_WORKGROUP = 64      # PoCL on a CPU: see the measurements in backend.py's docstring

# Fork: OpenCL drivers do not survive fork() (their threads and locks stay behind), so a child forked after
# its parent initialised OpenCL would hang at its first OpenCL call; `check_process` refuses instead.
# PID is this process's id, kept current in a forked child by an at-fork hook: comparing it costs a launch
# ~15 ns, where os.getpid() (a system call) costs ~0.4 us here.
PID = os.getpid()
opened_in: int | None = None    # the process that initialised OpenCL (its first discovery), if any


def _after_fork_in_child() -> None:
    global PID
    PID = os.getpid()


if hasattr(os, "register_at_fork"):      # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_process(device: str) -> None:
    """DeviceError when OpenCL was initialised by the process this one was forked from."""
    if opened_in is not None and opened_in != PID:
        raise DeviceError(
            f"{device}: OpenCL was initialised in process {opened_in}, and this process ({PID}) was forked from "
            "it; OpenCL drivers do not survive fork(), so OpenCL cannot be used here (it would hang). Start "
            "worker processes with multiprocessing's 'spawn' or 'forkserver' start method "
            "(multiprocessing.get_context('spawn')), or do not touch OpenCL in the parent before forking "
            "(gk.get_devices() counts: listing devices initialises OpenCL)")


def discover() -> list:
    """Every usable OpenCL device of every platform, GPUs first (stable otherwise); DeviceError if none.

    A device whose compiler cannot build a one-line kernel is left out: PoCL 3.0 (LLVM 14, the wheel
    pocl-binary-distribution ships) offers CPUs newer than its LLVM (AMD Zen 5) and then rejects every
    program ("unknown target CPU 'generic'"), so offering it would only fail later, at the first launch."""
    global opened_in
    if cl is None:
        raise DeviceError(f"the OpenCL backend needs the pyopencl package, which is not installed: {INSTALL}")
    check_process("opencl")
    opened_in = PID
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise DeviceError(f"no OpenCL platform found ({exc}); {INSTALL}") from None
    found = []
    for platform in platforms:
        try:
            found += platform.get_devices()
        except cl.Error:          # a platform without devices (e.g. a GPU driver with no GPU present)
            continue
    if not found:
        names = ", ".join(p.name.strip() for p in platforms) or "none"
        raise DeviceError(f"no OpenCL device found (platforms: {names}); {INSTALL}")
    failures = [build_failure(d) for d in found]
    devices = [d for d, failure in zip(found, failures) if failure is None]
    if not devices:
        why = "; ".join(dict.fromkeys(f"{d.name.strip()} ({d.platform.version.strip()}): {failure}"
                                      for d, failure in zip(found, failures)))
        raise DeviceError(f"no OpenCL device can compile kernels: {why}. Install {NEWER_POCL}, or {INSTALL}")
    devices.sort(key=lambda d: 0 if d.type & cl.device_type.GPU else 1)
    return devices


PROBE = "__kernel void gk_probe(__global float* p) { p[get_global_id(0)] += 1.0f; }"


def build_failure(dev) -> str | None:
    """None when `dev`'s compiler builds a one-line kernel, else the first line of its build log."""
    ctx = cl.Context([dev])
    program = cl.Program(ctx, PROBE)
    try:
        _quiet_build(program, [dev])
        return None
    except cl.Error as exc:
        try:
            log = program.get_build_info(dev, cl.program_build_info.LOG).strip()
        except cl.Error:
            log = ""
        lines = [line for line in (log or str(exc)).splitlines() if line.strip()]
        return lines[0] if lines else "the build failed"


def _quiet_build(program, devices=None):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # PoCL's compiler chatter; failures still raise
        return program.build(devices=devices)


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
    try:
        _quiet_build(cl.Program(ctx, source))
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
        self.lock = fork_safe(threading.RLock())   # launches set kernel arguments, then enqueue
        self.pid = PID                             # the process that made the context and queue
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
