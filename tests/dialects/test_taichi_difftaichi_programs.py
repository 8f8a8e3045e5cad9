"""DiffTaichi-style programs written for these tests (taichi_programs.py: SPRING_ROBOT, MPM), each run under
the real Taichi and gradkit.taichi in the same test, float64, losses and gradients compared to 1e-9, on every
gradkit device; and their float32 runs to float32 rounding on the cpu."""

from __future__ import annotations

import numpy as np
import pytest

from taichi_programs import MPM, SPRING_ROBOT, program, rel_err, run_program

SIZES = {"robot": dict(N_OBJ=6, STEPS=40), "mpm": dict(N_PART=24, N_GRID=12, STEPS=8)}
TEXTS = {"robot": SPRING_ROBOT, "mpm": MPM}


def _both(name, fp, device, tmp_path, seed=5):
    text = program(TEXTS[name], FP=fp, **SIZES[name])
    ours = run_program(text.replace("arch=ti.cpu", f"arch=ti.cpu, device={device!r}"), "gradkit.taichi",
                       tmp_path, name)["run"](seed)
    theirs = run_program(text, "taichi", tmp_path, name)["run"](seed)
    return ours, theirs


@pytest.mark.parametrize("name", ["robot", "mpm"])
def test_program_matches_taichi_in_float64(name, device, tmp_path):
    pytest.importorskip("taichi")
    ours, theirs = _both(name, "ti.f64", device, tmp_path)
    assert len(ours) == len(theirs)
    for k, (g, t) in enumerate(zip(ours, theirs)):
        assert rel_err(g, t) < 1e-9, (name, k)
        assert np.all(np.isfinite(g))
    assert all(np.abs(g).max() > 0 for g in ours[1:])          # every gradient reaches its parameters


@pytest.mark.parametrize("name", ["robot", "mpm"])
def test_program_matches_taichi_in_float32(name, tmp_path):
    pytest.importorskip("taichi")
    ours, theirs = _both(name, "ti.f32", "cpu", tmp_path)
    for k, (g, t) in enumerate(zip(ours, theirs)):
        assert rel_err(g, t) < 2e-3, (name, k)
