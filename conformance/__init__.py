"""gradkit's backend conformance suite, shipped in the package: what a backend plugin must do to be a
gradkit device, checked on any device from any folder —

    python -m gradkit.conformance --device NAME [pytest arguments]

or from a plugin author's own pytest run (`pytest -p gradkit.conformance.plugin --pyargs
gradkit.conformance.suite --gradkit-device NAME`). The suite (conformance/suite/): every construct of the
language coverage table forward, in reverse and in forward mode; every scalar builtin op by op against its
NumPy semantics (`BUILTINS[name].eval`) over edge values; reductions' accuracy; n-D grids; memory;
faults and the value stack. No test names a particular backend. The contract it checks is written down in
backends/README.md."""

from __future__ import annotations

SUITE = "gradkit.conformance.suite"


def run(devices: list[str] | None = None, pytest_args: list[str] | None = None) -> int:
    """Run the suite on `devices` (None: every available device); pytest's exit code."""
    import pytest
    args = ["-p", "gradkit.conformance.plugin", "--pyargs", SUITE, "-p", "no:cacheprovider",
            "--rootdir", _suite_dir(), *(pytest_args or [])]
    for name in devices or []:
        args += ["--gradkit-device", name]
    return int(pytest.main(args))


def _suite_dir() -> str:
    import pathlib
    return str(pathlib.Path(__file__).resolve().parent / "suite")
