"""Gradient pool (issue 43 item 1, runtime/tape/grad_pool.py), what keeps a gradient: `retain_grad` keeps
one; an intermediate found again through the tape after the pass raises `GradientNotKeptError` (never a reused
buffer's values); anything that holds an array (a variable, container, closure, its `.grad`, a NumPy view of
that, another tape, a seed, adopted memory) keeps it out of the pool; bundles need kept gradients. On every
device. Pooled gradients against references: test_grad_buffers.py."""

import gc
import weakref

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.arrays import grad_state
from gradkit.runtime.arrays.grad_state import GradientNotKeptError
from gradkit.runtime.tape import grad_pool
from grad_buffer_cases import (
    _closure, _dropped_chain, _in_box, _released_ids, _state, random_program, run_program, squash, sum_squares,
)

F64 = gk.float64
# the pool counts references with sys.getrefcount, exact on CPython 3.10-3.13 with the GIL (else it is off)
pytestmark = pytest.mark.skipif(not grad_pool.COUNTED, reason="no exact reference counts: the pool is off")


@pytest.fixture
def pool_everything(monkeypatch):
    """Pool arrays of any size, so small test arrays exercise the pool."""
    monkeypatch.setattr(grad_pool, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(grad_pool, "POOL_MIN_TOTAL", 0)


def test_retain_grad_keeps_an_intermediate(device, rng, pool_everything):
    """A dropped intermediate made with retain_grad() keeps its own gradient: the held run's value."""
    program = random_program(rng, 6)
    u0_np, w_np = rng.uniform(-1, 1, (7, 9)), rng.uniform(-1, 1, (7, 9))
    _, _, kept = run_program(program, u0_np, w_np, device, hold=True)
    tape, _, _ = run_program(program, u0_np, w_np, device, hold=False, retain=3)
    retained = _state(tape, 3)
    assert retained._retain and retained not in tape._released
    np.testing.assert_allclose(retained.grad.numpy(), kept[2].grad.numpy(), rtol=1e-12, atol=1e-12)


def test_dropped_then_found_again_raises_then_restarts(device, rng, pool_everything):
    """An intermediate found again through the tape after a pooled pass: .grad raises GradientNotKeptError;
    tape.zero() makes it a known zero; held from then on, the next pass keeps its (right) gradient."""
    program = random_program(rng, 6)
    u0_np, w_np = rng.uniform(-1, 1, (6, 10)), rng.uniform(-1, 1, (6, 10))
    _, _, kept = run_program(program, u0_np, w_np, device, hold=True)
    tape, _, _ = run_program(program, u0_np, w_np, device, hold=False)
    x = _state(tape, 4)
    with pytest.raises(GradientNotKeptError, match="retain_grad"):
        x.grad
    assert isinstance(GradientNotKeptError("m"), gk.GradkitError)
    assert x.requires_grad and x not in tape.gradients
    tape.zero()
    np.testing.assert_array_equal(x.grad.numpy(), 0.0)           # a zero made on reading
    tape.backward(loss=tape.records[-1].args[-1])                # x is held now (this frame): kept
    assert x not in tape._released
    np.testing.assert_allclose(x.grad.numpy(), kept[3].grad.numpy(), rtol=1e-12, atol=1e-12)


def test_found_again_before_zero_starts_from_zero(device, rng, pool_everything):
    """Held again without zero(), the next backward treats the dropped gradient as the zero a new pass
    starts intermediates from (as it clears a kept one); `requires_grad = True` restarts one from zero."""
    program = random_program(rng, 5)
    u0_np, w_np = rng.uniform(-1, 1, (5, 5)), rng.uniform(-1, 1, (5, 5))
    _, _, kept = run_program(program, u0_np, w_np, device, hold=True)
    tape, _, _ = run_program(program, u0_np, w_np, device, hold=False)
    x = _state(tape, 2)
    tape.backward(loss=tape.records[-1].args[-1])
    np.testing.assert_allclose(x.grad.numpy(), kept[1].grad.numpy(), rtol=1e-12, atol=1e-12)
    y = gk.zeros((3, 3), dtype=F64, device=device, requires_grad=True)
    y._grad, y._gstate = None, grad_state.DROPPED
    with pytest.raises(GradientNotKeptError):
        y.grad
    y.requires_grad = True
    np.testing.assert_array_equal(y.grad.numpy(), 0.0)


def test_what_holds_an_array_keeps_it(device, pool_everything):
    """A list, a dict, a closure, an attribute, its .grad, a NumPy view of its .grad, a view of the array and
    another tape each keep the middle intermediate out of the pool (with its right gradient); a weak
    reference does not, and the array found through it raises GradientNotKeptError."""
    _, base_u0, kept, _ = _dropped_chain(device, keep=lambda k, s: s)
    holds = {"list": lambda s: [s], "dict": lambda s: {"s": s}, "closure": _closure, "attribute": _in_box,
             "grad": lambda s: s.grad, "numpy view of grad": lambda s: s.grad.numpy(),
             "view": lambda s: s.reshape(48)}
    for name, hold in holds.items():
        tape, u0, holders, ids = _dropped_chain(device, keep=lambda k, s: hold(s) if k == 1 else None)
        released = _released_ids(tape)
        # a NumPy "view" is a copy on devices without host memory: nothing of the array is held then
        held = name != "numpy view of grad" or holders[1].base is not None
        assert (ids[1] not in released) == held, name
        assert ids[0] in released and ids[2] in released, name
        np.testing.assert_allclose(u0.grad.numpy(), base_u0.grad.numpy(), rtol=1e-12, atol=1e-12)
        if name == "grad":
            np.testing.assert_allclose(holders[1].numpy(), kept[1].grad.numpy(), rtol=1e-12, atol=1e-12)
    tape, u0, _, ids = _dropped_chain(device, other=gk.Tape())
    assert ids[1] not in _released_ids(tape) and ids[0] in _released_ids(tape)
    np.testing.assert_allclose(u0.grad.numpy(), base_u0.grad.numpy(), rtol=1e-12, atol=1e-12)
    tape, u0, refs, ids = _dropped_chain(device, keep=lambda k, s: weakref.ref(s))
    assert set(ids) <= _released_ids(tape)
    np.testing.assert_allclose(u0.grad.numpy(), base_u0.grad.numpy(), rtol=1e-12, atol=1e-12)
    gc.collect()
    s = refs[1]()
    assert s is not None                          # the tape keeps it alive
    with pytest.raises(GradientNotKeptError):
        s.grad


def test_seeded_intermediate_is_not_pooled(device, rng, pool_everything):
    """grads={s: g} on an intermediate the user then drops: its gradient is the seed, kept."""
    u0 = gk.array(rng.uniform(-1, 1, (4, 5)), dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        s1 = gk.zeros((4, 5), dtype=F64, device=device, requires_grad=True)
        gk.launch(squash, (4, 5), inputs=[u0], outputs=[s1], device=device)
        s2 = gk.zeros((4, 5), dtype=F64, device=device, requires_grad=True)
        gk.launch(squash, (4, 5), inputs=[s1], outputs=[s2], device=device)
    seed = rng.uniform(-1, 1, (4, 5))
    tape.backward(grads={s2: gk.array(seed, dtype=F64, device=device)})
    s2_id = id(s2)
    del s1
    s2 = None
    tape.zero()
    s2 = tape.launches[1].outputs[0]
    assert id(s2) == s2_id
    tape.backward(grads={s2: gk.array(seed, dtype=F64, device=device)})
    assert s2_id not in _released_ids(tape) and id(tape.launches[0].outputs[0]) in _released_ids(tape)
    np.testing.assert_array_equal(s2.grad.numpy(), seed)
    v = u0.numpy()
    s1 = 0.5 * np.sin(v) * v + 0.5 * v
    ds = 0.5 * (np.cos(s1) * s1 + np.sin(s1) + 1)
    want = seed * ds * 0.5 * (np.cos(v) * v + np.sin(v) + 1)
    np.testing.assert_allclose(u0.grad.numpy(), want, rtol=1e-12, atol=1e-12)


def test_gradient_over_adopted_memory_is_never_pooled_or_deferred(rng, pool_everything):
    """A `.grad` sharing a torch tensor's memory (gk.from_torch, host memory) is seen through that tensor,
    which refers to the memory and not to the gk.array: it is zeroed at once and its array never pooled."""
    torch = pytest.importorskip("torch")
    _, _, kept, ids = _dropped_chain("cpu", keep=lambda k, s: s)
    want = kept[1].grad.numpy().copy()
    tensors = []

    def share(k, s):                     # s.grad over a torch tensor's memory; only the tensor is kept
        if k == 1:
            t = torch.zeros((6, 8), dtype=torch.float64)
            s.grad = gk.from_torch(t, requires_grad=False)
            tensors.append(t)
        return None

    tape, _, _, ids = _dropped_chain("cpu", keep=share)
    assert ids[1] not in _released_ids(tape) and ids[0] in _released_ids(tape)
    np.testing.assert_allclose(tensors[0].numpy(), want, rtol=1e-12, atol=1e-12)
    tape.zero()
    np.testing.assert_array_equal(tensors[0].numpy(), 0.0)      # zeroed at once, not on a later read


def test_bundles_and_gradient_pictures_need_kept_gradients(device, tmp_path, pool_everything):
    """tape.save() and visualize(show_gradients=True) after a pass that pooled gradients raise
    GradientNotKeptError naming the way out (a bundle would show those arrays as cut off from the loss); a
    snapshotting tape (what `gradkit debug` records) pools nothing and saves."""
    tape, _, _, ids = _dropped_chain(device)
    assert set(ids) <= _released_ids(tape)
    tape.visualize()                                   # values only: fine
    for call in (lambda: tape.save(tmp_path / "b"), lambda: tape.visualize(show_gradients=True)):
        with pytest.raises(GradientNotKeptError, match="snapshots=True"):
            call()
    assert not (tmp_path / "b").exists()
    u0 = gk.array(np.linspace(-1, 1, 48).reshape(6, 8), dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape(snapshots=True)
    with tape:
        u = u0
        for _ in range(3):
            s = gk.zeros((6, 8), dtype=F64, device=device, requires_grad=True)
            gk.launch(squash, (6, 8), inputs=[u], outputs=[s], device=device)
            u = s
        gk.launch(sum_squares, (6, 8), inputs=[u], outputs=[loss], device=device)
    del u, s
    tape.backward(loss=loss)
    assert not tape._released
    tape.save(tmp_path / "kept")
    assert (tmp_path / "kept").exists()
