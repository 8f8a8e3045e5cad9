"""Warp's device names over gradkit's devices: "cpu" is gradkit's cpu; "cuda" / "cuda:N" are the
first (N-th) OpenCL device where gradkit has one, else the cpu, said once. `wp.get_device()` answers a
`Device` with Warp's attributes (`is_cuda`, `is_cpu`, `alias`, ...) around gradkit's. Streams and events
(`Stream`, `ScopedStream`, `get_stream`, `wait_stream`, `record_event`, ...) order nothing beyond what
gradkit's launches already do (see below)."""

from __future__ import annotations

import sys
import time

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


# --------------------------------------------------------------------------- streams and events
# Warp's streams are CUDA streams. Launches on gradkit's host devices (cpu and the plugins) run to completion
# before launch returns, and an OpenCL device has one in-order queue that every stream shares: so work is
# always ordered at least as Warp's streams order it, and wait_stream / wait_event / record_event have
# nothing to add. Unlike Warp, which raises RuntimeError for a Stream or an Event on the cpu device, gradkit
# accepts them on every device (a Warp program written for "cuda" also runs on "cpu").

class Event:
    """Warp's `wp.Event`: a point in a device's work. Recording it synchronizes the device and keeps the time,
    so `get_event_elapsed_time` answers milliseconds between two recorded events."""

    def __init__(self, device=None, cuda_event=None, enable_timing: bool = False, interprocess: bool = False):
        if enable_timing and interprocess:
            raise ValueError("Timing and interprocess events cannot be combined (Warp's rule)")
        self.device = get_device(device)
        self.enable_timing = enable_timing
        self.cuda_event = None
        self._time = None

    def _record(self) -> None:
        _dev.synchronize(self.device.gk)
        self._time = time.perf_counter()

    @property
    def is_complete(self) -> bool:
        return True


class Stream:
    """Warp's `wp.Stream(device=None, priority=0)`: an ordering token on a gradkit device (see above); its
    work runs on the device's one queue, in launch order."""

    def __init__(self, device=None, priority: int = 0, **kwargs):
        if not isinstance(priority, int):
            raise TypeError("Stream priority must be an integer.")
        self.device = get_device(device)
        self._priority = max(-1, min(priority, 0))
        self.cuda_stream = kwargs.get("cuda_stream")
        self._cached_event = None

    priority = property(lambda self: self._priority)
    is_blocking = property(lambda self: True)
    is_capturing = property(lambda self: False)

    @property
    def is_complete(self) -> bool:
        _dev.synchronize(self.device.gk)
        return True

    @property
    def cached_event(self) -> Event:
        if self._cached_event is None:
            self._cached_event = Event(self.device)
        return self._cached_event

    def record_event(self, event: Event | None = None, external: bool = False) -> Event:
        if event is None:
            event = Event(self.device)
        elif event.device != self.device:
            raise RuntimeError(f"Event from device {event.device} cannot be recorded on stream from device "
                               f"{self.device}")
        event._record()
        return event

    def wait_event(self, event: Event, external: bool = False) -> None:
        """Nothing to wait for: the device's queue already runs the event's work first."""

    def wait_stream(self, other_stream: Stream, event: Event | None = None, external: bool = False) -> None:
        """Nothing to wait for: both streams share the device's in-order queue."""
        other_stream.record_event(event if event is not None else other_stream.cached_event)

    def __eq__(self, other) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"wp.Stream(device={self.device.name!r})"


_default_streams: dict = {}     # gradkit device -> its default Stream
_current_streams: dict = {}     # gradkit device -> the Stream set by set_stream / ScopedStream


def get_stream(device=None) -> Stream:
    """The device's current stream (its default one unless set_stream / ScopedStream chose another)."""
    dev = get_device(device)
    if dev.gk in _current_streams:
        return _current_streams[dev.gk]
    if dev.gk not in _default_streams:
        _default_streams[dev.gk] = Stream(dev)
    return _default_streams[dev.gk]


def set_stream(stream: Stream, device=None, sync: bool = False) -> None:
    dev = get_device(device) if device is not None else stream.device
    if sync:
        stream.wait_stream(get_stream(dev))
    _current_streams[dev.gk] = stream


def record_event(event: Event | None = None, external: bool = False) -> Event:
    return get_stream().record_event(event, external=external)


def wait_event(event: Event, external: bool = False) -> None:
    get_stream().wait_event(event, external=external)


def wait_stream(other_stream: Stream, event: Event | None = None, external: bool = False) -> None:
    get_stream().wait_stream(other_stream, event=event, external=external)


def synchronize_stream(stream_or_device=None) -> None:
    if isinstance(stream_or_device, Stream):
        _dev.synchronize(stream_or_device.device.gk)
    else:
        _dev.synchronize(to_gk(stream_or_device))


def synchronize_event(event: Event) -> None:
    _dev.synchronize(event.device.gk)


def get_event_elapsed_time(start_event: Event, end_event: Event, synchronize: bool = True) -> float:
    """Milliseconds between two recorded events (host clock at each record, after synchronizing)."""
    if start_event._time is None or end_event._time is None:
        raise RuntimeError("both events must have been recorded (wp.record_event / Stream.record_event)")
    return (end_event._time - start_event._time) * 1000.0


class ScopedStream:
    """`with wp.ScopedStream(stream):` makes `stream` its device's current stream and its device the current
    device for the block, as Warp's; None leaves both as they are."""

    def __init__(self, stream: Stream | None, sync_enter: bool = True, sync_exit: bool = False):
        self.stream = stream
        self.sync_enter = sync_enter
        self.sync_exit = sync_exit
        self._scope = None
        self._saved = None

    def __enter__(self):
        if self.stream is not None:
            self._scope = ScopedDevice(self.stream.device)
            self._scope.__enter__()
            gk = self.stream.device.gk
            self._saved = (gk in _current_streams, _current_streams.get(gk))
            set_stream(self.stream, sync=self.sync_enter)
        return self.stream

    def __exit__(self, *exc) -> None:
        if self.stream is None:
            return
        gk = self.stream.device.gk
        had, previous = self._saved
        if self.sync_exit and previous is not None:
            previous.wait_stream(self.stream)
        if had:
            _current_streams[gk] = previous
        else:
            _current_streams.pop(gk, None)
        self._scope.__exit__(*exc)
