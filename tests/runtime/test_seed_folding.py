"""Seeds as users write them (runtime/tape/seeds.py, issue 43): `tape.backward(grads={y: gk.ones_like(y)})`
and `loss=` fold the constant into the adjoints that read it, giving the gradients of the folded launch
(`adj_outputs=[1.0]`), of the unfolded pass and of NumPy float64 derivatives, on random inputs, every
device; every `.grad` the pass leaves is the unfolded pass's, and a seed changed between passes is read."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.tape import seeds as seeds_mod


@gk.kernel
def stream(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    v = x[i]
    y[i] = gk.sin(v) * v + 0.5 * v * v


@gk.kernel
def square(y: gk.array(dtype=gk.float64), z: gk.array(dtype=gk.float64)):
    i = gk.tid()
    z[i] = y[i] * y[i]


@gk.kernel
def total(z: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    gk.atomic_add(loss, 0, z[gk.tid()])


def d_stream(x):
    return np.cos(x) * x + np.sin(x) + x


def f_stream(x):
    return np.sin(x) * x + 0.5 * x * x


def _arrays(device, rng, n=37):
    x = gk.array(rng.uniform(-2, 2, n), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    z = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    return x, y, z


def _unfolded(monkeypatch):
    """Turn folding off: every constant seed is assigned and read as an array, as before issue 43."""
    monkeypatch.setattr("gradkit.runtime.tape.tape.constant_value", lambda seed: None)


@pytest.mark.parametrize("fold", [True, False])
def test_ones_like_seed_gives_the_folded_launchs_gradient(device, rng, monkeypatch, fold):
    if not fold:
        _unfolded(monkeypatch)
    x, y, _ = _arrays(device, rng)
    tape = gk.Tape()
    with tape:
        gk.launch(stream, x.shape[0], inputs=[x], outputs=[y], device=device)
    tape.backward(grads={y: gk.ones_like(y)})
    got = x.grad.numpy().copy()
    assert ("@u" in tape.launches[0].adjoint_variant) == fold
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(x.shape[0]))   # the seed stays on y.grad
    x.grad.zero_()
    gk.launch(stream, x.shape[0], inputs=[x], outputs=[y], device=device, adjoint=True, adj_outputs=[1.0])
    np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got, d_stream(x.numpy()), rtol=1e-10, atol=1e-12)


def test_a_constant_seed_folds_where_nothing_wrote_its_gradient(device, rng):
    """z = stream(x)^2 seeded on z (ones) and y (0.5): square's adjoint folds z's seed and adds into y.grad,
    so stream's adjoint must read y.grad as an array (0.5 + 2y), not fold its 0.5."""
    x, y, z = _arrays(device, rng)
    tape = gk.Tape()
    with tape:
        gk.launch(stream, x.shape[0], inputs=[x], outputs=[y], device=device)
        gk.launch(square, x.shape[0], inputs=[y], outputs=[z], device=device)
    tape.backward(grads={z: gk.ones_like(z), y: gk.full(y.shape, 0.5, dtype=gk.float64, device=device)})
    xs = x.numpy()
    ys = f_stream(xs)
    np.testing.assert_allclose(x.grad.numpy(), (0.5 + 2 * ys) * d_stream(xs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), 0.5 + 2 * ys, rtol=1e-10, atol=1e-12)
    variants = [r.adjoint_variant for r in tape.launches]
    assert "@u" not in variants[0] and "@u" in variants[1]


@pytest.mark.parametrize("fold", [True, False])
def test_repeated_passes_read_a_seed_changed_between_them(device, rng, monkeypatch, fold):
    """The same seed array over passes: changed with fill_ and through a NumPy view, each pass uses the
    values it holds then (a constant or not), with the same gradients folded or not."""
    if not fold:
        _unfolded(monkeypatch)
    x, y, _ = _arrays(device, rng)
    n = x.shape[0]
    seed = gk.ones(n, dtype=gk.float64, device=device)
    tape = gk.Tape()
    with tape:
        gk.launch(stream, n, inputs=[x], outputs=[y], device=device)
    d = d_stream(x.numpy())
    noise = rng.normal(size=n)
    for values in (1.0, 1.0, -2.5, noise, 0.75):
        x.grad.zero_()
        if isinstance(values, float):
            seed.fill_(values)
        else:
            seed.numpy()[:] = values           # a write through a view: no version bump on host devices
            if not np.array_equal(seed.numpy(), values):
                seed.assign(values)            # a device array's numpy() is a copy
        tape.backward(grads={y: seed})
        np.testing.assert_allclose(x.grad.numpy(), np.asarray(values) * d, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(y.grad.numpy(), np.broadcast_to(values, (n,)), rtol=0, atol=0)


@pytest.mark.parametrize("fold", [True, False])
def test_loss_seed_on_a_one_element_output(device, rng, monkeypatch, fold):
    if not fold:
        _unfolded(monkeypatch)
        monkeypatch.setattr(seeds_mod.Folds, "fold", lambda self, prepared, kernel: None)
    x, y, z = _arrays(device, rng)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    for _ in range(2):                         # the second pass finds loss.grad already at 1
        tape.reset()
        loss.zero_()
        with tape:
            gk.launch(stream, x.shape[0], inputs=[x], outputs=[y], device=device)
            gk.launch(square, x.shape[0], inputs=[y], outputs=[z], device=device)
            gk.launch(total, x.shape[0], inputs=[z], outputs=[loss], device=device)
        tape.backward(loss=loss)
        xs = x.numpy()
        np.testing.assert_allclose(x.grad.numpy(), 2 * f_stream(xs) * d_stream(xs), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(loss.numpy()[0], np.sum(f_stream(xs) ** 2), rtol=1e-12)
        assert loss.grad.numpy()[0] == 1.0
        assert ("@u" in tape.launches[2].adjoint_variant) == fold


def test_constant_value_reads_bits():
    assert seeds_mod.constant_value(2.0) == 2.0
    assert seeds_mod.constant_value(np.full(5, 3.0)) == 3.0
    assert seeds_mod.constant_value(np.array([0.0, -0.0])) is None      # -0.0 is another seed bit for bit
    assert seeds_mod.constant_value(np.array([1.0, 1.0 + 1e-16, 1.0 + 2.3e-16])) is None
    big = np.ones(200_000)
    big[-1] = 2.0                                          # past the first chunk
    assert seeds_mod.constant_value(big) is None
