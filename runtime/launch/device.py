"""Devices: `gk.Device`, device specs ("cpu", "opencl", "opencl:1", "foo:0") and the default device.

A Device pairs a backend plugin (its Backend object, `impl`) with one of the DeviceInfo
records that plugin reports (`info`). Device objects are cached, so the same name always
gives the same object and the launch path can compare devices by identity.
"""

from __future__ import annotations

import threading

from ...backends import registry
from ...core.errors import DeviceError
from ...core.locks import fork_safe

DEFAULT_SPEC = "cpu"


class Device:
    """One device of one backend plugin. Compares and hashes by `name` (equal to its name string too).
    Made by gradkit (`gk.get_device`, `gk.get_devices`), not by users.

    Args:
        name: what `device=` takes: "cpu", "opencl:0", "foo:1".
        backend: the plugin's registry name ("cpu", "opencl", ...).
        impl: the Backend object that runs it (internal).
        info: its DeviceInfo: `description` and the backend's `properties` (for OpenCL: type, fp64, memory,
            platform, driver version, ...).
        ordinal: its index among the plugin's devices."""

    __slots__ = ("name", "backend", "description", "ordinal", "impl", "info", "__weakref__")

    def __init__(self, name: str, backend: str, impl, info, ordinal: int):
        self.name = name                      # "cpu", "opencl:0", "foo:1"
        self.backend = backend                # the plugin's registry name
        self.description = info.description   # human readable, e.g. the OpenCL device name
        self.ordinal = ordinal                # index among the plugin's devices
        self.impl = impl                      # the Backend object (internal)
        self.info = info                      # its DeviceInfo (internal)

    def __eq__(self, other) -> bool:
        if isinstance(other, Device):
            return self.name == other.name
        if isinstance(other, str):
            return self.name == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Device({self.name!r}, backend={self.backend!r}, description={self.description!r})"


_lock = fork_safe(threading.RLock())
_by_name: dict[str, Device] = {}        # device name -> Device
_by_spec: dict[str, Device] = {}        # every spec string resolved so far -> Device
_backend_devices: dict[str, list[Device]] = {}
_backend_errors: dict[str, DeviceError] = {}   # plugins that listed no device (asked once)
_default: Device | None = None          # set_device() / ScopedDevice; None means DEFAULT_SPEC


def _invalidate(backend_name: str | None) -> None:
    """Drop the Devices cached for plugin `backend_name` (all when None): it was (un)registered."""
    global _default

    def stale(dev: Device) -> bool:
        return backend_name is None or dev.backend == backend_name

    with _lock:
        for table in (_by_name, _by_spec):
            for key in [k for k, d in table.items() if stale(d)]:
                del table[key]
        for table in (_backend_devices, _backend_errors):
            for key in [k for k in table if backend_name is None or k == backend_name]:
                del table[key]
        if _default is not None and stale(_default):
            _default = None


registry.on_change(_invalidate)


def _devices_of(backend_name: str) -> list[Device]:
    """Every Device of plugin `backend_name` (DeviceError if the plugin is missing, broken or has none)."""
    devs = _backend_devices.get(backend_name)
    if devs is not None:
        return devs
    error = _backend_errors.get(backend_name)
    if error is not None:
        raise DeviceError(str(error))
    with _lock:
        impl = registry.get_backend(backend_name)
        try:
            infos = list(impl.devices())
        except Exception as exc:
            if not isinstance(exc, DeviceError):
                exc = DeviceError(f"gradkit backend '{backend_name}' could not list its devices: "
                                  f"{type(exc).__name__}: {exc}{_hint(backend_name)}")
            _backend_errors[backend_name] = exc
            raise exc from None
        if not infos:
            _backend_errors[backend_name] = DeviceError(
                f"gradkit backend '{backend_name}' found no usable device{_hint(backend_name)}")
            raise DeviceError(str(_backend_errors[backend_name]))
        devs = []
        for k, info in enumerate(infos):
            name = info.name or (backend_name if len(infos) == 1 else f"{backend_name}:{k}")
            dev = _by_name.get(name)
            if dev is None:
                dev = _by_name[name] = Device(name, backend_name, impl, info, k)
            devs.append(dev)
        _backend_devices[backend_name] = devs
        return devs


def _hint(backend_name: str) -> str:
    hint = registry.INSTALL_HINTS.get(backend_name)
    return f". To get one: {hint}" if hint else ""


def _resolve(spec: str) -> Device:
    """Parse "name" / "name:N" into a Device (slow path; results are cached by spec)."""
    text = spec.strip()
    backend_name, sep, ordinal_text = text.partition(":")
    if not backend_name:
        raise ValueError(f"device spec must look like 'cpu', 'opencl' or 'opencl:1', got {spec!r}")
    if sep:
        try:
            ordinal = int(ordinal_text)
        except ValueError:
            raise ValueError(f"device spec {spec!r}: the part after ':' must be a device number") from None
    else:
        ordinal = 0
    devs = _devices_of(backend_name)
    for dev in devs:
        if dev.name == text:
            return dev
    if not 0 <= ordinal < len(devs):
        names = ", ".join(d.name for d in devs)
        raise DeviceError(f"device {spec!r} does not exist: backend '{backend_name}' has {len(devs)} "
                          f"device(s): {names}")
    return devs[ordinal]


def get_device(spec=None) -> Device:
    """The Device for `spec`: None → the current default ("cpu" unless set), a Device passes through,
    "opencl" → the first OpenCL device, "opencl:N" → the N-th, "foo"/"foo:N" → plugin foo's devices.
    `gk.DeviceError` says what is missing when the plugin or device is not there.

    Args:
        spec: a device name ("cpu", "opencl", "opencl:N", a plugin's "foo" / "foo:N") or a `gk.Device`. None: the current default device."""
    if spec is None:
        return _default if _default is not None else get_device(DEFAULT_SPEC)
    if spec.__class__ is Device:
        return spec
    dev = _by_spec.get(spec) if isinstance(spec, str) else None
    if dev is not None:
        return dev
    if isinstance(spec, Device):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"device must be a gk.Device, a string like 'cpu' or 'opencl:0', or None; "
                        f"got {spec!r}")
    dev = _by_name.get(spec)
    if dev is None:
        dev = _resolve(spec)
    with _lock:
        _by_spec[spec] = dev
    return dev


def get_devices() -> list[Device]:
    """Every usable device of every loaded plugin ("cpu" first); plugins without devices are skipped."""
    out: list[Device] = []
    for name in registry.available():
        try:
            out.extend(_devices_of(name))
        except DeviceError:
            continue
    return out


def set_device(spec) -> Device:
    """Make `spec` the default device (used when `device=None`); returns the Device.

    Args:
        spec: a device name ("cpu", "opencl", "opencl:N", a plugin's "foo" / "foo:N") or a `gk.Device`."""
    global _default
    dev = get_device(spec)
    _default = dev
    return dev


class ScopedDevice:
    """`with gk.ScopedDevice("opencl"):` — the default device inside the block; nestable, restored on exit.

    Args:
        spec: a device name ("cpu", "opencl", "opencl:N", a plugin's "foo" / "foo:N") or a `gk.Device`."""

    def __init__(self, spec):
        self.device = get_device(spec)
        self._saved: list[Device | None] = []

    def __enter__(self) -> Device:
        global _default
        self._saved.append(_default)
        _default = self.device
        return self.device

    def __exit__(self, *exc) -> None:
        global _default
        _default = self._saved.pop()


def synchronize(device=None) -> None:
    """Wait for queued work: on `device`, or on every device used so far when None.

    Args:
        device: a device name or `gk.Device`; None: every device used so far."""
    if device is not None:
        dev = get_device(device)
        dev.impl.synchronize(dev.info)
        return
    for dev in list(_by_name.values()):
        dev.impl.synchronize(dev.info)
