"""Host memory for the c plugin: zero-filled, 64-byte aligned NumPy buffers, so gradkit arrays on the device
are zero-copy NumPy views and generated code reads them through plain pointers."""

from __future__ import annotations

import numpy as np

from gradkit.core.errors import allocation_error

ALIGN = 64


class HostBuffer:
    """A block of host memory: `data` (a uint8 view), its address `ptr` and size `nbytes`."""

    __slots__ = ("_owner", "data", "nbytes", "ptr")

    def __init__(self, nbytes: int, owner: np.ndarray | None = None):
        if owner is None:
            owner = np.zeros(nbytes + ALIGN, dtype=np.uint8)
            offset = (-owner.ctypes.data) % ALIGN
            data = owner[offset:offset + nbytes]
        else:
            data = owner.reshape(-1).view(np.uint8)
        self._owner, self.data, self.nbytes = owner, data, nbytes
        self.ptr = data.ctypes.data

    def __repr__(self) -> str:
        return f"<HostBuffer {self.nbytes} bytes>"


class HostMemory:
    """The memory half of the Backend interface, on host memory."""

    def alloc(self, device, nbytes: int) -> HostBuffer:
        try:
            return HostBuffer(int(nbytes))
        except (MemoryError, ValueError, OverflowError):
            raise allocation_error(nbytes, device.name, "the host cannot provide it") from None

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
        """A buffer over `host`'s own memory (zero-copy sharing with PyTorch/JAX) when it is C-contiguous and
        writable; else None (gradkit copies)."""
        if not (host.flags.c_contiguous and host.flags.writeable):
            return None
        return HostBuffer(host.nbytes, owner=host)
