"""examples/implicit_cloth.py on every device: the stiffness's gradient through four CG-solved implicit
steps against central differences of the float64 dense reference, the loss falling at every iteration to
the observed pose's stiffness, and each solve one tape step carrying its iteration count and residual."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "implicit_cloth.py"
spec = importlib.util.spec_from_file_location("example_implicit_cloth", PATH)
cloth = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cloth)


def test_implicit_cloth_learns_its_stiffness(device, rng):
    start = float(rng.uniform(8.0, 20.0))
    cloth.START_STIFFNESS = start
    try:
        out = cloth.run(device, side=4, iters=7)
    finally:
        cloth.START_STIFFNESS = 12.0
    losses, ks = out["losses"], out["stiffness"]
    assert ks[0] == pytest.approx(start, rel=1e-12)
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 1e-3 * losses[0]
    assert ks[-1] == pytest.approx(cloth.TRUE_STIFFNESS, rel=1e-2)
    ref = lambda k: cloth.loss_reference(k, out["target"], out["cloth"], out["params"])
    for it in (0, 2):
        k = ks[it]
        assert losses[it] == pytest.approx(ref(k), rel=1e-7)
        eps = 1e-4 * k
        fd = (ref(k + eps) - ref(k - eps)) / (2 * eps)
        assert out["grad"][it] == pytest.approx(fd, rel=1e-6)
    solves = [r for r in out["tape"].records if getattr(r, "name", "").startswith("cg (")]
    assert len(solves) == out["params"]["steps"]
    for record, iterations in zip(solves, out["cg_iterations"][-1]):
        assert record.name.startswith(f"cg ({iterations} iterations, residual ")
        assert record.meta["iterations"] == iterations and 0.0 <= record.meta["residual"] < 1e-6
        assert record.meta["unknowns"] == 16 and record.scope == ("simulate",)
