"""Fixtures for the debugger tests: debug bundles recorded from the small scripts next to this file
(run the way `gradkit debug` runs them), a bundle without snapshots, and a zip bundle."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import gradkit as gk
from tests.app.recording import record_bundle

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = {"nan": HERE / "sample_nan.py", "train": HERE / "sample_train.py", "sqrt": HERE / "sample_sqrt.py",
           "rollout": HERE / "sample_rollout.py", "springs": HERE / "sample_springs.py",
           "rope": HERE / "sample_rope.py"}


@gk.kernel
def scale(x: gk.array(dtype=float), a: float, y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a * x[i]


def record_plain(path: pathlib.Path) -> pathlib.Path:
    """A bundle from a tape without snapshots, whose input lacks requires_grad."""
    x = gk.array(np.arange(4, dtype=np.float32), label="x")
    y = gk.zeros(4, requires_grad=True, label="y")
    return record_bundle(path, scale, [x, 2.0], [y], snapshots=False, seed=True)


@pytest.fixture(scope="session")
def bundle_dir(tmp_path_factory) -> pathlib.Path:
    """A folder of bundles: nan (forward NaN), train (cut-off and vanishing gradients), sqrt (backward Inf),
    sqrt_fixed (the same script with the fix), springs (a loop whose sqrt(dot(d, d)) hits 0 at iteration 3),
    rollout (111 launches in nested scopes), rope (a wind force overwritten before it is read) and plain (no
    snapshots)."""
    from gradkit.app.cli import capture_script
    folder = tmp_path_factory.mktemp("bundles")
    for name, script in SCRIPTS.items():
        report = capture_script(script, [], folder / name)
        assert report.bundle is not None, report.error
    report = capture_script(SCRIPTS["sqrt"], ["fixed"], folder / "sqrt_fixed")     # sqrt after the fix
    assert report.bundle is not None, report.error
    record_plain(folder / "plain")
    return folder


@pytest.fixture(name="record_plain")
def _record_plain():
    return record_plain


@pytest.fixture(scope="session")
def bundles(bundle_dir):
    from gradkit.app.data import open_bundle
    return {p.name: open_bundle(p) for p in sorted(bundle_dir.iterdir())}


@pytest.fixture(scope="session")
def planted(tmp_path_factory):
    """Issue 41's acceptance program (tests/app/planted.py: 201 launches over 50 steps, four planted bugs)
    and the same program fixed, captured as `gradkit debug` does: (folder holding the bundles 'planted' and
    'planted_fixed', {bug: line})."""
    from gradkit.app.cli import capture_script
    from tests.app.planted import write_program
    work = tmp_path_factory.mktemp("planted")
    lines = write_program(work / "planted.py")
    write_program(work / "planted_fixed.py", fixed=True)
    for name in ("planted", "planted_fixed"):
        report = capture_script(work / f"{name}.py", [], work / "bundles" / name)
        assert report.bundle is not None, report.error
    return work / "bundles", lines


@pytest.fixture(scope="session")
def example_bundles(tmp_path_factory) -> pathlib.Path:
    """Every bundled example script captured as `gradkit examples` does (one bundle each)."""
    from gradkit.app import cli
    out = tmp_path_factory.mktemp("example-bundles")
    assert cli.main(["examples", "--out", str(out), "--bundle-only", "-q"]) == 0
    return out
