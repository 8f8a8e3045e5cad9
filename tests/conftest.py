"""Shared test fixtures: the `device` fixture over every available device, a seeded `rng`, fake
backends for runtime tests, and markers.

Hypothesis runs with the "gradkit" profile (no deadline: kernels JIT-compile inside examples).
Markers: `slow` (long tests; they are run first so pytest-xdist workers finish together),
`needs_dot` (skipped when GraphViz's `dot` is missing). Set GRADKIT_TEST_DEVICES=cpu,opencl:0
to restrict the devices the `device` fixture runs on.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import warnings
import zlib

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends import registry
from gradkit.backends.base import Backend, DeviceInfo


def _device_names() -> list[str]:
    """Names of every usable device, computed once at collection (identical in every xdist worker)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # a broken plugin is reported in the header instead
        names = [d.name for d in gk.get_devices()]
    wanted = os.environ.get("GRADKIT_TEST_DEVICES")
    if wanted:
        keep = {w.strip() for w in wanted.split(",") if w.strip()}
        names = [n for n in names if n in keep or n.split(":")[0] in keep]
    return names


DEVICES = _device_names()


def pytest_report_header(config) -> list[str]:
    lines = [f"gradkit devices: {', '.join(DEVICES) or 'none'}"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in registry.names():
            why = registry.failure(name)
            if why:
                lines.append(f"gradkit backend '{name}' unavailable: {why}")
    return lines


try:  # kernels compile (JIT) inside property tests: no per-example deadline
    from hypothesis import HealthCheck, settings
    settings.register_profile("gradkit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gradkit"))
except ImportError:
    pass


class _CheckoutIsNotATestPackage:
    """The repository root is the gradkit package itself (`__init__.py` at the top), so pytest would collect
    it as a test package and import it under the checkout folder's name: a second copy of gradkit, and an
    ImportError when that name is not an identifier (`git clone . /tmp/tmp.x1Y`). Collect it as a plain
    folder instead; the tests import the installed `gradkit`."""

    root = pathlib.Path(__file__).resolve().parents[1]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collect_directory(self, path, parent):
        if pathlib.Path(path).resolve() == self.root:
            return pytest.Dir.from_parent(parent, path=path)
        return None


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: a long test (scheduled first)")
    config.addinivalue_line("markers", "needs_dot: needs GraphViz's `dot` binary (skipped without it)")
    # a plugin, not a conftest hook: pytest asks the root's *parent* folder's hooks about the root
    config.pluginmanager.register(_CheckoutIsNotATestPackage(), "gradkit-checkout-not-a-package")


def pytest_collection_modifyitems(config, items) -> None:
    """Run slow tests first (better packing across xdist workers); skip `needs_dot` without `dot`."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)   # stable sort
    if shutil.which("dot") is None:
        skip = pytest.mark.skip(reason="GraphViz `dot` not installed (make test installs it as root)")
        for item in items:
            if item.get_closest_marker("needs_dot"):
                item.add_marker(skip)


def _fenv_saver():
    """(save, restore) of the calling thread's floating-point environment through libc's fegetenv /
    fesetenv, or None where libc has none. Taichi's ti.init turns on flush-to-zero and denormals-are-zero in the
    thread that calls it and leaves them on; a later test in the same xdist worker then measured float32 ULP
    errors against np.spacing == 0 (and gradkit kernels run inline inherit the flags): an order-dependent failure."""
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        get, put = libc.fegetenv, libc.fesetenv
    except (OSError, AttributeError):
        return None

    def save():
        buf = ctypes.create_string_buffer(64)        # fenv_t is 32 bytes on x86-64, 8 on aarch64
        return buf if get(buf) == 0 else None

    def restore(buf):
        if buf is not None:
            put(buf)
    return save, restore


_FENV = _fenv_saver()


@pytest.fixture(autouse=True)
def _keep_float_environment():
    """Every test starts with the floating-point environment the one before it found (see _fenv_saver)."""
    if _FENV is None:
        yield
        return
    saved = _FENV[0]()
    yield
    _FENV[1](saved)


@pytest.fixture(params=DEVICES, ids=DEVICES)
def device(request) -> str:
    """The name of one available device ("cpu", "opencl:0", ...); tests run once per device."""
    return request.param


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A NumPy generator seeded from the test's id: random but reproducible per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# --------------------------------------------------------------------------- fake backends

class FakeHostBackend(Backend):
    """Host-memory backend for runtime tests: buffers are NumPy uint8 arrays, `host_view` exposes them.
    It cannot compile; it counts the memory calls it gets."""

    name = "fakehost"
    n_devices = 1

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.synced: list[str] = []

    def _count(self, what: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1

    def devices(self) -> list[DeviceInfo]:
        if self.n_devices == 1:
            return [DeviceInfo(self.name, f"fake {self.name} device")]
        return [DeviceInfo(f"{self.name}:{k}", f"fake {self.name} device {k}", k)
                for k in range(self.n_devices)]

    def alloc(self, device, nbytes):
        self._count("alloc")
        return np.zeros(nbytes, dtype=np.uint8)

    def copy_from_host(self, device, dst, src):
        self._count("copy_from_host")
        assert src.flags.c_contiguous
        dst[:src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_to_host(self, device, src, dst):
        self._count("copy_to_host")
        assert dst.flags.c_contiguous
        dst.reshape(-1).view(np.uint8)[:] = src[:dst.nbytes]

    def copy(self, device, dst, src, nbytes):
        self._count("copy")
        dst[:nbytes] = src[:nbytes]

    def fill_zero(self, device, buf, nbytes):
        self._count("fill_zero")
        buf[:nbytes] = 0

    def host_view(self, device, buf):
        return buf

    def synchronize(self, device) -> None:
        self.synced.append(device.name)


class FakeDeviceBackend(FakeHostBackend):
    """Like FakeHostBackend but "device memory": no host view, so every host access copies. Two devices."""

    name = "fakedev"
    n_devices = 2

    def host_view(self, device, buf):
        return None


class NoDeviceBackend(FakeHostBackend):
    """A plugin that loads but finds no device (like OpenCL without a platform)."""

    name = "nodev"

    def devices(self) -> list[DeviceInfo]:
        return []


class BrokenBackend(FakeHostBackend):
    """A plugin whose constructor fails."""

    name = "broken"

    def __init__(self) -> None:
        raise RuntimeError("no frobnicator found")


FAKES = {"fakehost": FakeHostBackend, "fakedev": FakeDeviceBackend}


@pytest.fixture
def fake_backends():
    """Register the fake host/device backends for one test: yields {name: Backend instance}."""
    for name, cls in FAKES.items():
        registry.register(name, cls)
    try:
        yield {name: registry.get_backend(name) for name in FAKES}
    finally:
        for name in FAKES:
            registry.unregister(name)


@pytest.fixture(params=["fakehost", "fakedev:1", *DEVICES], ids=["fakehost", "fakedev:1", *DEVICES])
def mem_device(request, fake_backends) -> str:
    """A device for memory-only tests (no kernels): the fakes plus every real device."""
    return request.param
