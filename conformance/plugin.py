"""pytest plugin of the conformance suite: `--gradkit-device NAME` (repeatable; default every available
device) parametrises the `device` fixture, and `rng` is a generator seeded from the test's id. Load it with
`-p gradkit.conformance.plugin` to run the suite (or its modules) inside a plugin author's own tests."""

from __future__ import annotations

import zlib

import numpy as np
import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("gradkit", "gradkit backend conformance")
    group.addoption("--gradkit-device", action="append", default=None, dest="gradkit_devices",
                    help="a gradkit device to check (repeatable; default: every available device)")


def selected_devices(config) -> list[str]:
    """The devices named on the command line (checked to exist), or every available one."""
    import gradkit as gk
    available = [d.name for d in gk.get_devices()]
    wanted = config.getoption("gradkit_devices") or available
    names = []
    for spec in wanted:
        try:
            names.append(gk.get_device(spec).name)
        except Exception as exc:          # DeviceError, ValueError: say what exists
            raise pytest.UsageError(f"--gradkit-device {spec!r}: {exc} (available: {', '.join(available)})") from None
    return names


def pytest_generate_tests(metafunc) -> None:
    if "device" in metafunc.fixturenames:
        names = selected_devices(metafunc.config)
        metafunc.parametrize("device", names, ids=names)


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A NumPy generator seeded from the test's id: random but reproducible per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_report_header(config) -> str:
    import gradkit as gk
    lines = [f"gradkit conformance suite, gradkit {getattr(gk, '__version__', '?')}"]
    for name in selected_devices(config):
        lines.append(f"  device {name}: {gk.get_device(name).description}")
    return "\n".join(lines)
