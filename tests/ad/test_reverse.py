"""Reverse mode on whole kernels: loops with carried locals, control flow, multi-dim launches,
and the documented examples of Taichi and Warp, all against analytic or finite-difference references."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def product_for(x: gk.array(dtype=float), out: gk.array(dtype=float), n: int):
    acc = 1.0
    for i in range(n):
        acc = acc * x[i]
    out[0] = acc


@gk.kernel
def product_while(x: gk.array(dtype=float), out: gk.array(dtype=float), n: int):
    acc = 1.0
    i = 0
    while i < n:
        acc *= x[i]
        i += 1
    out[0] = acc


@pytest.mark.parametrize("k", [product_for, product_while], ids=["for", "while"])
def test_product_loop_reference(k, device):
    """Warp 1.19 returns [576, 288, 48, 4] here; the right answer is [24, 12, 8, 6]."""
    x = gk.array([1.0, 2.0, 3.0, 4.0], dtype=gk.float32, device=device, requires_grad=True)
    out = gk.zeros(1, dtype=gk.float32, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(k, 1, inputs=[x, out, 4], device=device)
    tape.backward(loss=out)
    assert out.numpy()[0] == 24.0
    np.testing.assert_allclose(x.grad.numpy(), [24, 12, 8, 6])


@gk.kernel
def nested_break(x: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64), limit: gk.float64):
    i = gk.tid()
    s = 0.0
    for a in range(x.shape[0]):
        p = 1.0
        for b in range(x.shape[1]):
            p = p * gk.sin(x[a, b]) + x[a, b] * 0.5
            if p > limit:
                break
        s = s + p * p
        if s > 4.0 * limit:
            break
    out[i] = s


def _nested_break_ref(x, limit):
    s = 0.0
    for a in range(x.shape[0]):
        p = 1.0
        for b in range(x.shape[1]):
            p = p * np.sin(x[a, b]) + x[a, b] * 0.5
            if p > limit:
                break
        s = s + p * p
        if s > 4 * limit:
            break
    return s


def test_nested_loops_with_break(device, rng):
    x = rng.uniform(-1, 2, (5, 6))
    limit = 1.3
    xa = gk.array(x, dtype=gk.float64, device=device, requires_grad=True)
    out = gk.zeros(3, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(nested_break, 3, inputs=[xa, out, limit], device=device)
    w = np.array([1.0, -2.0, 0.5])
    tape.backward(grads={out: gk.array(w, dtype=gk.float64, device=device)})
    np.testing.assert_allclose(out.numpy(), [_nested_break_ref(x, limit)] * 3)
    fd = np.zeros_like(x)
    eps = 1e-6
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        fd[idx] = (_nested_break_ref(x + d, limit) - _nested_break_ref(x - d, limit)) / (2 * eps)
    np.testing.assert_allclose(xa.grad.numpy(), w.sum() * fd, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- Taichi's documented examples

@gk.kernel
def sin_kernel(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sin(x[i])


def test_taichi_dy_dx_of_sin(device, rng):
    x = rng.uniform(-3, 3, 16).astype(np.float32)
    xa = gk.array(x, device=device, requires_grad=True)
    ya = gk.zeros(16, device=device, requires_grad=True)
    gk.launch(sin_kernel, 16, inputs=[xa], outputs=[ya], device=device)
    ya.grad.fill_(1.0)
    sin_kernel.grad(16, inputs=[xa], outputs=[ya], device=device)
    np.testing.assert_allclose(xa.grad.numpy(), np.cos(x), rtol=1e-5, atol=1e-6)


@gk.kernel
def two_losses(x: gk.array(dtype=float), l1: gk.array(dtype=float), l2: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(l1, 0, x[i] * x[i])
    gk.atomic_add(l2, 0, 3.0 * x[i])


def test_taichi_two_losses_with_kernel_grad(device, rng):
    x = rng.normal(size=8).astype(np.float32)
    xa = gk.array(x, device=device, requires_grad=True)
    l1 = gk.zeros(1, device=device, requires_grad=True)
    l2 = gk.zeros(1, device=device, requires_grad=True)
    gk.launch(two_losses, 8, inputs=[xa], outputs=[l1, l2], device=device)
    l1.grad.fill_(1.0)
    two_losses.grad(8, inputs=[xa], outputs=[l1, l2], device=device)
    np.testing.assert_allclose(xa.grad.numpy(), 2 * x, rtol=1e-6)
    xa.grad.zero_()
    l1.grad.zero_()
    l2.grad.fill_(1.0)
    two_losses.grad(8, inputs=[xa], outputs=[l1, l2], device=device)
    np.testing.assert_allclose(xa.grad.numpy(), np.full(8, 3.0))


@gk.kernel
def gravity_energy(x: gk.array(dtype=gk.vec2d), U: gk.array(dtype=gk.float64)):
    i, j = gk.tid()
    if i < j:
        r = x[i] - x[j]
        U[0] += -1.0 / gk.sqrt(gk.dot(r, r))


def test_taichi_gravity_energy_2d_launch(device, rng):
    n = 8
    x = rng.uniform(0, 1, (n, 2))
    xa = gk.array(x, dtype=gk.vec2d, device=device, requires_grad=True)
    U = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=U):
        gk.launch(gravity_energy, (n, n), inputs=[xa], outputs=[U], device=device)
    d = x[:, None, :] - x[None, :, :]
    r = np.linalg.norm(d + np.eye(n)[:, :, None], axis=2)
    np.testing.assert_allclose(U.numpy()[0], -np.sum(np.triu(1 / r, 1)), rtol=1e-12)
    force = np.sum(np.where(np.eye(n)[:, :, None] > 0, 0, d / r[:, :, None] ** 3), axis=1)
    np.testing.assert_allclose(xa.grad.numpy(), force, rtol=1e-10)


def test_taichi_python_scope_not_differentiated(device):
    """Python-side arithmetic between launches is not on the tape: only kernel work is differentiated."""
    x = gk.array([2.0], dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=y):
        gk.launch(square64, 1, inputs=[x], outputs=[y], device=device)
        scale = float(x.numpy()[0]) * 10.0    # Python scope: nothing recorded, no gradient through it
    np.testing.assert_allclose(x.grad.numpy(), [4.0])
    assert scale == 20.0 and len(gk.Tape().launches) == 0


@gk.kernel
def square64(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


# --------------------------------------------------------------------------- Warp's documented examples

@gk.kernel
def double_it(a: gk.array(dtype=float), b: gk.array(dtype=float)):
    i = gk.tid()
    b[i] = 2.0 * a[i]


@gk.kernel
def square_it(a: gk.array(dtype=float), b: gk.array(dtype=float)):
    i = gk.tid()
    b[i] = a[i] * a[i]


@gk.kernel
def sum_it(a: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, a[i])


def test_warp_three_kernel_chain(device, rng):
    x = rng.normal(size=10).astype(np.float32)
    a = gk.array(x, device=device, requires_grad=True)
    b = gk.zeros(10, device=device, requires_grad=True)
    c = gk.zeros(10, device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(double_it, 10, inputs=[a], outputs=[b], device=device)
        gk.launch(square_it, 10, inputs=[b], outputs=[c], device=device)
        gk.launch(sum_it, 10, inputs=[c], outputs=[loss], device=device)
    tape.backward(loss=loss)
    np.testing.assert_allclose(a.grad.numpy(), 8 * x, rtol=1e-5)
    # intermediates keep the gradient that reached them (the debugger's gradient-flow view shows them)
    np.testing.assert_allclose(b.grad.numpy(), 4 * x, rtol=1e-5)
    np.testing.assert_allclose(c.grad.numpy(), np.ones(10), rtol=1e-6)
    assert len(tape.launches) == 3 and tape.launches[1].kernel == "square_it"
    # input gradients accumulate across backward calls, intermediates hold the latest pass; zero() clears them
    tape.backward(loss=loss)
    np.testing.assert_allclose(a.grad.numpy(), 16 * x, rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), 4 * x, rtol=1e-5)
    tape.zero()
    assert not a.grad.numpy().any()
    assert set(map(id, tape.gradients)) >= {id(a), id(b), id(c), id(loss)}
    tape.reset()
    assert tape.launches == []


def test_warp_jacobian_rows_by_selection(device, rng):
    x = rng.normal(size=5).astype(np.float32)
    a = gk.array(x, device=device, requires_grad=True)
    b = gk.zeros(5, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(square_it, 5, inputs=[a], outputs=[b], device=device)
    jac = np.zeros((5, 5))
    for row in range(5):
        sel = np.zeros(5, np.float32)
        sel[row] = 1
        tape.backward(grads={b: gk.array(sel, device=device)})
        jac[row] = a.grad.numpy()
        tape.zero()
    np.testing.assert_allclose(jac, np.diag(2 * x), rtol=1e-6)


def test_warp_sixteen_chained_launches(device, rng):
    x = rng.uniform(0.5, 1.0, 7).astype(np.float32)
    arrays = [gk.array(x, device=device, requires_grad=True)]
    loss = gk.zeros(1, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        for _ in range(16):
            nxt = gk.zeros(7, device=device, requires_grad=True)
            gk.launch(sin_kernel, 7, inputs=[arrays[-1]], outputs=[nxt], device=device)
            arrays.append(nxt)
        gk.launch(sum_it, 7, inputs=[arrays[-1]], outputs=[loss], device=device)
    tape.backward(loss=loss)
    v = x.astype(np.float64)
    g = np.ones_like(v)
    for _ in range(16):
        g = g * np.cos(v)
        v = np.sin(v)
    np.testing.assert_allclose(arrays[0].grad.numpy(), g, rtol=1e-5)


def test_tape_scopes_record_func_and_timer(device):
    a = gk.array([1.0, 2.0], device=device, requires_grad=True)
    b = gk.zeros(2, device=device, requires_grad=True)
    called = []
    tape = gk.Tape()
    with tape:
        with tape.scope("outer"):
            with gk.ScopedTimer("timed", print=False):
                gk.launch(double_it, 2, inputs=[a], outputs=[b], device=device)
        tape.record_func(lambda: called.append(True), [b])
    assert tape.launches[0].scope == ("outer", "timed")
    assert tape.launches[0].ms >= 0
    tape.backward(grads={b: gk.array([1.0, 1.0], device=device)})
    assert called == [True]
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 2.0])


def test_modified_after_recording_is_an_error(device):
    a = gk.array([1.0, 2.0], device=device, requires_grad=True)
    b = gk.zeros(2, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(square_it, 2, inputs=[a], outputs=[b], device=device)
    a.assign([5.0, 6.0])
    with pytest.raises(gk.GradientRuleError, match="'a'.*square_it"):
        tape.backward(grads={b: gk.array([1.0, 1.0], device=device)})


@gk.kernel
def init_also_used_inside(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64), n: int):
    i = gk.tid()
    xi = x[i]
    a = xi
    for k in range(n):
        a = xi * a
    out[i] = a


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_loop_init_value_also_used_in_body(device, trips):
    """Found by the fuzz suite: the loop's initial value is also a free value of its body."""
    x = gk.array([0.5, 1.5], dtype=gk.float64, device=device, requires_grad=True)
    out = gk.zeros(2, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(init_also_used_inside, 2, inputs=[x, out, trips], device=device)
    tape.backward(grads={out: gk.array([1.0, 1.0], dtype=gk.float64, device=device)})
    xs = np.array([0.5, 1.5])
    np.testing.assert_allclose(out.numpy(), xs ** (trips + 1))
    np.testing.assert_allclose(x.grad.numpy(), (trips + 1) * xs ** trips)


@gk.kernel
def branch_yields_outer_value(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    xi = x[i]
    a = xi
    b = gk.sin(xi)
    for k in range(1):
        a = gk.sin(b if xi > 0.0 else xi * xi)
    out[i] = a


def test_branch_in_loop_yielding_an_outer_value(device):
    """Found by the fuzz suite: a branch inside a loop yields a value defined before the loop."""
    x = gk.array([-0.5, 0.5], dtype=gk.float64, device=device, requires_grad=True)
    out = gk.zeros(2, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(branch_yields_outer_value, 2, inputs=[x], outputs=[out], device=device)
    tape.backward(grads={out: gk.array([1.0, 1.0], dtype=gk.float64, device=device)})
    np.testing.assert_allclose(x.grad.numpy(), [np.cos(0.25) * -1.0, np.cos(np.sin(0.5)) * np.cos(0.5)])


def test_repeated_backward_follows_replaced_gradient_arrays(device, rng):
    """Tape.backward binds each recorded adjoint once and reuses it; a replaced `.grad` array, a scratch
    adjoint (an array without requires_grad) and NaN checks all still take effect."""
    x0 = rng.normal(size=10).astype(np.float32)
    a = gk.array(x0, device=device, requires_grad=True)
    b = gk.zeros(10, device=device)                  # no requires_grad: a scratch adjoint each pass
    c = gk.zeros(10, device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        for _ in range(3):                             # three records share one binding
            gk.launch(square_it, 10, inputs=[a], outputs=[c], device=device)
        gk.launch(double_it, 10, inputs=[a], outputs=[b], device=device)
        gk.launch(sum_it, 10, inputs=[c], outputs=[loss], device=device)
    tape.backward(loss=loss)
    # the loss sees the last write of c only: the two before it are overwritten and pass no gradient
    np.testing.assert_allclose(a.grad.numpy(), 2 * x0, rtol=1e-5)
    fresh = gk.zeros(10, device=device)
    a.grad = fresh
    tape.backward(loss=loss)
    np.testing.assert_allclose(fresh.numpy(), 2 * x0, rtol=1e-5)
    gk.config.check_nan = True
    try:
        tape.backward(loss=loss)
    finally:
        gk.config.check_nan = False
    np.testing.assert_allclose(fresh.numpy(), 2 * 2 * x0, rtol=1e-5)
