"""Forward-over-reverse (Hessian-vector products) through tapes whose arrays several steps write (issue 36):
an overwritten buffer, host writes, an in-place update's saved copy, a checkpoint reading a view — each
against central differences of the reverse-mode gradient in float64, on every device."""

import numpy as np

import gradkit as gk
from tests.ad.tape_cases import add_cube_into, f64, scale_into, square_into, total, twice_into, weighted_sum, z64


def test_hessian_vector_product_through_an_overwritten_buffer(device, rng):
    """l = sum(w x^2) + sum(w 2 k x) through a buffer y overwritten twice (the cubes added to it are dead);
    H v of the loss in x against central differences of the gradient."""
    n = 4
    x_np, v_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)

    def grad_at(xv, tangent=None):
        x, k, w = f64(xv, device), f64([1.5], device, False), f64(w_np, device, False)
        y = z64(n, device)
        z = z64(n, device)
        l = z64(1, device)
        tape = gk.Tape()
        with tape:
            gk.launch(scale_into, n, [x, k], [y], device=device)
            gk.launch(twice_into, n, [y], [z], device=device)
            gk.launch(add_cube_into, n, [x], [y], device=device)
            gk.launch(square_into, n, [x], [y], device=device)         # y overwritten: the cubes are dead
            gk.launch(weighted_sum, n, [y, w], [l], device=device)
            gk.launch(weighted_sum, n, [z, w], [l], device=device)
        if tangent is None:
            tape.backward(loss=l)
            return x.grad.numpy().copy()
        with gk.ForwardMode(seeds={x: f64(tangent, device, False)}):
            tape.backward(loss=l)
            return x.grad.dual.numpy().copy()

    hv = grad_at(x_np, v_np)
    eps = 1e-6
    fd = (grad_at(x_np + eps * v_np) - grad_at(x_np - eps * v_np)) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad_at(x_np), 3 * w_np + 2 * w_np * x_np, rtol=1e-12)


@gk.kernel
def scale_in_place(k: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = y[i] * k[0]


@gk.kernel
def tanh_of(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = gk.tanh(x[i]) * x[i]


def _hvp_vs_fd(device, program, params: dict, rng):
    """H v of the loss `program(arrays)` returns, by forward-over-reverse, against central differences of
    the reverse-mode gradient, for every parameter (all seeded with a random direction)."""
    v = {p: rng.uniform(-1, 1, np.shape(x)) for p, x in params.items()}

    def grads(shift: float = 0.0, tangent: bool = False) -> dict:
        arrs = {p: f64(np.asarray(x) + shift * v[p], device) for p, x in params.items()}
        if tangent:
            with gk.ForwardMode(seeds={arrs[p]: f64(v[p], device, False) for p in arrs}):
                tape, l = gk.Tape(), None
                with tape:
                    l = program(**arrs)
                tape.backward(loss=l)
            return {p: a.grad.dual.numpy() for p, a in arrs.items()}
        tape = gk.Tape()
        with tape:
            l = program(**arrs)
        tape.backward(loss=l)
        return {p: a.grad.numpy() for p, a in arrs.items()}

    hv, eps = grads(tangent=True), 1e-6
    up, down = grads(eps), grads(-eps)
    for p in params:
        np.testing.assert_allclose(hv[p], (up[p] - down[p]) / (2 * eps), rtol=1e-6, atol=1e-8, err_msg=p)


def test_forward_over_reverse_through_host_writes(device, rng):
    """assign and zero_ move (or drop) the gradients' tangents too, not only the gradients."""
    n = 4

    def program(x, k):
        y = z64(n, device)
        f = z64(n, device)
        l = z64(1, device)
        y.assign(x)
        gk.launch(tanh_of, n, [y], [f], device=device)
        f.zero_()
        gk.launch(scale_into, n, [y, k], [f], device=device)
        z = f.copy()
        gk.launch(tanh_of, n, [z], [f], device=device)
        gk.launch(total, n, [f], [l], device=device)
        return l

    _hvp_vs_fd(device, program, {"x": rng.uniform(-1, 1, n), "k": rng.uniform(0.5, 1.5, 1)}, rng)


def test_forward_over_reverse_through_an_in_place_update(device, rng):
    """y *= k saves y before the launch for the backward pass; its tangent is saved with it."""
    n = 4

    def program(y, k):
        z = z64(n, device)
        l = z64(1, device)
        gk.launch(scale_in_place, n, [k], [y], device=device)
        gk.launch(tanh_of, n, [y], [z], device=device)
        gk.launch(total, n, [z], [l], device=device)
        return l

    _hvp_vs_fd(device, program, {"y": rng.uniform(-1, 1, n), "k": rng.uniform(0.5, 1.5, 1)}, rng)


def test_forward_over_reverse_through_a_checkpoint_reading_a_view(device, rng):
    """The block reads x through a view it makes itself (a new view at the recompute): the tangent of the
    view's gradient lands in the base's."""
    def block(x, out):
        gk.launch(tanh_of, 6, [x.reshape(-1)], [out], device=device)

    def program(x):
        out = z64(6, device)
        l = z64(1, device)
        gk.checkpoint(block, x, out)
        gk.launch(total, 6, [out], [l], device=device)
        return l

    _hvp_vs_fd(device, program, {"x": rng.uniform(-1, 1, (2, 3))}, rng)


