"""Host memory a plugin can reuse: zero-filled, 64-byte aligned NumPy buffers exposing `ptr`/`nbytes` (so
gradkit's aliasing checks see overlaps, backends/analysis.py `shares_memory`), adoption of another
library's host array (zero-copy interop) and the copies of the Backend interface.

A backend whose device reads host memory mixes `HostMemory` in before `Backend`:

    class MyBackend(HostMemory, Backend): ...

and gets alloc, copy_from_host, copy_to_host, copy, fill_zero, host_view and adopt_host.
"""

from __future__ import annotations

import os

import numpy as np

from ..core.errors import allocation_error, format_bytes

ALIGN = 64


def physical_memory() -> int | None:
    """Bytes of RAM in this machine, when the OS says (for messages only)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


class HostBuffer:
    """A zero-filled, 64-byte aligned block of host memory (or, `adopt`ed, another library's): `data` (a
    uint8 view), its address `ptr` and size `nbytes`."""

    __slots__ = ("data", "ptr", "nbytes", "_owner")

    def __init__(self, nbytes: int):
        owner = np.zeros(nbytes + ALIGN, dtype=np.uint8)
        offset = (-owner.ctypes.data) % ALIGN
        self._owner = owner
        self.data = owner[offset:offset + nbytes]
        self.ptr = self.data.ctypes.data
        self.nbytes = nbytes

    @classmethod
    def adopt(cls, host: np.ndarray, align: int = ALIGN) -> "HostBuffer | None":
        """A buffer over `host`'s own memory (kept alive through it), when it is C-contiguous, writable and
        `align`-byte aligned as the backend's code assumes; else None (the caller copies)."""
        if not (host.flags.c_contiguous and host.flags.writeable) or host.ctypes.data % align:
            return None
        buf = object.__new__(cls)
        buf._owner = host
        buf.data = host.reshape(-1).view(np.uint8)
        buf.ptr, buf.nbytes = host.ctypes.data, host.nbytes
        return buf

    def __repr__(self) -> str:
        return f"<HostBuffer {self.nbytes} bytes>"


class HostMemory:
    """The memory half of the Backend interface for host memory. `adopt_align`: the alignment an adopted
    array needs (64: generated code may assume aligned rows; 1 takes any C-contiguous array)."""

    adopt_align: int = ALIGN

    def alloc(self, device, nbytes: int) -> HostBuffer:
        try:
            return HostBuffer(int(nbytes))
        except (MemoryError, ValueError, OverflowError):   # NumPy: out of memory / too many elements
            ram = physical_memory()
            raise allocation_error(nbytes, device.name, "the host cannot provide it" + (
                f" (this machine has {format_bytes(ram)} of RAM)" if ram else "")) from None

    def copy_from_host(self, device, dst: HostBuffer, src: np.ndarray) -> None:
        dst.data[:src.nbytes] = np.ascontiguousarray(src).reshape(-1).view(np.uint8)

    def copy_to_host(self, device, src: HostBuffer, dst: np.ndarray) -> None:
        dst.reshape(-1).view(np.uint8)[:] = src.data[:dst.nbytes]

    def copy(self, device, dst: HostBuffer, src: HostBuffer, nbytes: int) -> None:
        dst.data[:nbytes] = src.data[:nbytes]

    def fill_zero(self, device, buf: HostBuffer, nbytes: int) -> None:
        buf.data[:nbytes] = 0

    def host_view(self, device, buf: HostBuffer) -> np.ndarray:
        return buf.data

    def adopt_host(self, device, host: np.ndarray) -> HostBuffer | None:
        """A buffer sharing `host`'s memory (zero-copy interop), or None when it cannot be shared."""
        return HostBuffer.adopt(host, self.adopt_align)
