"""Gradient buffers of intermediates nobody holds (issue 43 item 1, runtime/tape/grad_pool.py): random
time-stepped programs whose intermediates the user drops give the gradients of the same program with every
intermediate held, and both match central differences of a float64 NumPy run; `retain_grad` keeps a gradient;
an intermediate found again through the tape after the pass raises `GradientNotKeptError` (never a reused
buffer's values); anything that holds an array (a variable, container, closure, its `.grad`, a NumPy view of
that, another tape) keeps it out of the pool; two gradients alive at once never share a buffer. On every
device."""

import gc
import weakref

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.arrays import grad_state
from gradkit.runtime.arrays.grad_state import GradientNotKeptError
from gradkit.runtime.tape import grad_pool
from heat_kernels import heat

F64 = gk.float64
# the pool counts references with sys.getrefcount, exact on CPython 3.10-3.13 with the GIL (else it is off)
pytestmark = pytest.mark.skipif(not grad_pool.COUNTED, reason="no exact reference counts: the pool is off")


@gk.kernel
def squash(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    v = u[i, j]
    out[i, j] = 0.5 * gk.sin(v) * v + 0.5 * v


@gk.kernel
def mix(a: gk.array(dtype=gk.float64, ndim=2), b: gk.array(dtype=gk.float64, ndim=2),
        out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    out[i, j] = 0.7 * a[i, j] * gk.cos(b[i, j]) + 0.2 * b[i, j]


@gk.kernel
def accumulate(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    out[i, j] += 0.3 * u[i, j]


@gk.kernel
def sum_squares(u: gk.array(dtype=gk.float64, ndim=2), loss: gk.array(dtype=gk.float64)):
    i, j = gk.tid()
    gk.atomic_add(loss, 0, u[i, j] * u[i, j])


def np_heat(u):
    out = u.copy()
    out[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                             - 4.0 * u[1:-1, 1:-1])
    return out


def random_program(rng, steps: int) -> list:
    """Each step: (op, index of an earlier state it also reads); `mix` reaches back, so live ranges overlap."""
    ops = []
    for s in range(steps):
        op = ["heat", "squash", "mix", "mix_acc"][rng.integers(4)]
        ops.append((op, int(rng.integers(0, s + 1))))
    return ops


def np_loss(program, u0, w):
    """The program in float64 NumPy: loss = sum(last^2) + sum(mix(s1, w)^2), s1 the first state (a second
    path from the loss into an early intermediate)."""
    states = [u0]
    for op, back in program:
        u = states[-1]
        if op == "heat":
            v = np_heat(u)
        elif op == "squash":
            v = 0.5 * np.sin(u) * u + 0.5 * u
        else:
            v = 0.7 * u * np.cos(states[back]) + 0.2 * states[back]
            if op == "mix_acc":
                v = v + 0.3 * states[back]
        states.append(v)
    return np.sum(states[-1] ** 2) + np.sum((0.7 * states[1] * np.cos(w) + 0.2 * w) ** 2)


def run_program(program, u0_np, w_np, device, hold: bool, retain: int | None = None):
    """Record the program on a tape and run backward with the intermediates held in a list (`hold`) or
    dropped; `retain`: an intermediate step to retain_grad(). Returns (tape, u0, held states or [])."""
    shape = u0_np.shape
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    w = gk.array(w_np, dtype=F64, device=device)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    states = [u0]
    with tape:
        for k, (op, back) in enumerate(program):
            v = gk.zeros(shape, dtype=F64, device=device, requires_grad=True)
            if retain == k + 1:
                v.retain_grad()
            if op == "heat":
                gk.launch(heat, shape, inputs=[states[-1]], outputs=[v], device=device)
            elif op == "squash":
                gk.launch(squash, shape, inputs=[states[-1]], outputs=[v], device=device)
            else:
                gk.launch(mix, shape, inputs=[states[-1], states[back]], outputs=[v], device=device)
                if op == "mix_acc":
                    gk.launch(accumulate, shape, inputs=[states[back]], outputs=[v], device=device)
            states.append(v)
        gk.launch(sum_squares, shape, inputs=[states[-1]], outputs=[loss], device=device)
        ws = gk.zeros(shape, dtype=F64, device=device, requires_grad=True)
        gk.launch(mix, shape, inputs=[states[1], w], outputs=[ws], device=device)
        gk.launch(sum_squares, shape, inputs=[ws], outputs=[loss], device=device)
    del v, ws
    kept = states[1:] if hold else []
    del states
    tape.backward(loss=loss)
    return tape, u0, kept


def central_difference(program, u0, w, d, eps=1e-6):
    return (np_loss(program, u0 + eps * d, w) - np_loss(program, u0 - eps * d, w)) / (2 * eps)


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


def test_retain_grad_keeps_an_intermediate(device, rng, pool_everything):
    """A dropped intermediate made with retain_grad() keeps its own gradient: the held run's value."""
    program = random_program(rng, 6)
    u0_np, w_np = rng.uniform(-1, 1, (7, 9)), rng.uniform(-1, 1, (7, 9))
    _, _, kept = run_program(program, u0_np, w_np, device, hold=True)
    tape, _, _ = run_program(program, u0_np, w_np, device, hold=False, retain=3)
    retained = _state(tape, 3)
    assert retained._retain and retained not in tape._released
    np.testing.assert_allclose(retained.grad.numpy(), kept[2].grad.numpy(), rtol=1e-12, atol=1e-12)


def _state(tape, k):
    """State k (1-based) of run_program's tape, found again through the records (the user dropped it)."""
    written = []
    for rec in tape.launches:
        out = rec.outputs[-1]
        if rec.kernel != "sum_squares" and all(out is not w for w in written):
            written.append(out)
    return written[k - 1]


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


def _dropped_chain(device, keep=None, other=None):
    """u0 -> squash -> s0 -> squash -> s1 -> squash -> s2 -> loss, intermediates dropped unless `keep(k, s)`
    returns something that holds one; `other`: a second tape that also records a launch reading s1.
    Returns (tape, u0, what keep returned, ids of s0, s1, s2)."""
    u0 = gk.array(np.linspace(-1, 1, 48).reshape(6, 8), dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    holders, ids, states = [], [], []
    with tape:
        u = u0
        for k in range(3):
            s = gk.zeros((6, 8), dtype=F64, device=device, requires_grad=True)
            gk.launch(squash, (6, 8), inputs=[u], outputs=[s], device=device)
            ids.append(id(s))
            states.append(s)
            if keep is not None:
                holders.append(keep(k, s))
            u = s
        gk.launch(sum_squares, (6, 8), inputs=[u], outputs=[loss], device=device)
    if other is not None:
        with other:
            gk.launch(squash, (6, 8), inputs=[states[1]], outputs=[gk.zeros((6, 8), dtype=F64, device=device)],
                      device=device)
    del u, s, states
    tape.backward(loss=loss)
    return tape, u0, holders, ids


def _released_ids(tape):
    return {id(a) for a in tape._released}


class Box:
    pass


def _in_box(s):
    b = Box()
    b.s = s
    return b


def _closure(s):
    return lambda: s


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


def test_without_exact_reference_counts_nothing_is_pooled(device, monkeypatch, pool_everything):
    """Where sys.getrefcount is not exact (COUNTED false: CPython 3.14+, free-threaded builds) every gradient
    is kept and zeroed eagerly, as before the pool."""
    monkeypatch.setattr(grad_pool, "COUNTED", False)
    tape, _, _, ids = _dropped_chain(device)
    assert not tape._released
    assert all(a.grad is not None for a in tape.gradients)
    tape.zero()
    assert all(a._gstate is None for a in tape.gradients)
