"""Storing stencil adjoints for gradients known to be zero (issue 43, ad/fresh_store.py, runtime/tape/fresh.py).

A gathering adjoint stores its sums instead of adding them only where the tape knows the gradient is zero
and nothing added into it yet: a pool buffer taken again, a gradient tape.zero() left to zero lazily. Every
test fills the gradients with garbage before the pass that reuses them, so a store that left an element
unwritten, or an add into an unzeroed buffer, shows; gradients are checked against float64 NumPy and central
differences on random inputs, on every device: held and dropped intermediates, two records adding into one
gradient, one array passed twice to a launch, retain_grad, seeds (constant and not), repeated passes
without zero(), and a kernel whose gathered adds leave a component out (the store pass refuses)."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.ad.fresh_store import store_plan
from gradkit.runtime.tape import grad_pool
from heat_kernels import heat

F64 = gk.float64
pytestmark = pytest.mark.skipif(not grad_pool.COUNTED, reason="no exact reference counts: no pool, no lazy zero")


@gk.kernel
def pair(u: gk.array(dtype=gk.float64, ndim=2), v: gk.array(dtype=gk.float64, ndim=2),
         out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i == 0 or j == m - 1:
        out[i, j] = u[i, j] - v[i, j]
    else:
        out[i, j] = 0.3 * u[i - 1, j] * u[i, j] + 0.5 * v[i, j + 1] + 0.1 * v[i, j]


@gk.kernel
def squash(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    v = u[i, j]
    out[i, j] = 0.5 * gk.sin(v) * v + 0.5 * v


@gk.kernel
def sum_squares(u: gk.array(dtype=gk.float64, ndim=2), loss: gk.array(dtype=gk.float64)):
    i, j = gk.tid()
    gk.atomic_add(loss, 0, u[i, j] * u[i, j])


@gk.kernel
def shift_x(u: gk.array(dtype=gk.vec2d, ndim=1), out: gk.array(dtype=gk.vec2d, ndim=1)):
    i = gk.tid()
    if i == 0:
        out[i] = gk.vec2d(0.0, 0.0)
    else:
        out[i] = gk.vec2d(2.0 * u[i - 1][0], 0.0)


@gk.kernel
def vec_loss(u: gk.array(dtype=gk.vec2d, ndim=1), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, u[i][0] * u[i][0] + 3.0 * u[i][1])


def np_heat(u):
    out = u.copy()
    out[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                             - 4.0 * u[1:-1, 1:-1])
    return out


def np_pair(u, v):
    out = u - v
    out[1:, :-1] = 0.3 * u[:-1, :-1] * u[1:, :-1] + 0.5 * v[1:, 1:] + 0.1 * v[1:, :-1]
    return out


def np_squash(u):
    return 0.5 * np.sin(u) * u + 0.5 * u


@pytest.fixture
def lazy_everything(monkeypatch):
    """Pool and zero lazily arrays of any size, so small test arrays take those paths."""
    monkeypatch.setattr(grad_pool, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(grad_pool, "POOL_MIN_TOTAL", 0)


def random_program(rng, steps: int) -> list:
    """Each step: (op, index of an earlier state `pair` also reads). `pair` reads two states (the same one
    when `back` is the last), so some gradients get adds from two records."""
    return [(["heat", "heat", "squash", "pair"][rng.integers(4)], int(rng.integers(0, s + 1)))
            for s in range(steps)]


def np_loss(program, u0):
    states = [u0]
    for op, back in program:
        u = states[-1]
        states.append(np_heat(u) if op == "heat" else np_squash(u) if op == "squash" else np_pair(u, states[back]))
    return np.sum(states[-1] ** 2) + 0.5 * np.sum(states[1] ** 2)


def np_grad_fd(program, u0, d, eps=1e-6):
    return (np_loss(program, u0 + eps * d) - np_loss(program, u0 - eps * d)) / (2 * eps)


def _stored(tape) -> int:
    return sum("store" in (r.adjoint_variant or "") for r in tape.launches)


def _garbage(arrays):
    for a in arrays:
        g = a.grad
        g.assign(np.full(a.shape, 7.25))


def _check(u0, program, u0_np, rng, grad=None):
    got = u0.grad.numpy() if grad is None else grad
    for _ in range(3):
        d = rng.standard_normal(u0_np.shape)
        fd = np_grad_fd(program, u0_np, d)
        assert np.isclose(np.sum(got * d), fd, rtol=1e-6, atol=1e-8 * (1 + np.sum(np.abs(got * d))))


def _program_with_half_loss(program, u0, device, hold: bool, retain=None):
    """record() with the second loss path really 0.5 * sum(s1^2): `half` is sum_squares of s1 scaled by a
    seed of 0.5 on its own loss array; returns (tape, losses, held states)."""
    shape = u0.shape
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    loss2 = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    states = [u0]
    with tape:
        for k, (op, back) in enumerate(program):
            v = gk.zeros(shape, dtype=F64, device=device, requires_grad=True)
            if retain == k + 1:
                v.retain_grad()
            if op == "pair":
                gk.launch(pair, shape, inputs=[states[-1], states[back]], outputs=[v], device=device)
            else:
                gk.launch(heat if op == "heat" else squash, shape, inputs=[states[-1]], outputs=[v], device=device)
            states.append(v)
        gk.launch(sum_squares, shape, inputs=[states[-1]], outputs=[loss], device=device)
        gk.launch(sum_squares, shape, inputs=[states[1]], outputs=[loss2], device=device)
    del v
    kept = states[1:] if hold else []
    del states
    return tape, (loss, loss2), kept


def _backward(tape, losses):
    tape.backward(grads={losses[0]: np.ones(1), losses[1]: np.full(1, 0.5)})


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("hold", [True, False], ids=["held", "dropped"])
def test_random_programs_match_central_differences(device, rng, seed, hold, lazy_everything):
    """Random stencil programs, intermediates held (lazily zeroed by tape.zero()) or dropped (pooled): three
    passes, garbage written into every gradient before zero(); each pass equals central differences of the
    float64 NumPy program and the first pass, and some adjoints stored."""
    program = random_program(rng, 6 + seed)
    u0_np = rng.uniform(-1, 1, (9, 11))
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    tape, losses, kept = _program_with_half_loss(program, u0, device, hold)
    _backward(tape, losses)
    first = u0.grad.numpy().copy()
    _check(u0, program, u0_np, rng)
    fresh_u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    held_tape, held_losses, held = _program_with_half_loss(program, fresh_u0, device, True)
    _backward(held_tape, held_losses)          # a first pass: nothing zeroed lazily, nothing pooled
    stored = 0
    for _ in range(2):
        _garbage([u0, *kept])
        tape.zero()
        _backward(tape, losses)
        stored += _stored(tape)
        np.testing.assert_allclose(u0.grad.numpy(), first, rtol=1e-12, atol=1e-12)
        for a, b in zip(kept, held):               # intermediates kept when held: the first pass's values
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)
    if program[0][0] == "heat":                    # u0's gradient is fresh at the first launch's adjoint
        assert stored >= 2


def test_two_records_adding_into_one_gradient(device, rng, lazy_everything):
    """u feeds two heat launches and a squash: the first adjoint in reverse order stores into u's fresh
    gradient (a gathering or a plain adjoint), the later ones must add (checked against central differences)."""
    u0_np = rng.uniform(-1, 1, (8, 10))
    for order in (("heat", "heat", "squash"), ("squash", "heat", "heat"), ("heat", "squash", "heat")):
        u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
        u = gk.zeros((8, 10), dtype=F64, device=device, requires_grad=True)
        loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(heat, (8, 10), inputs=[u0], outputs=[u], device=device)
            outs = []
            for op in order:
                o = gk.zeros((8, 10), dtype=F64, device=device, requires_grad=True)
                gk.launch(heat if op == "heat" else squash, (8, 10), inputs=[u], outputs=[o], device=device)
                gk.launch(sum_squares, (8, 10), inputs=[o], outputs=[loss], device=device)
                outs.append(o)
        tape.backward(loss=loss)
        _garbage([u0, u, *outs])
        tape.zero()
        tape.backward(loss=loss)
        variants = [r.adjoint_variant for r in tape.launches if r.inputs[0] is u]
        # only the first adjoint in reverse order that reads u can store into its gradient
        assert all("store" not in v for v in variants[:-1]), variants
        assert "store" in variants[-1], variants      # heat: adjoint_gather_store, squash: adjoint_store

        def f(x, order=order):
            m = np_heat(x)
            return sum(np.sum((np_heat(m) if op == "heat" else np_squash(m)) ** 2) for op in order)
        got = u0.grad.numpy()
        for _ in range(2):
            d = rng.standard_normal(u0_np.shape)
            fd = (f(u0_np + 1e-6 * d) - f(u0_np - 1e-6 * d)) / 2e-6
            assert np.isclose(np.sum(got * d), fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("same", [True, False], ids=["same array twice", "two arrays"])
def test_one_array_passed_twice(device, rng, same, lazy_everything):
    """pair(x, x) gathers into x's gradient through both parameters: it must add, not store; pair(x, y)
    stores into both fresh gradients."""
    x_np, y_np = rng.uniform(-1, 1, (7, 9)), rng.uniform(-1, 1, (7, 9))
    x0 = gk.array(x_np, dtype=F64, device=device, requires_grad=True)
    y0 = gk.array(y_np, dtype=F64, device=device, requires_grad=True)
    x = gk.zeros((7, 9), dtype=F64, device=device, requires_grad=True)
    y = gk.zeros((7, 9), dtype=F64, device=device, requires_grad=True)
    out = gk.zeros((7, 9), dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(heat, (7, 9), inputs=[x0], outputs=[x], device=device)
        gk.launch(heat, (7, 9), inputs=[y0], outputs=[y], device=device)
        gk.launch(pair, (7, 9), inputs=[x, x if same else y], outputs=[out], device=device)
        gk.launch(sum_squares, (7, 9), inputs=[out], outputs=[loss], device=device)
    tape.backward(loss=loss)
    _garbage([x0, y0, x, y, out])
    tape.zero()
    tape.backward(loss=loss)
    rec = tape.launches[2]
    assert ("store" in rec.adjoint_variant) == (not same and rec.adjoint_variant.startswith("adjoint_gather"))

    def f(a, b):
        xa = np_heat(a)
        return np.sum(np_pair(xa, xa if same else np_heat(b)) ** 2)
    for _ in range(2):
        dx, dy = rng.standard_normal(x_np.shape), rng.standard_normal(y_np.shape)
        fd = (f(x_np + 1e-6 * dx, y_np + 1e-6 * dy) - f(x_np - 1e-6 * dx, y_np - 1e-6 * dy)) / 2e-6
        got = np.sum(x0.grad.numpy() * dx) + np.sum(y0.grad.numpy() * dy)
        assert np.isclose(got, fd, rtol=1e-6, atol=1e-9)


def test_retain_grad_and_repeated_passes(device, rng, lazy_everything):
    """A retain_grad()-ed intermediate in a dropped heat chain keeps the held run's gradient; a second
    backward without zero() accumulates into the input (2x), intermediates starting from zero again."""
    program = [("heat", 0)] * 5
    u0_np = rng.uniform(-1, 1, (10, 8))
    ref_u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    ref_tape, ref_losses, held = _program_with_half_loss(program, ref_u0, device, True)
    _backward(ref_tape, ref_losses)
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    tape, losses, _ = _program_with_half_loss(program, u0, device, False, retain=3)
    retained = tape.launches[2].outputs[0]
    assert retained._retain
    for k in range(3):
        if k == 2:
            _garbage([u0, retained])
            tape.zero()
        _backward(tape, losses)
        scale = 2.0 if k == 1 else 1.0
        np.testing.assert_allclose(u0.grad.numpy(), scale * ref_u0.grad.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(retained.grad.numpy(), held[2].grad.numpy(), rtol=1e-12, atol=1e-12)
    assert _stored(tape) >= 1
    _check(u0, program, u0_np, rng)


@pytest.mark.parametrize("constant", [True, False], ids=["ones seed", "random seed"])
def test_seeds(device, rng, constant, lazy_everything):
    """grads={last state: seed}: the last heat adjoint reads the seed (folded when constant) and may store into
    the state before; the gradient equals the float64 vector-Jacobian product by central differences."""
    u0_np = rng.uniform(-1, 1, (9, 7))
    seed_np = np.ones((9, 7)) if constant else rng.standard_normal((9, 7))
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    states = [u0]
    with tape:
        for _ in range(4):
            v = gk.zeros((9, 7), dtype=F64, device=device, requires_grad=True)
            gk.launch(heat, (9, 7), inputs=[states[-1]], outputs=[v], device=device)
            states.append(v)
    seed = gk.array(seed_np, dtype=F64, device=device)
    for _ in range(2):
        _garbage(states)
        tape.zero()
        tape.backward(grads={states[-1]: seed})
    assert _stored(tape) >= 1

    def f(x):
        for _ in range(4):
            x = np_heat(x)
        return np.sum(x * seed_np)
    got = u0.grad.numpy()
    for _ in range(3):
        d = rng.standard_normal(u0_np.shape)
        fd = (f(u0_np + 1e-6 * d) - f(u0_np - 1e-6 * d)) / 2e-6
        assert np.isclose(np.sum(got * d), fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(states[-1].grad.numpy(), seed_np)


def test_missing_component_is_not_stored(device, rng, lazy_everything):
    """shift_x gathers only component 0 of a vec2 gradient: the store pass refuses (component 1 would keep
    the garbage), the tape adds into a zeroed gradient instead."""
    assert shift_x.lowered("adjoint_gather").attrs["gathered"]          # a gathering adjoint
    assert store_plan(shift_x.lowered("adjoint_gather")) is None
    assert store_plan(heat.lowered("adjoint_gather")) == heat.lowered("adjoint_gather_store").attrs["stored"]
    n = 12
    x_np = rng.uniform(-1, 1, (n, 2))
    x = gk.array(x_np, dtype=gk.vec2d, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.vec2d, device=device, requires_grad=True)
    z = gk.zeros(n, dtype=gk.vec2d, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(shift_x, n, inputs=[x], outputs=[y], device=device)
        gk.launch(shift_x, n, inputs=[y], outputs=[z], device=device)
        gk.launch(vec_loss, n, inputs=[z], outputs=[loss], device=device)
    for _ in range(2):
        for a in (x, y, z):
            a.grad.assign(np.full((n, 2), 7.25))
        tape.zero()
        tape.backward(loss=loss)
        assert [r.adjoint_variant for r in tape.launches[:2]] == ["adjoint_gather"] * 2
        want = np.zeros((n, 2))
        want[: n - 2, 0] = 8.0 * 2.0 * 2.0 * x_np[: n - 2, 0]        # z[i][0] = 4 x[i-2][0]
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-12)


def test_storing_form_refuses_a_gradient_passed_twice(device, rng, lazy_everything):
    """runtime/tape/fresh.py's own guard (the launch already avoids gathering then): the storing form of
    pair(x, y)'s adjoint bound with x's gradient in y's place too is None; bound as recorded, it stores both."""
    from gradkit.runtime.launch.launch import PreparedAdjoint
    from gradkit.runtime.tape.fresh import Storing
    x = gk.array(rng.uniform(-1, 1, (6, 5)), dtype=F64, device=device, requires_grad=True)
    y = gk.array(rng.uniform(-1, 1, (6, 5)), dtype=F64, device=device, requires_grad=True)
    out = gk.zeros((6, 5), dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(pair, (6, 5), inputs=[x, y], outputs=[out], device=device)
        gk.launch(sum_squares, (6, 5), inputs=[out], outputs=[loss], device=device)
    tape.backward(loss=loss)
    p = tape.records[0].prepared
    assert p is not None and p.spec.variant.gather
    form = Storing().form(p, pair)
    assert form is not None and {id(p.call_args[k]) for k in form[1]} == {id(x.grad), id(y.grad)}
    args = [x.grad if a is y.grad else a for a in p.call_args]
    twice = PreparedAdjoint(p.key, p.spec, p.dims, args, p.grads, p.sources)
    assert Storing().form(twice, pair) is None


@pytest.mark.parametrize("hold", [True, False], ids=["held", "dropped"])
def test_storing_forms_do_not_hold_arrays(device, rng, hold, lazy_everything):
    """The storing forms a tape keeps hold no array the pool's reference count misses: over passes and
    re-recordings (tape.reset()), dropped intermediates stay pooled and held gradients stay lazily zeroed,
    so every pass after the first on a recording stores into them, with the right gradient."""
    u0_np = rng.uniform(-1, 1, (8, 9))
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    kept = [gk.zeros((8, 9), dtype=F64, device=device, requires_grad=True) for _ in range(5)] if hold else None

    def forward():
        tape.reset()
        loss.zero_()
        u = u0
        with tape:
            for k in range(5):
                v = kept[k] if hold else gk.zeros((8, 9), dtype=F64, device=device, requires_grad=True)
                gk.launch(heat, (8, 9), inputs=[u], outputs=[v], device=device)
                u = v
            gk.launch(sum_squares, (8, 9), inputs=[u], outputs=[loss], device=device)

    ref = None
    for _ in range(3):
        forward()
        for p in range(3):
            tape.zero()
            tape.backward(loss=loss)
            if hold:
                assert tape._deferred or p == 0
            else:
                assert len(tape._released) == 5
            if p:       # u0's gradient is zeroed at once where .numpy() handed out a view of it
                assert all("store" in r.adjoint_variant for r in tape.launches[1:5])
            got = u0.grad.numpy().copy()
            ref = got if ref is None else ref
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)

    def f(x):
        for _ in range(5):
            x = np_heat(x)
        return np.sum(x * x)
    for _ in range(3):
        d = rng.standard_normal(u0_np.shape)
        fd = (f(u0_np + 1e-6 * d) - f(u0_np - 1e-6 * d)) / 2e-6
        assert np.isclose(np.sum(ref * d), fd, rtol=1e-7, atol=1e-9)


@gk.kernel
def scale1(u: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    out[i] = 2.0 * u[i] * u[i]


@gk.kernel
def sum1(u: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, u[i] * u[i])


@pytest.mark.parametrize("short", [0, 3], ids=["whole grid", "grid 3 short"])
def test_plain_adjoint_stores_only_over_the_whole_array(device, rng, short, lazy_everything):
    """A plain adjoint's own-element adds are stored (adjoint_store) only when the launch grid is the
    gradient's shape: launched over all but the last 3 elements, the adjoint adds into a zeroed gradient
    (the last 3 elements of u's gradient stay 0, not the garbage its buffer held)."""
    n = 40
    u0_np = rng.uniform(-1, 1, n)
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    u = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    out = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(scale1, n, inputs=[u0], outputs=[u], device=device)
        gk.launch(scale1, n - short, inputs=[u], outputs=[out], device=device)
        gk.launch(sum1, n, inputs=[out], outputs=[loss], device=device)
    for _ in range(3):
        for a in (u0, u, out):
            a.grad.assign(np.full(n, 7.25))
        tape.zero()
        tape.backward(loss=loss)
    variants = [r.adjoint_variant for r in tape.launches]
    assert ("store" in variants[1]) == (short == 0) and "store" in variants[2], variants
    m = n - short
    uu = 2.0 * u0_np ** 2
    oo = np.zeros(n)
    oo[:m] = 2.0 * uu[:m] ** 2
    want_u = np.zeros(n)
    want_u[:m] = 2.0 * oo[:m] * 4.0 * uu[:m]
    np.testing.assert_allclose(u.grad.numpy(), want_u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(u0.grad.numpy(), want_u * 4.0 * u0_np, rtol=1e-12, atol=1e-12)
