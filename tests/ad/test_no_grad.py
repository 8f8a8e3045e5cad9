"""`with gk.no_grad():` (launches and copies inside are not recorded; the tape differentiates around them,
holding their results constant) and Taichi's `f.grad(...)` on a `@gk.grad_replaced` function — against
analytic float64 gradients on random inputs, on every device."""

import threading

import numpy as np
import pytest

import gradkit as gk

A = gk.array(dtype=gk.float64)


@gk.kernel
def square(x: A, y: A):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def sine(y: A, z: A):
    i = gk.tid()
    z[i] = gk.sin(y[i])


@gk.kernel
def times(z: A, x: A, w: A):
    i = gk.tid()
    w[i] = z[i] * x[i]


def _arrays(x0, device):
    x = gk.array(x0, dtype=gk.float64, device=device, requires_grad=True)
    y, z, w = (gk.zeros(len(x0), dtype=gk.float64, device=device, requires_grad=True) for _ in range(3))
    return x, y, z, w


def test_no_grad_launches_are_constants(device, rng):
    """w = sin(x²)·x with the sine under no_grad: dw/dx = sin(x²) only (the no_grad value is a constant)."""
    x0 = rng.uniform(-1.5, 1.5, 6)
    x, y, z, w = _arrays(x0, device)
    with gk.Tape() as tape:
        gk.launch(square, 6, inputs=[x, y], device=device)
        with gk.no_grad():
            gk.launch(sine, 6, inputs=[y, z], device=device)
        gk.launch(times, 6, inputs=[z, x, w], device=device)
    assert [r.kernel for r in tape.launches] == ["square", "times"]
    seed = rng.normal(size=6)
    tape.backward(grads={w: gk.array(seed, device=device)})
    np.testing.assert_allclose(w.numpy(), np.sin(x0 ** 2) * x0, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), seed * np.sin(x0 ** 2), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), 0.0)          # nothing recorded reads y's gradient


def test_no_grad_copies_are_not_recorded(device, rng):
    x0 = rng.normal(size=5)
    x, y, z, w = _arrays(x0, device)
    with gk.Tape() as tape:
        gk.launch(square, 5, inputs=[x, y], device=device)
        with gk.no_grad():
            gk.copy(z, y)
        gk.launch(times, 5, inputs=[z, x, w], device=device)
    tape.backward(grads={w: gk.array(np.ones(5), device=device)})
    np.testing.assert_allclose(x.grad.numpy(), x0 ** 2, rtol=1e-12)   # z = x² held constant


def test_full_tape_for_comparison(device, rng):
    """Without no_grad the same program gets the whole derivative: a check that the test above can fail."""
    x0 = rng.uniform(-1.5, 1.5, 6)
    x, y, z, w = _arrays(x0, device)
    with gk.Tape() as tape:
        gk.launch(square, 6, inputs=[x, y], device=device)
        gk.launch(sine, 6, inputs=[y, z], device=device)
        gk.launch(times, 6, inputs=[z, x, w], device=device)
    tape.backward(grads={w: gk.array(np.ones(6), device=device)})
    np.testing.assert_allclose(x.grad.numpy(), np.sin(x0 ** 2) + 2 * x0 ** 2 * np.cos(x0 ** 2), rtol=1e-12)


def test_no_grad_restores_the_tape(device):
    x, y, z, w = _arrays(np.ones(3), device)
    with gk.no_grad():                        # no tape: nothing to suspend
        gk.launch(square, 3, inputs=[x, y], device=device)
    with gk.Tape() as tape:
        with pytest.raises(ValueError):
            with gk.no_grad():
                with gk.no_grad():            # nests
                    gk.launch(square, 3, inputs=[x, y], device=device)
                raise ValueError("inside")
        gk.launch(sine, 3, inputs=[y, z], device=device)   # recorded again after the exception
        with gk.no_grad():
            with gk.Tape() as inner:          # a tape of its own inside no_grad is allowed
                gk.launch(times, 3, inputs=[z, x, w], device=device)
        gk.launch(square, 3, inputs=[x, y], device=device)
    assert [r.kernel for r in tape.launches] == ["sine", "square"]
    assert [r.kernel for r in inner.launches] == ["times"]


def test_writes_under_no_grad_are_still_caught(device):
    """no_grad stops recording, not the check that recorded inputs were not overwritten."""
    x, y, z, w = _arrays(np.linspace(0.1, 1.0, 4), device)
    with gk.Tape() as tape:
        gk.launch(times, 4, inputs=[y, x, w], device=device)
        with gk.no_grad():
            gk.launch(square, 4, inputs=[z, x], device=device)     # overwrites x, which `times` read
    with pytest.raises(gk.GradientRuleError, match="'x'|modified"):
        tape.backward(grads={w: gk.array(np.ones(4), device=device)})


def test_no_grad_is_per_thread(device):
    """no_grad in one thread leaves another thread's tape recording."""
    x, y, z, w = _arrays(np.ones(3), device)
    entered, release = threading.Event(), threading.Event()

    def other():
        with gk.no_grad():
            entered.set()
            release.wait(30)

    t = threading.Thread(target=other)
    t.start()
    entered.wait(30)
    with gk.Tape() as tape:
        gk.launch(square, 3, inputs=[x, y], device=device)
    release.set()
    t.join()
    kernels = [r.kernel for r in tape.launches]
    assert kernels == ["square"]


@gk.no_grad
@gk.kernel
def sine_untaped(y: A, z: A):
    i = gk.tid()
    z[i] = gk.sin(y[i])


@gk.no_grad
def monitor(y, z, device):
    gk.launch(sine, len(y), inputs=[y, z], device=device)
    return "done"


def test_no_grad_decorators(device, rng):
    """@gk.no_grad on a kernel (Taichi's @ti.ad.no_grad: never recorded, a no-op gradient) and on a
    Python function (it runs under no_grad): the same derivative as the block form."""
    x0 = rng.uniform(-1.5, 1.5, 6)
    for run_sine in (lambda y, z: gk.launch(sine_untaped, 6, inputs=[y, z], device=device),
                     lambda y, z: monitor(y, z, device)):
        x, y, z, w = _arrays(x0, device)
        with gk.Tape() as tape:
            gk.launch(square, 6, inputs=[x, y], device=device)
            run_sine(y, z)
            gk.launch(times, 6, inputs=[z, x, w], device=device)
        assert [r.kernel for r in tape.launches] == ["square", "times"]
        tape.backward(grads={w: gk.array(np.ones(6), device=device)})
        np.testing.assert_allclose(x.grad.numpy(), np.sin(x0 ** 2), rtol=1e-12)
    assert monitor.__name__ == "monitor"
    with pytest.raises(TypeError, match="gk.no_grad takes a kernel or a function"):
        gk.no_grad(3)


@gk.kernel
def cube(x: A, y: A):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i]


@gk.grad_replaced
def apply_cube(x, y):
    gk.launch(cube, x.shape[0], inputs=[x, y], device=x.device)


@gk.grad_for(apply_cube)
def apply_cube_grad(x, y):
    gk.launch(cube, x.shape[0], inputs=[x, y], outputs=[], device=x.device, adjoint=True,
              adj_inputs=[x.grad, y.grad], adj_outputs=[])


@gk.grad_replaced
def no_backward(x):
    pass


def test_grad_replaced_grad_runs_grad_for(device, rng):
    """Taichi's `f.grad(*args)`: the @gk.grad_for function runs directly (x.grad += 3x²·y.grad)."""
    x0, g0, s0 = rng.normal(size=5), rng.normal(size=5), rng.normal(size=5)
    x, y, _, _ = _arrays(x0, device)
    x.grad.assign(g0)
    y.grad.assign(s0)
    with gk.Tape() as tape:                  # .grad records nothing, even inside a tape
        apply_cube.grad(x, y)
    assert tape.records == []
    np.testing.assert_allclose(x.grad.numpy(), g0 + 3 * x0 ** 2 * s0, rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"no_backward\.grad.*@gk\.grad_for\(no_backward\)"):
        no_backward.grad(x)
