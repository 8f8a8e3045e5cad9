"""Gradient buffers of intermediates nobody holds (issue 43 item 1, runtime/tape/grad_pool.py): random
time-stepped programs whose intermediates the user drops give the gradients of the same program with every
intermediate held, and both match central differences of a float64 NumPy run; repeated passes, zero(), reset
and the size thresholds; two gradients alive at once never share a buffer. On every device. What counts as
holding an array, retain_grad and the errors: test_grad_buffers_holding.py."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.arrays import grad_state
from gradkit.runtime.tape import grad_pool
from grad_buffer_cases import (
    _dropped_chain, _released_ids, accumulate, central_difference, mix, random_program, run_program, squash,
    sum_squares,
)
from heat_kernels import heat

F64 = gk.float64
# the pool counts references with sys.getrefcount, exact on CPython 3.10-3.13 with the GIL (else it is off)
pytestmark = pytest.mark.skipif(not grad_pool.COUNTED, reason="no exact reference counts: the pool is off")


@pytest.fixture
def pool_everything(monkeypatch):
    """Pool arrays of any size, so small test arrays exercise the pool."""
    monkeypatch.setattr(grad_pool, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(grad_pool, "POOL_MIN_TOTAL", 0)


@pytest.mark.parametrize("seed", range(4))
def test_dropped_intermediates_give_the_held_gradient(device, rng, seed, pool_everything):
    """Random programs: the input's gradient with intermediates dropped (pooled) equals the one with every
    intermediate held, and both equal central differences of the float64 NumPy program (random directions)."""
    program = random_program(rng, 6 + seed)
    u0_np = rng.uniform(-1, 1, (9, 11))
    w_np = rng.uniform(-1, 1, (9, 11))
    held_tape, held_u0, kept = run_program(program, u0_np, w_np, device, hold=True)
    tape, u0, _ = run_program(program, u0_np, w_np, device, hold=False)
    assert len(held_tape._released) == 1                 # only `ws`, dropped in both runs, was pooled
    assert len(tape._released) >= len(program)           # the dropped states too
    slots = sum(len(v) for v in tape._pool.slots.values())
    assert slots < len(program)                          # and buffers were reused
    got, want = u0.grad.numpy(), held_u0.grad.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for _ in range(3):
        d = rng.standard_normal(u0_np.shape)
        fd = central_difference(program, u0_np, w_np, d)
        assert np.isclose(np.sum(got * d), fd, rtol=1e-6, atol=1e-7 * np.sum(np.abs(got * d)))


def test_repeated_passes_and_zero(device, rng, pool_everything):
    """tape.zero() then backward again gives the same gradient; a second pass without zero() accumulates into
    the input as with held intermediates (intermediates start each pass from zero either way)."""
    program = random_program(rng, 7)
    u0_np, w_np = rng.uniform(-1, 1, (8, 8)), rng.uniform(-1, 1, (8, 8))
    results = {}
    for hold in (True, False):
        tape, u0, kept = run_program(program, u0_np, w_np, device, hold=hold)
        first = u0.grad.numpy().copy()
        tape.backward(loss=tape.records[-1].args[-1])      # no zero(): the input accumulates twice
        second = u0.grad.numpy().copy()
        tape.zero()
        tape.backward(loss=tape.records[-1].args[-1])
        third = u0.grad.numpy().copy()
        results[hold] = (first, second, third)
        np.testing.assert_allclose(second, 2 * first, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(third, first, rtol=1e-12, atol=1e-12)
    for a, b in zip(results[True], results[False]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_small_arrays_are_not_pooled(device, monkeypatch):
    """Arrays under POOL_MIN_BYTES (the default: 64 KiB), or all together under POOL_MIN_TOTAL, keep their
    gradients: a 6x8 float64 chain."""
    tape, u0, _, ids = _dropped_chain(device)
    assert not tape._released
    assert all(a.grad is not None for a in tape.gradients)
    monkeypatch.setattr(grad_pool, "POOL_MIN_BYTES", 0)
    tape, u0, _, ids = _dropped_chain(device)
    assert not tape._released
    monkeypatch.setattr(grad_pool, "POOL_MIN_TOTAL", 0)
    tape, u0, _, ids = _dropped_chain(device)
    assert set(ids) <= _released_ids(tape)


def test_plan_never_shares_a_buffer_between_live_gradients(rng):
    """The pool plan on random record lists: two arrays whose live ranges (first to last record using them)
    overlap never get the same slot; every array gets a slot handed out at its last use and returned at its
    first. A plan that reused a slot too early fails here."""

    class Rec:
        def __init__(self, args):
            self.args = args

    class Arr:
        def __init__(self, shape):
            self.shape, self.dtype, self.device = shape, F64, None

    for _ in range(200):
        arrays = [Arr((2,) if rng.integers(2) else (3,)) for _ in range(int(rng.integers(2, 9)))]
        records = [Rec([arrays[j] for j in rng.choice(len(arrays), size=int(rng.integers(1, 4)))])
                   for _ in range(int(rng.integers(1, 12)))]
        used = {id(a): a for r in records for a in r.args}
        plan = grad_pool.PoolPlan(records, used)
        span, slot_of = {}, {}
        for i, r in enumerate(records):
            for a in r.args:
                lo, hi = span.get(id(a), (i, i))
                span[id(a)] = (min(lo, i), max(hi, i))
        for i, entries in plan.take.items():
            for a, key, slot in entries:
                assert span[id(a)][1] == i
                slot_of[id(a)] = (key, slot)
        for i, entries in plan.give.items():
            for a, key, slot in entries:
                assert span[id(a)][0] == i and slot_of[id(a)] == (key, slot)
        assert set(slot_of) == set(used)
        ids = list(used)
        for p in range(len(ids)):
            for q in range(p + 1, len(ids)):
                (a0, a1), (b0, b1) = span[ids[p]], span[ids[q]]
                if slot_of[ids[p]] == slot_of[ids[q]]:
                    assert a1 < b0 or b1 < a0, "two live gradients share a pooled buffer"


def test_default_thresholds_pool_large_arrays(device, rng):
    """At the default thresholds, five 2 MiB intermediates are pooled and the gradient still matches."""
    program = [("heat", 0), ("squash", 0), ("heat", 0), ("mix", 1)]
    u0_np, w_np = rng.uniform(-1, 1, (512, 512)), rng.uniform(-1, 1, (512, 512))
    _, held_u0, _ = run_program(program, u0_np, w_np, device, hold=True)
    tape, u0, _ = run_program(program, u0_np, w_np, device, hold=False)
    assert len(tape._released) >= 3
    np.testing.assert_allclose(u0.grad.numpy(), held_u0.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_zero_defers_only_gradients_nothing_else_holds(device, rng, pool_everything):
    """tape.zero() leaves a gradient that only its array refers to for the first read to zero (right before
    the adjoint that accumulates into it); a gradient array the user holds, or a NumPy view of, is zeroed at
    once. Either way every read sees zeros, and the next pass the held run's gradients."""
    program = random_program(rng, 5)
    u0_np, w_np = rng.uniform(-1, 1, (6, 7)), rng.uniform(-1, 1, (6, 7))
    tape, u0, kept = run_program(program, u0_np, w_np, device, hold=True)
    first = [a.grad.copy().numpy() for a in kept]     # a copy's view: the gradients stay unexposed
    held_grad = kept[0].grad                            # the user holds this gradient array itself
    view = kept[3].grad.numpy()                         # and a NumPy view of this one's memory (a copy
                                                        # on devices without host memory: nothing held)
    tape.zero()
    assert kept[1]._gstate == grad_state.ZERO and kept[1]._grad is not None    # deferred
    assert kept[0]._gstate is None                                           # held: zeroed now
    assert (kept[3]._gstate is None) == (view.base is not None)
    np.testing.assert_array_equal(held_grad.numpy(), 0.0)
    np.testing.assert_array_equal(kept[2].grad.numpy(), 0.0)                 # a read zeroes it
    tape.zero()
    tape.backward(loss=tape.records[-1].args[-1])
    for a, want in zip(kept, first):
        np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12, atol=1e-12)
    del held_grad
    tape.zero()
    tape.backward(loss=tape.records[-1].args[-1])
    for a, want in zip(kept, first):
        np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12, atol=1e-12)


def test_reset_and_record_again_reuses_the_pool(device, rng, pool_everything):
    """An iteration loop (reset, record with fresh intermediates, zero, backward) keeps giving the held run's
    gradient, and the tape's pool stays the same few buffers across iterations."""
    program = random_program(rng, 6)
    u0_np, w_np = rng.uniform(-1, 1, (5, 6)), rng.uniform(-1, 1, (5, 6))
    _, held_u0, _ = run_program(program, u0_np, w_np, device, hold=True)
    want = held_u0.grad.numpy()
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    w = gk.array(w_np, dtype=F64, device=device)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    sizes = []
    for _ in range(3):
        tape.reset()
        loss.zero_()
        states = [u0]
        with tape:
            for op, back in program:
                v = gk.zeros((5, 6), dtype=F64, device=device, requires_grad=True)
                if op == "heat":
                    gk.launch(heat, (5, 6), inputs=[states[-1]], outputs=[v], device=device)
                elif op == "squash":
                    gk.launch(squash, (5, 6), inputs=[states[-1]], outputs=[v], device=device)
                else:
                    gk.launch(mix, (5, 6), inputs=[states[-1], states[back]], outputs=[v], device=device)
                    if op == "mix_acc":
                        gk.launch(accumulate, (5, 6), inputs=[states[back]], outputs=[v], device=device)
                states.append(v)
            gk.launch(sum_squares, (5, 6), inputs=[states[-1]], outputs=[loss], device=device)
            ws = gk.zeros((5, 6), dtype=F64, device=device, requires_grad=True)
            gk.launch(mix, (5, 6), inputs=[states[1], w], outputs=[ws], device=device)
            gk.launch(sum_squares, (5, 6), inputs=[ws], outputs=[loss], device=device)
        del states, v, ws
        tape.zero()
        tape.backward(loss=loss)
        assert len(tape._released) == len(program) + 1
        sizes.append(sum(len(v) for v in tape._pool.slots.values()))
        np.testing.assert_allclose(u0.grad.numpy(), want, rtol=1e-12, atol=1e-12)
    assert sizes[0] == sizes[-1] < len(program)


def test_without_exact_reference_counts_nothing_is_pooled(device, monkeypatch, pool_everything):
    """Where sys.getrefcount is not exact (COUNTED false: CPython 3.14+, free-threaded builds) every gradient
    is kept and zeroed eagerly, as before the pool."""
    monkeypatch.setattr(grad_pool, "COUNTED", False)
    tape, _, _, ids = _dropped_chain(device)
    assert not tape._released
    assert all(a.grad is not None for a in tape.gradients)
    tape.zero()
    assert all(a._gstate is None for a in tape.gradients)
