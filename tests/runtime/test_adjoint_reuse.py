"""Prepared adjoints kept from one tape to the next (runtime/launch/adjoint_reuse.py): a new tape per
iteration on the same arrays reuses the bindings and gives the gradients a fresh binding gives; a
binding is not reused once an array it names is gone, its `.grad` is another array, the settings changed,
or a scalar differs in its bits (0.0 and -0.0)."""

import gc

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.launch import adjoint_reuse, launch as launch_mod


@gk.kernel
def step(x: gk.array(dtype=gk.float64, ndim=2), w: gk.array(dtype=gk.float64), t: int, s: gk.float64):
    i = gk.tid()
    x[t, i] = gk.sin(x[t - 1, i]) * w[i] + s * x[t - 1, i]


@gk.kernel
def total(x: gk.array(dtype=gk.float64, ndim=2), t: int, l: gk.array(dtype=gk.float64)):
    l[0] += x[t, gk.tid()] * x[t, gk.tid()]


def _run(x, w, l, steps, s=0.5):
    l.zero_()
    for a in (x, w, l):
        a.grad.zero_()
    with gk.Tape() as tape:
        for t in range(1, steps):
            gk.launch(step, w.shape[0], inputs=[x, w, t, s])
        gk.launch(total, w.shape[0], inputs=[x, steps - 1, l])
    tape.backward(loss=l)
    return tape, w.grad.numpy().copy(), x.grad.numpy().copy()


def _arrays(device, rng, steps=6, n=5):
    x = gk.array(rng.normal(size=(steps, n)), dtype=gk.float64, device=device, requires_grad=True)
    w = gk.array(rng.normal(size=n), dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    return x, w, l


def _counting(monkeypatch):
    calls = [0]
    real = adjoint_reuse.prepare_adjoint

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(adjoint_reuse, "prepare_adjoint", counting)
    return calls


def test_a_second_tape_reuses_the_bindings_with_the_same_gradients(device, rng, monkeypatch):
    calls = _counting(monkeypatch)
    x, w, l = _arrays(device, rng)
    _, gw1, gx1 = _run(x, w, l, 6)
    first = calls[0]
    assert first == 6                                    # 5 steps (one per t) and the loss
    _, gw2, gx2 = _run(x, w, l, 6)
    assert calls[0] == first                             # nothing bound again
    np.testing.assert_array_equal(gw1, gw2)
    np.testing.assert_array_equal(gx1, gx2)


def test_reused_bindings_match_launch_adjoints(device, rng, monkeypatch):
    x, w, l = _arrays(device, rng)
    _run(x, w, l, 6)
    _, gw_fast, gx_fast = _run(x, w, l, 6)
    # every adjoint through gk.launch(adjoint=True): what a tape without prepared adjoints runs
    monkeypatch.setattr(adjoint_reuse, "adjoint_for", lambda *a: None)
    _, gw_slow, gx_slow = _run(x, w, l, 6)
    np.testing.assert_allclose(gw_fast, gw_slow, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gx_fast, gx_slow, rtol=1e-12, atol=1e-14)


def test_a_new_grad_array_is_bound_afresh(device, rng, monkeypatch):
    calls = _counting(monkeypatch)
    x, w, l = _arrays(device, rng)
    _, gw1, _ = _run(x, w, l, 4)
    before = calls[0]
    w.grad = gk.zeros_like(w.grad)                      # another gradient array: the recipes must not revive
    _, gw2, _ = _run(x, w, l, 4)
    assert calls[0] > before
    np.testing.assert_array_equal(gw1, gw2)
    assert np.any(w.grad.numpy() != 0)                  # the new .grad received the gradient


def test_freed_arrays_leave_no_binding_to_revive(device, rng):
    step.__dict__.pop("_adjoint_recipes", None)         # (other tests' recipes name their own arrays)
    x, w, l = _arrays(device, rng)
    _run(x, w, l, 4)
    recipes = list(step._adjoint_recipes.values())
    assert len(recipes) == 3 and all(r.revive() is not None for r in recipes)
    del x, w, l
    gc.collect()
    assert all(r.revive() is None for r in recipes)     # weak references only: the arrays were freed


def test_zero_and_negative_zero_are_different_bindings(device, rng, monkeypatch):
    calls = _counting(monkeypatch)
    x, w, l = _arrays(device, rng)
    _run(x, w, l, 3, s=0.0)
    n = calls[0]
    _run(x, w, l, 3, s=-0.0)
    assert calls[0] > n
    keys = [k for k in step._adjoint_recipes if k[-1] == (np.float64, np.float64(-0.0).tobytes())]
    assert keys


def test_settings_change_binds_again(device, rng, monkeypatch):
    calls = _counting(monkeypatch)
    x, w, l = _arrays(device, rng)
    _, g1, _ = _run(x, w, l, 4)
    n = calls[0]
    old = gk.config.fast_math
    gk.config.fast_math = not old
    try:
        _, g2, _ = _run(x, w, l, 4)
    finally:
        gk.config.fast_math = old
    assert calls[0] > n                                 # the recipes were made under other settings
    np.testing.assert_allclose(g1, g2, rtol=1e-6)


@gk.kernel
def square_in_place(y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = y[i] * y[i]


@gk.kernel
def reduce_sum(y: gk.array(dtype=gk.float64), l: gk.array(dtype=gk.float64)):
    l[0] += y[gk.tid()]


@pytest.mark.filterwarnings("ignore::gradkit.GradientRuleWarning")
def test_records_with_saved_copies_are_not_kept(device, rng):
    y0 = rng.normal(size=4)
    y = gk.array(y0, dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    square_in_place.__dict__.pop("_adjoint_recipes", None)
    for _ in range(2):
        y.assign(gk.array(y0, dtype=gk.float64, device=device))
        y.grad.zero_()
        l.zero_()
        with gk.Tape() as tape:
            gk.launch(square_in_place, 4, inputs=[y])
            gk.launch(reduce_sum, 4, inputs=[y, l])
        tape.backward(loss=l)
        np.testing.assert_allclose(y.grad.numpy(), 2 * y0, rtol=1e-12)
    assert not square_in_place.__dict__.get("_adjoint_recipes")     # its adjoint reads a copy: new each time


def test_recipe_store_is_bounded(device, rng, monkeypatch):
    monkeypatch.setattr(adjoint_reuse, "MAX_RECIPES", 4)
    x, w, l = _arrays(device, rng, steps=12)
    _run(x, w, l, 12)
    assert len(step._adjoint_recipes) <= 4
    assert launch_mod.PreparedAdjoint is adjoint_reuse.PreparedAdjoint
