"""gk.config.fast_math (off by default, Taichi's fast_math): kernels recompile with relaxed float math,
results stay within float32 tolerance of float64 references on every device, and turning it off again
gives IEEE results (2 / sqrt(0) = inf) from the IEEE build."""

import numpy as np
import pytest

import gradkit as gk
from tests.backends.nbody_helpers import check_pair_sum


@gk.kernel
def inv_sqrt(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 2.0 / gk.sqrt(x[i])


@gk.kernel
def nan_flags(x: gk.array(dtype=float), flags: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    flags[i] = gk.where(v != v, 1.0, 0.0)          # NaN is the only value unequal to itself


@pytest.fixture
def fast_math():
    saved = gk.config.fast_math
    gk.config.fast_math = True
    yield
    gk.config.fast_math = saved


def test_fast_math_results_match_float64(device, rng, fast_math):
    check_pair_sum(device, rng.uniform(-1, 1, (700, 2)).astype(np.float32), rtol=1e-5, grad_rtol=1e-3)

    v = np.concatenate([rng.uniform(1e-3, 1e3, 4096), [1.0, 4.0]]).astype(np.float32)
    xv, yv = gk.array(v, device=device), gk.zeros(len(v), device=device)
    gk.launch(inv_sqrt, len(v), inputs=[xv], outputs=[yv], device=device)
    np.testing.assert_allclose(yv.numpy(), 2 / np.sqrt(v.astype(np.float64)), rtol=2e-6)

    vals = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0], np.float32)
    flags = gk.zeros(5, device=device)
    gk.launch(nan_flags, 5, inputs=[gk.array(vals, device=device)], outputs=[flags], device=device)
    np.testing.assert_array_equal(flags.numpy(), [1, 0, 0, 0, 0])       # NaN tests are not optimised away


def test_switching_fast_math_recompiles(device):
    zero = gk.array(np.zeros(4, np.float32), device=device)
    y = gk.zeros(4, device=device)
    saved = gk.config.fast_math
    try:
        gk.config.fast_math = True
        gk.launch(inv_sqrt, 4, inputs=[zero], outputs=[y], device=device)     # may read NaN: allowed
        gk.config.fast_math = False
        gk.launch(inv_sqrt, 4, inputs=[zero], outputs=[y], device=device)
    finally:
        gk.config.fast_math = saved
    assert np.isposinf(y.numpy()).all()


@pytest.mark.skipif("cpu" not in [d.name for d in gk.get_devices()], reason="cpu backend unavailable")
def test_cpu_fast_math_flags_only_when_asked():
    saved = gk.config.fast_math
    try:
        gk.config.fast_math = False
        ieee = inv_sqrt.source("cpu")
        gk.config.fast_math = True
        fast = inv_sqrt.source("cpu")
    finally:
        gk.config.fast_math = saved
    assert "afn" not in ieee and "arcp" not in ieee
    assert "afn" in fast and "arcp" in fast
