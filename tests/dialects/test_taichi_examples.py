"""Taichi's own autodiff examples, loaded from the installed taichi package, run with only the import line
changed (`import gradkit.taichi as ti`) and compared with the real Taichi run in the same test."""

from __future__ import annotations

import pathlib
import random

import numpy as np
import pytest

from taichi_programs import rel_err, run_program

taichi = pytest.importorskip("taichi")
EXAMPLES = pathlib.Path(taichi.__file__).parent / "examples" / "autodiff"


def _load(name: str) -> str:
    path = EXAMPLES / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"{path} is not installed")
    text = path.read_text()
    assert "import taichi as ti" in text
    return text


def _both(name, tmp_path, body):
    """Run `body(globals)` on the example under each implementation; returns {module: result}."""
    out = {}
    for module in ("gradkit.taichi", "taichi"):
        random.seed(1234)
        g = run_program(_load(name), module, tmp_path, name)
        out[module] = body(g)
    return out


def test_simple_derivative(tmp_path, capsys):
    def body(g):
        g["initialize"]()
        return np.array(g["ys"]), np.array(g["grad_xs"])
    out = _both("simple_derivative", tmp_path, body)
    (ys, gx), (ys_ti, gx_ti) = out["gradkit.taichi"], out["taichi"]
    assert rel_err(ys, ys_ti) < 1e-6
    assert rel_err(gx, gx_ti) < 1e-6          # float32 program: 4/max(v, 0.1) and its derivative -4/v^2
    assert np.count_nonzero(gx) > 500


def test_regression(tmp_path, capsys):
    def body(g):
        g["initialize"]()
        g["regress_raw"]()                    # 1000 steps of Tape + update, as the example runs them
        return np.array([g["coeffs"][i] for i in range(g["number_coeffs"])]), g["loss"][None]
    out = _both("regression", tmp_path, body)
    (c, loss), (c_ti, loss_ti) = out["gradkit.taichi"], out["taichi"]
    assert rel_err(c, c_ti) < 1e-4             # float32 over 1000 descent steps
    assert abs(loss - loss_ti) <= 1e-4 * abs(loss_ti)


def test_minimization(tmp_path, capsys):
    def body(g):
        g["main"]()
        return g["x"].to_numpy(), g["y"].to_numpy(), g["L"][None]
    out = _both("minimization", tmp_path, body)
    (x, y, L), (x_ti, y_ti, L_ti) = out["gradkit.taichi"], out["taichi"]
    assert np.array_equal(y, y_ti)
    assert rel_err(x, x_ti) < 1e-6
    assert abs(L - L_ti) <= 1e-5 * max(abs(L_ti), 1e-12)
