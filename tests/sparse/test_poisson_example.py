"""examples/poisson_source.py: the source's gradient through the CG solve against central differences of
the float64 dense reference, and the loss falling, on every device."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "poisson_source.py"
spec = importlib.util.spec_from_file_location("example_poisson_source", PATH)
poisson = importlib.util.module_from_spec(spec)
spec.loader.exec_module(poisson)


def test_poisson_source_gradient_and_descent(device, rng):
    n = 8
    out = poisson.run(device, n=n, iters=4)
    losses = out["losses"]
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.2 * losses[0]
    f = out["source"]
    assert losses[-1] == pytest.approx(poisson.loss_reference(f, out["target"], n), rel=1e-6)
    for i in rng.integers(0, n * n, 4):
        e = np.zeros(n * n)
        e[i] = 1e-3
        fd = (poisson.loss_reference(f + e, out["target"], n) - poisson.loss_reference(f - e, out["target"], n)) / 2e-3
        assert out["grad"][i] == pytest.approx(fd, rel=1e-6, abs=1e-12)
    record = out["tape"].records[0]
    assert record.name.startswith("cg (") and "iterations" in record.name     # the solve: one tape step
    assert record.meta["method"] == "cg" and record.meta["iterations"] == out["cg_iterations"][-1] > 0
    assert record.meta["residual"] <= 1e-10 * np.linalg.norm(f) and record.meta["unknowns"] == n * n
    assert record.name == f"cg ({record.meta['iterations']} iterations, residual {record.meta['residual']:.3g})"
