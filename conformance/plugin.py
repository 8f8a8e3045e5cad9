"""pytest plugin of the conformance suite: `--gradkit-device NAME` (repeatable; default every available
device) parametrises the `device` fixture, and `rng` is a generator seeded from the test's id. Load it with
`-p gradkit.conformance.plugin` to run the suite (or its modules) inside a plugin author's own tests.

Three outcomes per check: passed; skipped as "not declared: <feature>" when the device's backend does not
declare a feature the check needs and gradkit has no fallback for it (`require`, or a `NotDeclaredError`
raised while compiling); failed. A missing feature is never a failure (backends/README.md, "Contract")."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from gradkit.core.passes.lower_capabilities import NotDeclaredError

NOT_DECLARED = "not declared: "


def capabilities(device: str):
    """The capabilities the backend of `device` declares (gradkit.backends.capabilities)."""
    import gradkit as gk
    from gradkit.backends.capabilities import capabilities_of
    return capabilities_of(gk.get_device(device).impl)


def require(device: str, feature: str) -> None:
    """Skip the calling check as "not declared: <feature>" unless `device`'s backend declares it."""
    if not capabilities(device).declares(feature):
        pytest.skip(NOT_DECLARED + feature)


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


def _not_declared(excinfo) -> NotDeclaredError | None:
    exc = excinfo.value if excinfo is not None else None
    while exc is not None and not isinstance(exc, NotDeclaredError):
        exc = exc.__cause__ or exc.__context__
    return exc


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A check that failed only because the backend lacks a feature it does not declare is skipped, naming
    the feature: the contract's rule that new features fall back or are skipped, never failed."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.outcome != "failed":
        return
    exc = _not_declared(call.excinfo)
    if exc is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {NOT_DECLARED}{exc.feature}")


def pytest_report_header(config) -> str:
    import gradkit as gk
    lines = [f"gradkit conformance suite, gradkit {getattr(gk, '__version__', '?')}"]
    for name in selected_devices(config):
        impl = gk.get_device(name).impl
        lines.append(f"  device {name}: {gk.get_device(name).description} "
                     f"(contract {getattr(impl, 'contract_version', None) or 1})")
    return "\n".join(lines)
