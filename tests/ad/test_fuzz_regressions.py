"""Regressions the widened fuzzer (tests/fuzz) and the language tier found, each on every device: constant
folding, tangents through host copies, `return` in unrolled loops, and elements rewritten in place in
loops, under branches and beside other elements (core/passes/promote.py, ad/read_order.py)."""

import warnings

import numpy as np
import pytest

import gradkit as gk
from tests.ad.test_gradient_truth import f64, square

# --------------------------------------------------------------------------- found by the widened fuzzer

def _rewritten_in_place(kernel, x_np, shape, device, extra=()):
    """Launch `kernel(x, *extra) -> p` (p starts at ones) on a tape and back-propagate ones from p: the
    shape of every in-place rewrite test below. Returns (x, p)."""
    x = f64(x_np, device, requires_grad=True)
    p = gk.ones(shape, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gk.GradientRuleWarning)
        with tape:
            gk.launch(kernel, len(x_np), inputs=[x, *extra], outputs=[p], device=device)
    tape.backward(grads={p: gk.ones(shape, dtype=gk.float64, device=device)})
    return x, p


@gk.kernel
def constant_length(out: gk.array(dtype=gk.float64)):
    out[0] = gk.length(gk.vec2d(3.0, 4.0)) + gk.normalize(gk.vec2d(0.0, 2.0))[1]


def test_constant_folded_length(device):
    out = gk.zeros(1, dtype=gk.float64, device=device)
    gk.launch(constant_length, 1, outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), [6.0])


@gk.kernel
def double64(c: gk.array(dtype=gk.float64), z: gk.array(dtype=gk.float64)):
    i = gk.tid()
    z[i] = 2.0 * c[i]


@pytest.mark.parametrize("how", ["gk.copy", "assign", "copy()", "fill_"])
def test_host_writes_carry_tangents_in_forward_mode(device, rng, how):
    x_np, v_np = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    x = f64(x_np, device)
    y, c, z = (gk.zeros(3, dtype=gk.float64, device=device) for _ in range(3))
    with gk.ForwardMode(seeds={x: f64(v_np, device)}):
        gk.launch(square, 3, inputs=[x, y], device=device)
        if how == "gk.copy":
            gk.copy(c, y)
        elif how == "assign":
            c.assign(y)
        elif how == "copy()":
            c = y.copy()
        else:
            gk.copy(c, y)
            c.fill_(0.5)
        gk.launch(double64, 3, inputs=[c, z], device=device)
    expected = np.zeros(3) if how == "fill_" else 4 * x_np * v_np
    np.testing.assert_allclose(z.dual.numpy(), expected, rtol=1e-12)


@gk.kernel
def scale_column_in_loop(x: gk.array(dtype=gk.float64), n: int, p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    for t in range(n):
        p[i, 3] *= x[i]


def test_constant_column_rewritten_in_a_loop(device, rng):
    """p[i, 3] *= x[i] three times: the element becomes a loop-carried value (its index constant is made
    inside the loop), so reverse mode is right instead of refused."""
    x_np = rng.uniform(0.5, 1.5, 2)
    x, p = _rewritten_in_place(scale_column_in_loop, x_np, (2, 4), device, extra=(3,))
    np.testing.assert_allclose(x.grad.numpy(), 3 * x_np ** 2, rtol=1e-12)


@gk.func
def first_trip(a: gk.float64) -> gk.float64:
    for k in gk.static(range(3)):
        return a + gk.float64(k)
    return a - 1.0


@gk.kernel
def return_in_unrolled(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    out[i] = first_trip(x[i])
    for j in gk.static(range(3)):
        out[i] += x[i] * x[i]
        if x[i] > 0.0:
            return


@gk.kernel(max_unroll=8)
def return_in_max_unroll(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    for j in range(3):
        out[0] += x[j] * x[j]
        if x[j] > 0.5:
            return


def test_return_ends_unrolled_loops(device, rng):
    """`return` inside a gk.static / max_unroll loop ends the function (was: later trips ran too)."""
    x_np = np.concatenate([rng.uniform(0.1, 1, 2), rng.uniform(-1, -0.1, 2)])
    x = f64(x_np, device, requires_grad=True)
    out = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(return_in_unrolled, 4, inputs=[x, out], device=device)
    trips = np.where(x_np > 0, 1, 3)
    np.testing.assert_allclose(out.numpy(), x_np + trips * x_np ** 2, rtol=1e-12)
    tape.backward(grads={out: f64(np.ones(4), device)})
    np.testing.assert_allclose(x.grad.numpy(), 1 + 2 * trips * x_np, rtol=1e-12)
    y = f64([0.25, 0.75, 2.0], device)
    total = gk.zeros(1, dtype=gk.float64, device=device)
    gk.launch(return_in_max_unroll, 1, inputs=[y, total], device=device)
    np.testing.assert_allclose(total.numpy(), [0.25 ** 2 + 0.75 ** 2])


@gk.kernel
def distinct_constant_elements(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    p[i, 1] *= x[i]
    p[i, 0] *= x[i]
    for t in range(3):
        if x[i] > 0.0:
            p[i, 2] *= x[i]


def test_rewrites_of_distinct_constant_elements_and_under_branches(device, rng):
    """`*=` at distinct constant indices, and a loop rewriting an element under an `if`: both are
    differentiated (the element becomes a value the branch yields), not refused."""
    x_np = rng.uniform(0.5, 1.5, 3) * np.array([1, -1, 1])
    x, p = _rewritten_in_place(distinct_constant_elements, x_np, (3, 3), device)
    expected = 2 + np.where(x_np > 0, 3 * x_np ** 2, 0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


@gk.kernel
def rewrites_under_branches(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    for k in gk.static(range(3)):                 # unrolled: three branches rewriting one element
        if x[i] > gk.float64(k) * 0.3:
            p[i, 0] *= x[i] + gk.float64(k)
    for t in range(2):                             # one loop rewriting two distinct elements
        p[i, 1] *= x[i]
        p[i, 2] *= x[i] + 1.0


def test_element_rewritten_under_unrolled_branches(device, rng):
    x_np = rng.uniform(0.05, 1.0, 4)
    x, p = _rewritten_in_place(rewrites_under_branches, x_np, (4, 3), device)

    def ref(xv):
        col0 = np.ones_like(xv)
        for k in range(3):
            col0 = np.where(xv > k * 0.3, col0 * (xv + k), col0)
        return col0 + xv ** 2 + (xv + 1) ** 2

    np.testing.assert_allclose(p.numpy().sum(axis=1), ref(x_np), rtol=1e-12)
    eps = 1e-7
    np.testing.assert_allclose(x.grad.numpy(), (ref(x_np + eps) - ref(x_np - eps)) / (2 * eps), rtol=1e-6)


# --------------------------------------------------------------------------- integer division floors

@gk.kernel
def int_div_mod(a: gk.array(dtype=int), b: gk.array(dtype=int), q: gk.array(dtype=int), r: gk.array(dtype=int)):
    i = gk.tid()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]


def test_integer_division_floors(device, rng):
    """Python's (and Taichi's) floored `//` and `%`, not C's truncation (Warp): -7 // 2 == -4, -7 % 2 == 1."""
    a_np = np.concatenate([[-7, 7, -7, 7, 0, -1], rng.integers(-1000, 1000, 26)]).astype(np.int32)
    b_np = np.concatenate([[2, -2, -2, 2, 3, 5], rng.choice([-9, -4, -1, 1, 3, 7], 26)]).astype(np.int32)
    a, b = gk.array(a_np, device=device), gk.array(b_np, device=device)
    q, r = gk.zeros(32, dtype=gk.int32, device=device), gk.zeros(32, dtype=gk.int32, device=device)
    gk.launch(int_div_mod, 32, inputs=[a, b, q, r], device=device)
    np.testing.assert_array_equal(q.numpy(), a_np // b_np)
    np.testing.assert_array_equal(r.numpy(), a_np % b_np)
    assert (q.numpy()[0], r.numpy()[0]) == (-4, 1)


# --------------------------------------------------------------------------- a store read back in a loop

@gk.kernel
def scratch_in_loop(x: gk.array(dtype=gk.float64), buf: gk.array(dtype=gk.float64),
                    o: gk.array(dtype=gk.float64)):
    i = gk.tid()
    s = x[i]
    for t in range(3):
        buf[i] = s * s
        s = gk.sin(buf[i]) + x[i]
    o[i] = s


def test_value_stored_then_read_in_a_loop(device, rng):
    """Each iteration stores into a scratch element and reads it back: the adjoint must see the value of
    that iteration, not the element's final contents (the replay skips stores)."""
    x_np = rng.uniform(-1, 1, 4)

    def ref(x):
        s = x.copy()
        for _ in range(3):
            s = np.sin(s * s) + x
        return s

    x = f64(x_np, device, requires_grad=True)
    buf = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    o = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(scratch_in_loop, 4, inputs=[x, buf, o], device=device)
    tape.backward(grads={o: f64(np.ones(4), device)})
    np.testing.assert_allclose(o.numpy(), ref(x_np), rtol=1e-12)
    eps = 1e-6
    np.testing.assert_allclose(x.grad.numpy(), (ref(x_np + eps) - ref(x_np - eps)) / (2 * eps), rtol=1e-6)


@gk.kernel
def repeated_constant_elements(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    p[i, 0] *= x[i]
    p[i, 1] *= x[i]
    p[i, 0] *= x[i] + 1.0


def test_element_rewritten_twice_around_another(device, rng):
    """A store to p[i, 1] does not hide the value just stored in p[i, 0] (different constant index), so the
    second `p[i, 0] *=` reads it from the first instead of memory: differentiated, not refused."""
    x_np = rng.uniform(0.5, 1.5, 3)
    x, p = _rewritten_in_place(repeated_constant_elements, x_np, (3, 2), device)
    np.testing.assert_allclose(p.numpy(), np.stack([x_np * (x_np + 1), x_np], 1), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x_np + 1 + 1, rtol=1e-12)
