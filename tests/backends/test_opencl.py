"""The OpenCL backend specifically: generated OpenCL C, the float64 requirement, reductions."""

import numpy as np
import pytest

import gradkit as gk

DEVICES = [d for d in gk.get_devices() if d.backend == "opencl"]
pytestmark = pytest.mark.skipif(not DEVICES, reason="no OpenCL device (pip install pyopencl pocl-binary-distribution)")


@gk.kernel
def twice64(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


@gk.kernel
def total(x: gk.array(dtype=float), s: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(s, 0, x[i])


def test_source_is_opencl_c():
    text = twice64.source(DEVICES[0].name)
    assert "__kernel void" in text and "get_global_id(0)" in text


def test_float64_needs_cl_khr_fp64(monkeypatch):
    dev = DEVICES[0]
    monkeypatch.setitem(dev.info.properties, "fp64", False)
    monkeypatch.setattr(gk.config, "cache", False)
    k = gk.kernel(twice64.pyfunc)          # fresh kernel: nothing compiled yet
    x = gk.zeros(4, dtype=gk.float64, device=dev)
    with pytest.raises(gk.CompileError, match="twice64.*float64.*cl_khr_fp64"):
        gk.launch(k, 4, inputs=[x], outputs=[gk.zeros(4, dtype=gk.float64, device=dev)], device=dev)


def test_reduction_is_accurate():
    x = np.random.default_rng(1).uniform(0, 1, 1 << 20).astype(np.float32)
    s = gk.zeros(1, device=DEVICES[0])
    gk.launch(total, len(x), inputs=[gk.array(x, device=DEVICES[0])], outputs=[s])
    assert abs(s.numpy()[0] - x.astype(np.float64).sum()) / x.sum() < 1e-5
