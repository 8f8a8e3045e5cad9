"""Warp's device names over gradkit's devices: "cpu" is gradkit's cpu; "cuda" / "cuda:N" are the
first (N-th) OpenCL device where gradkit has one, else the cpu, said once. `wp.get_device()` answers a
`Device` with Warp's attributes (`is_cuda`, `is_cpu`, `alias`, ...) around gradkit's."""

from __future__ import annotations

import sys

from ..runtime.launch import device as _dev

_noted: set = set()


def _note(message: str) -> None:
    if message not in _noted:
        _noted.add(message)
        print(f"gradkit.warp: {message}", file=sys.stderr)


def _opencl(ordinal: int):
    found = [d for d in _dev.get_devices() if d.backend == "opencl"]
    return found[ordinal] if ordinal < len(found) else (found[0] if found else None)


def to_gk(spec):
    """A gradkit device (or None: gradkit's current default) for Warp's device argument."""
    if spec is None:
        return None
    if isinstance(spec, Device):
        return spec.gk
    if isinstance(spec, _dev.Device):
        return spec
    if isinstance(spec, str) and (spec == "cuda" or spec.startswith("cuda:")):
        ordinal = int(spec.split(":")[1]) if ":" in spec else 0
        dev = _opencl(ordinal)
        if dev is None:
            _note(f"device '{spec}': gradkit has no OpenCL device here, running on 'cpu'")
            return _dev.get_device("cpu")
        _note(f"device '{spec}' is gradkit's '{dev.name}' ({dev.description})")
        return dev
    return _dev.get_device(spec)


class Device:
    """Warp's view of a gradkit device; compares equal to it and to its name."""

    def __init__(self, gk_device):
        self.gk = gk_device

    name = property(lambda self: self.gk.name)
    alias = property(lambda self: self.gk.name)
    ordinal = property(lambda self: self.gk.ordinal)
    is_cpu = property(lambda self: self.gk.backend == "cpu")
    is_cuda = property(lambda self: self.gk.backend == "opencl")   # where Warp's "cuda" lands
    is_mempool_enabled = False
    is_mempool_supported = False
    is_capturing = False
    arch = 0

    def __eq__(self, other) -> bool:
        return self.gk == (other.gk if isinstance(other, Device) else other)

    def __hash__(self) -> int:
        return hash(self.gk)

    def __str__(self) -> str:
        return self.gk.name

    def __repr__(self) -> str:
        return f"wp.Device({self.gk.name!r})"


def get_device(spec=None) -> Device:
    return Device(to_gk(spec) or _dev.get_device())


def get_preferred_device() -> Device:
    return get_device("cuda") if _opencl(0) is not None else get_device("cpu")


def get_cuda_devices() -> list:
    return [Device(d) for d in _dev.get_devices() if d.backend == "opencl"]


def get_cuda_device_count() -> int:
    return len(get_cuda_devices())


def is_cuda_available() -> bool:
    return bool(get_cuda_devices())


def set_device(spec) -> None:
    _dev.set_device(to_gk(spec) or _dev.get_device())


class ScopedDevice:
    """`with wp.ScopedDevice("cuda:0"):`; None keeps the current device, as in Warp."""

    def __init__(self, device):
        self._scope = _dev.ScopedDevice(to_gk(device) or _dev.get_device())

    def __enter__(self) -> Device:
        return Device(self._scope.__enter__())

    def __exit__(self, *exc) -> None:
        self._scope.__exit__(*exc)


def synchronize() -> None:
    _dev.synchronize()


def synchronize_device(device=None) -> None:
    _dev.synchronize(to_gk(device))
