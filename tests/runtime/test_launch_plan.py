"""Pre-bound launches (runtime/launch/plan.py, issue 43): a kernel launched again on the same grid,
device and arrays skips binding but keeps every check: scalars converted and bounds proven anew, a
different array or a bad value refused as by the full path, settings changes honoured, no array kept
alive, threads sharing a kernel, and tapes recording the same gradients (against NumPy float64)."""

import gc
import threading
import weakref

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def shift(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), s: int, c: gk.float64):
    i = gk.tid()
    y[i] = x[i + s] * c


@gk.kernel
def ahead(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), c: gk.float64):
    i = gk.tid()
    y[i] = x[i + 4] * c


@gk.kernel
def axpy(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), a: gk.float64):
    i = gk.tid()
    y[i] = y[i] + a * gk.sin(x[i])


def test_repeated_launches_use_each_launchs_scalars(device, rng):
    x = gk.array(rng.normal(size=12), dtype=gk.float64, device=device)
    y = gk.zeros(8, dtype=gk.float64, device=device)
    xs = x.numpy().copy()
    for s in range(5):
        c = float(rng.normal())
        gk.launch(shift, 8, inputs=[x], outputs=[y, s, c], device=device)
        np.testing.assert_allclose(y.numpy(), xs[s:s + 8] * c, rtol=1e-15)
    assert shift._plan is not None and shift._plan.dims == (8,)


def test_bounds_and_values_are_checked_on_the_planned_path(device, rng):
    x = gk.array(rng.normal(size=12), dtype=gk.float64, device=device)
    y = gk.zeros(8, dtype=gk.float64, device=device)
    for c in (1.0, 2.0, 3.0):
        gk.launch(ahead, 8, inputs=[x], outputs=[y, c], device=device)
    np.testing.assert_allclose(y.numpy(), 3.0 * x.numpy()[4:], rtol=1e-15)
    before = y.numpy().copy()
    short = gk.array(rng.normal(size=11), dtype=gk.float64, device=device)
    with pytest.raises(IndexError):
        gk.launch(ahead, 8, inputs=[short], outputs=[y, 1.0], device=device)      # x[7 + 4]: past 11
    with pytest.raises(IndexError):
        gk.launch(ahead, 9, inputs=[x], outputs=[y, 1.0], device=device)          # a longer grid
    np.testing.assert_array_equal(y.numpy(), before)                                # nothing written
    for s in (0, 1, 4):
        gk.launch(shift, 8, inputs=[x], outputs=[y, s, 1.0], device=device)
    with pytest.raises(TypeError, match="parameter 's'"):
        gk.launch(shift, 8, inputs=[x], outputs=[y, 1.5, 1.0], device=device)
    with pytest.raises(TypeError, match="parameter 'c'"):
        gk.launch(shift, 8, inputs=[x], outputs=[y, 0, "1.0"], device=device)
    f32 = gk.zeros(8, dtype=gk.float32, device=device)
    with pytest.raises(TypeError, match="parameter 'y'"):
        gk.launch(shift, 8, inputs=[x], outputs=[f32, 0, 1.0], device=device)
    with pytest.raises((TypeError, ValueError)):
        gk.launch(shift, True, inputs=[x], outputs=[y, 0, 1.0], device=device)     # a bool grid


def test_a_plan_keeps_no_array_alive(device, rng):
    x = gk.array(rng.normal(size=12), dtype=gk.float64, device=device)
    y = gk.zeros(8, dtype=gk.float64, device=device)
    for _ in range(3):
        gk.launch(shift, 8, inputs=[x], outputs=[y, 0, 2.0], device=device)
    refs = [weakref.ref(x), weakref.ref(y)]
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)
    z = gk.array(rng.normal(size=12), dtype=gk.float64, device=device)     # may reuse the freed ids
    w = gk.zeros(8, dtype=gk.float64, device=device)
    gk.launch(shift, 8, inputs=[z, w, 1, 3.0], device=device)
    np.testing.assert_allclose(w.numpy(), z.numpy()[1:9] * 3.0, rtol=1e-15)


def test_settings_changed_between_launches_take_effect(device, rng):
    x = gk.array(rng.normal(size=12), dtype=gk.float64, device=device)
    y = gk.zeros(8, dtype=gk.float64, device=device)
    for _ in range(2):
        gk.launch(shift, 8, inputs=[x], outputs=[y, 0, 1.0], device=device)
    planned = shift._plan.spec
    gk.config.fast_math = True
    try:
        gk.launch(shift, 8, inputs=[x], outputs=[y, 2, 1.0], device=device)
        assert shift._plan.spec is not planned and shift._plan.spec.options.fast_math
    finally:
        gk.config.fast_math = False
    np.testing.assert_allclose(y.numpy(), x.numpy()[2:10], rtol=1e-15)


def test_threads_sharing_a_kernel(device, rng):
    n, rounds = 64, 200
    xs = [gk.array(rng.normal(size=n), dtype=gk.float64, device=device) for _ in range(3)]
    ys = [gk.zeros(n, dtype=gk.float64, device=device) for _ in range(3)]
    errors = []

    def work(k):
        try:
            for _ in range(rounds):
                gk.launch(axpy, n, inputs=[xs[k]], outputs=[ys[k], float(k + 1)], device=device)
        except BaseException as exc:     # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(3):
        np.testing.assert_allclose(ys[k].numpy(), rounds * (k + 1) * np.sin(xs[k].numpy()), rtol=1e-12)


def test_taped_planned_launches_give_the_gradient(device, rng):
    n, steps = 16, 6
    x = gk.array(rng.normal(size=n), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    coeffs = rng.normal(size=steps)
    tape = gk.Tape()
    with tape:
        for a in coeffs:
            gk.launch(axpy, n, inputs=[x], outputs=[y, float(a)], device=device)
    tape.backward(grads={y: gk.ones_like(y)})
    xs = x.numpy()
    np.testing.assert_allclose(y.numpy(), coeffs.sum() * np.sin(xs), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), coeffs.sum() * np.cos(xs), rtol=1e-12)
    assert [float(r.args[2]) for r in tape.launches] == list(coeffs)
