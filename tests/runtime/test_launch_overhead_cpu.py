"""The CPU backend's side of the repeated-launch path (issue 43, W5): `launch(..., again=token)` reuses the
block packed for that token, `relaunch` repeats a tiny launch through the direct call of backends/cpu/
dispatch.py (no ctypes), and anything else packing the block in between makes them pack again. By
behaviour, not timing: results against NumPy float64, what the direct call passes to the entry."""

import ctypes

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.cpu import backend as cpu_backend
from gradkit.backends.cpu.dispatch import direct_caller

pytestmark = pytest.mark.skipif("cpu" not in [d.name for d in gk.get_devices()], reason="cpu backend unavailable")


@gk.kernel
def affine(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), a: gk.float64):
    i = gk.tid()
    y[i] = a * x[i] + gk.cos(x[i])


def test_the_direct_call_passes_the_block_to_the_entry_and_returns_none():
    seen = []
    entry = cpu_backend.WHOLE_T(lambda block: seen.append(block))
    block = (ctypes.c_int64 * 4)()
    call, keep = direct_caller(entry, ctypes.addressof(block))
    for _ in range(3):
        assert call() is None
    assert seen == [ctypes.addressof(block)] * 3
    with pytest.raises(TypeError):
        call(1)                         # no arguments: the block is bound


def _compiled(kernel):
    return kernel.specialization(gk.get_device("cpu")).compiled


def test_repeated_tiny_launches_run_through_the_direct_call(rng):
    x = gk.array(rng.normal(size=6), dtype=gk.float64, device="cpu")
    y = gk.zeros(6, dtype=gk.float64, device="cpu")
    for _ in range(cpu_backend.QUICK_LAUNCHES + 10):
        gk.launch(affine, 6, inputs=[x], outputs=[y, 1.5], device="cpu")
    compiled = _compiled(affine)
    # a scalar argument may change at every launch: it is packed each time, and nothing is repeated as packed
    assert compiled.rerun is None
    np.testing.assert_allclose(y.numpy(), 1.5 * x.numpy() + np.cos(x.numpy()), rtol=1e-15)

    @gk.kernel
    def twice(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = 2.0 * x[i] + gk.sin(x[i])

    for _ in range(cpu_backend.QUICK_LAUNCHES + 10):
        y.zero_()
        gk.launch(twice, 6, inputs=[x], outputs=[y], device="cpu")
        np.testing.assert_allclose(y.numpy(), 2.0 * x.numpy() + np.sin(x.numpy()), rtol=1e-15)
    compiled = _compiled(twice)
    assert compiled.rerun is twice._plan.again and compiled.direct is not None
    x.assign(rng.normal(size=6))            # new values in the same array: read by the repeated launch
    gk.launch(twice, 6, inputs=[x], outputs=[y], device="cpu")
    np.testing.assert_allclose(y.numpy(), 2.0 * x.numpy() + np.sin(x.numpy()), rtol=1e-15)


def test_a_packing_in_between_is_not_repeated(rng):
    """The backend packs for another argument list between two repeated launches with one token: the
    second is not repeated as packed (relaunch says no), and `again` repacks."""
    dev = gk.get_device("cpu")

    @gk.kernel
    def neg(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = -x[i]

    xa, xb = (gk.array(rng.normal(size=4), dtype=gk.float64, device="cpu") for _ in range(2))
    ya, yb = (gk.zeros(4, dtype=gk.float64, device="cpu") for _ in range(2))
    gk.launch(neg, 4, inputs=[xa], outputs=[ya], device="cpu")
    compiled = _compiled(neg)
    token = object()
    for _ in range(cpu_backend.QUICK_LAUNCHES + 5):
        if not dev.impl.relaunch(compiled, token):
            dev.impl.launch(compiled, (4,), [xa, ya], token)
    assert compiled.rerun is token
    dev.impl.launch(compiled, (4,), [xb, yb])                # another packing
    assert not dev.impl.relaunch(compiled, token)
    ya.zero_()
    dev.impl.launch(compiled, (4,), [xa, ya], token)
    np.testing.assert_array_equal(ya.numpy(), -xa.numpy())
    np.testing.assert_array_equal(yb.numpy(), -xb.numpy())
    assert dev.impl.relaunch(compiled, token)
