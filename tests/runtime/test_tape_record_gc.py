"""A recording tape raises the garbage collector's first threshold (runtime/tape/gc_relax.py) and puts it back
on every way out of `with tape:`; collections still happen meanwhile, so cyclic garbage made while a tape
records is freed, and gradients recorded that way match float64 NumPy."""

import gc
import weakref

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.tape import gc_relax


@gk.kernel
def _square(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def _total(y: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, y[i])


@pytest.fixture
def default_thresholds():
    """The collector on, at CPython's default first threshold, as found afterwards."""
    found, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    gc.set_threshold(700, *found[1:])
    yield (700, *found[1:])
    gc.set_threshold(*found)
    (gc.enable if enabled else gc.disable)()


def test_threshold_raised_while_recording_and_restored(device, rng, default_thresholds):
    x = gk.array(rng.uniform(-1, 1, 16).astype(np.float32), device=device, requires_grad=True)
    y = gk.zeros(16, device=device, requires_grad=True)
    with gk.Tape() as tape:
        assert gc.get_threshold()[0] == gc_relax.RECORDING_THRESHOLD and gc.isenabled()
        gk.launch(_square, 16, inputs=[x], outputs=[y], device=device)
    assert gc.get_threshold() == default_thresholds and gc_relax.active() == 0
    tape.backward(grads={y: gk.ones(16, device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * x.numpy().astype(np.float64), rtol=1e-6)


def test_restored_when_the_block_raises(device, default_thresholds):
    x = gk.ones(4, device=device, requires_grad=True)
    y = gk.zeros(4, device=device, requires_grad=True)
    with pytest.raises(KeyError):
        with gk.Tape():
            gk.launch(_square, 4, inputs=[x], outputs=[y], device=device)
            raise KeyError("stop")
    assert gc.get_threshold() == default_thresholds and gc_relax.active() == 0


def test_restored_when_backward_raises_on_exit(device, default_thresholds):
    x = gk.ones(4, device=device, requires_grad=True)
    y = gk.zeros(4, device=device, requires_grad=True)
    loss = gk.zeros(2, device=device, requires_grad=True)      # not one element: backward(loss=) refuses it
    with pytest.raises(ValueError):
        with gk.Tape(loss=loss):
            gk.launch(_square, 4, inputs=[x], outputs=[y], device=device)
    assert gc.get_threshold() == default_thresholds and gc_relax.active() == 0


def test_refused_nested_enter_leaves_the_outer_tape_relaxed(device, default_thresholds):
    with gk.Tape():
        with pytest.raises(RuntimeError):
            with gk.Tape():
                pass
        assert gc.get_threshold()[0] == gc_relax.RECORDING_THRESHOLD and gc_relax.active() == 1
    assert gc.get_threshold() == default_thresholds and gc_relax.active() == 0


def test_disabled_collector_and_user_thresholds_untouched(device):
    found, enabled = gc.get_threshold(), gc.isenabled()
    try:
        gc.disable()
        with gk.Tape():
            assert not gc.isenabled() and gc.get_threshold() == found
        assert not gc.isenabled() and gc.get_threshold() == found
        gc.enable()
        gc.set_threshold(2 * gc_relax.RECORDING_THRESHOLD, *found[1:])     # a user's own, higher
        with gk.Tape():
            assert gc.get_threshold()[0] == 2 * gc_relax.RECORDING_THRESHOLD
        gc.set_threshold(500, *found[1:])
        with gk.Tape():
            gc.set_threshold(900, *found[1:])        # changed by the user while recording: kept
        assert gc.get_threshold()[0] == 900
    finally:
        gc.set_threshold(*found)
        (gc.enable if enabled else gc.disable)()


class _Cycle:
    def __init__(self):
        self.me = self


def test_cyclic_garbage_made_while_recording_is_collected(device, default_thresholds):
    """Memory stays bounded: cycles made inside a recording tape, with no launches meanwhile, are freed by
    the collector before the tape exits once more than the raised threshold of them were made."""
    x = gk.ones(4, device=device, requires_grad=True)
    y = gk.zeros(4, device=device, requires_grad=True)
    with gk.Tape():
        gk.launch(_square, 4, inputs=[x], outputs=[y], device=device)
        gc.collect()
        first = weakref.ref(_Cycle())
        assert first() is not None                     # a cycle: reference counting alone keeps it
        for _ in range(3 * gc_relax.RECORDING_THRESHOLD):
            _Cycle()
        assert first() is None
        assert gc.get_count()[0] < 2 * gc_relax.RECORDING_THRESHOLD


def test_long_tape_gradient_matches_numpy(device, rng, default_thresholds):
    """Thousands of tiny recorded launches under the raised threshold: loss = steps * sum(x^2), recorded
    as a square into a fresh array and its sum at every step, against float64."""
    n, steps = 8, 3000
    x0 = rng.uniform(-1, 1, n)
    x = gk.array(x0.astype(np.float32), device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    ys = [gk.zeros(n, device=device, requires_grad=True) for _ in range(steps)]
    with gk.Tape() as tape:
        for y in ys:
            gk.launch(_square, n, inputs=[x], outputs=[y], device=device)
            gk.launch(_total, n, inputs=[y], outputs=[loss], device=device)
    assert len(tape.records) == 2 * steps
    tape.backward(loss=loss)
    np.testing.assert_allclose(loss.numpy()[0], steps * np.sum(x0 ** 2), rtol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), steps * 2.0 * x0, rtol=1e-4)
