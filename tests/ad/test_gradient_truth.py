"""Corners where gradients used to come out silently wrong (issue 16), each on every device.

Each test compares with an analytic or float64 reference; before the fixes they gave NaN, a wrong number
or no error.
"""

import warnings

import numpy as np
import pytest

import gradkit as gk


def f64(values, device, requires_grad=False):
    return gk.array(np.asarray(values, dtype=np.float64), dtype=gk.float64, device=device,
                    requires_grad=requires_grad)


# --------------------------------------------------------------------------- Taichi's seed example

@gk.kernel
def add_sin_once(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    loss[0] += gk.sin(x[0]) + 1.0


@gk.kernel
def differentiable_task(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    for l in range(3):
        loss[0] += gk.sin(x[0]) + 1.0


def test_taichi_tape_example(device, rng):
    """Taichi's Tape page: a Python-scope update, one kernel adding once, one adding in a loop: at x = 0
    loss = 1 + 1 + 3 = 5 and dloss/dx = 4 cos(0); at a random x, 1 + 4 (sin x + 1) and 4 cos x."""
    for x0 in (0.0, float(rng.uniform(-2, 2))):
        x = gk.array([x0], device=device, requires_grad=True)
        loss = gk.zeros(1, device=device, requires_grad=True)
        with gk.Tape(loss=loss):
            loss[0] += 1.0
            gk.launch(add_sin_once, 1, inputs=[x, loss], device=device)
            gk.launch(differentiable_task, 1, inputs=[x, loss], device=device)
        np.testing.assert_allclose(loss.numpy(), [1 + 4 * (np.sin(x0) + 1)], rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), [4 * np.cos(x0)], rtol=1e-6)


# --------------------------------------------------------------------------- non-differentiable points

@gk.kernel
def zero_vector_norms(x: gk.array(dtype=gk.float64), o: gk.array(dtype=gk.float64)):
    i = gk.tid()
    q = gk.vec2d(0.0, 0.0) * x[i]
    n = gk.normalize(gk.vec3d(x[i] * 0.0, 0.0, 0.0))
    o[i] = gk.length(q) + x[i] * x[i] + n[0] + gk.atan2(x[i] * 0.0, x[i] * 0.0)


@gk.kernel
def nonzero_norms(x: gk.array(dtype=gk.float64), o: gk.array(dtype=gk.float64)):
    i = gk.tid()
    v = gk.vec3d(x[i], 2.0 * x[i], 0.5)
    n = gk.normalize(v)
    o[i] = gk.length(v) + n[0] + gk.atan2(x[i], 0.5 - x[i])


def _reverse_and_forward(kernel, x_np, device):
    x = f64(x_np, device, requires_grad=True)
    o = gk.zeros(len(x_np), dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, len(x_np), inputs=[x, o], device=device)
    tape.backward(grads={o: f64(np.ones(len(x_np)), device)})
    with gk.ForwardMode(seeds={x: f64(np.ones(len(x_np)), device)}):
        o2 = gk.zeros(len(x_np), dtype=gk.float64, device=device)
        gk.launch(kernel, len(x_np), inputs=[x, o2], device=device)
    return x.grad.numpy(), o2.dual.numpy()


def test_zero_vector_has_a_subgradient(device, rng):
    """length/normalize of a zero vector and atan2(0, 0): gradient 0 there (Warp's choice), not NaN, so the
    thread's other gradient terms (2x here) survive — in reverse and in forward mode."""
    x_np = rng.uniform(-2, 2, 4)
    grad, tangent = _reverse_and_forward(zero_vector_norms, x_np, device)
    np.testing.assert_allclose(grad, 2 * x_np, rtol=1e-12)
    np.testing.assert_allclose(tangent, 2 * x_np, rtol=1e-12)


def test_norms_away_from_zero_keep_their_gradient(device, rng):
    """The subgradient guard changes nothing elsewhere: central differences in float64."""
    x_np = rng.uniform(0.2, 2, 4)

    def ref(x):
        v = np.stack([x, 2 * x, np.full_like(x, 0.5)], -1)
        n = np.linalg.norm(v, axis=-1)
        return n + v[:, 0] / n + np.arctan2(x, 0.5 - x)

    eps = 1e-6
    fd = (ref(x_np + eps) - ref(x_np - eps)) / (2 * eps)
    grad, tangent = _reverse_and_forward(nonzero_norms, x_np, device)
    np.testing.assert_allclose(grad, fd, rtol=1e-7)
    np.testing.assert_allclose(tangent, fd, rtol=1e-7)


# --------------------------------------------------------------------------- gradcheck and NaN

@gk.kernel
def nan_gradient(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sqrt(x[i] * x[i] * x[i])          # d/dx at 0: 1.5 x^2 / sqrt(x^3) = 0/0 = NaN


def test_gradcheck_fails_on_nan(device):
    x = gk.array([0.0, 1.0], device=device, requires_grad=True)
    y = gk.zeros(2, device=device, requires_grad=True)
    assert not gk.autograd.gradcheck(nan_gradient, 2, [x], [y], raise_exception=False, device=device)
    with pytest.raises(gk.GradientCheckError, match="nan"):
        gk.autograd.gradcheck(nan_gradient, 2, [x], [y], device=device)
    x1 = gk.array([0.5, 1.0], device=device, requires_grad=True)
    assert gk.autograd.gradcheck(nan_gradient, 2, [x1], [y], eps=1e-3, device=device)


def test_gradcheck_tape_fails_on_nan(device):
    x = gk.array([0.0, 1.0], device=device, requires_grad=True)
    y = gk.zeros(2, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(nan_gradient, 2, inputs=[x], outputs=[y], device=device)
    assert not gk.autograd.gradcheck_tape(tape, raise_exception=False)


# --------------------------------------------------------------------------- custom rules attached late

def test_func_grad_attached_after_launch_recompiles(device):
    @gk.func
    def root(x: float) -> float:
        return gk.sqrt(x)

    @gk.kernel
    def apply_root(x: gk.array(dtype=float), o: gk.array(dtype=float)):
        i = gk.tid()
        o[i] = root(x[i])

    def grad_of_root():
        x = gk.array([0.0, 4.0], device=device, requires_grad=True)
        o = gk.zeros(2, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(apply_root, 2, inputs=[x, o], device=device)
        tape.backward(grads={o: gk.array([1.0, 1.0], device=device)})
        return x.grad.numpy()

    np.testing.assert_allclose(grad_of_root(), [np.inf, 0.25])

    @gk.func_grad(root)
    def adj_root(x: float, adj_ret: float):
        if x > 0.0:
            gk.adjoint[x] += 0.5 / gk.sqrt(x) * adj_ret

    np.testing.assert_allclose(grad_of_root(), [0.0, 0.25])

    @gk.func_replay(root)
    def replay_root(x: float) -> float:
        return gk.sqrt(x)

    np.testing.assert_allclose(grad_of_root(), [0.0, 0.25])


# --------------------------------------------------------------------------- context managers

def test_nested_tapes_raise():
    outer = gk.Tape()
    with outer:
        with pytest.raises(RuntimeError, match="already recording"):
            with gk.Tape():
                pass
    with gk.Tape():          # the failed inner tape left no state behind
        pass


@gk.kernel
def square(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


def test_forward_mode_clears_its_seeds(device, rng):
    x_np, v_np = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    x = f64(x_np, device)
    y = gk.zeros(3, dtype=gk.float64, device=device)
    with gk.ForwardMode(seeds={x: f64(v_np, device)}):
        gk.launch(square, 3, inputs=[x, y], device=device)
        np.testing.assert_allclose(x.dual.numpy(), v_np)
    np.testing.assert_allclose(y.dual.numpy(), 2 * x_np * v_np, rtol=1e-12)
    np.testing.assert_allclose(x.dual.numpy(), 0.0)          # seed cleared on exit (Taichi's FwdMode)
    with gk.ForwardMode(seeds={x: f64(v_np, device)}, clear_gradients=False):
        pass
    np.testing.assert_allclose(y.dual.numpy(), 2 * x_np * v_np, rtol=1e-12)
    with gk.ForwardMode(seeds={x: f64(v_np, device)}):       # clear_gradients=True: touched duals restart
        y2 = gk.zeros(3, dtype=gk.float64, device=device)
        gk.launch(square, 3, inputs=[x, y2], device=device)
        gk.launch(square, 3, inputs=[x, y], device=device)
    np.testing.assert_allclose(y.dual.numpy(), 2 * x_np * v_np, rtol=1e-12)


# --------------------------------------------------------------------------- host writes on a tape

@gk.kernel
def mul2(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


@gk.kernel
def weighted_total(y: gk.array(dtype=gk.float64), w: gk.array(dtype=gk.float64),
                   l: gk.array(dtype=gk.float64)):
    i = gk.tid()
    l[0] += w[i] * y[i] * y[i]


def _host_write_case(device, rng, write):
    """x → y = 2x → (host write into y) → l = Σ w y²; returns (x, s, w, l) after backward."""
    n = 5
    x = f64(rng.uniform(-1, 1, n), device, requires_grad=True)
    s = f64(rng.uniform(-1, 1, n), device, requires_grad=True)
    w = f64(rng.uniform(0.5, 1.5, n), device)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(mul2, n, inputs=[x], outputs=[y], device=device)
        y = write(y, s) or y
        gk.launch(weighted_total, n, inputs=[y, w], outputs=[l], device=device)
    tape.backward(loss=l)
    return x, s, w, y, l


@pytest.mark.parametrize("how", ["assign", "gk.copy"])
def test_assign_from_array_is_differentiated(device, rng, how):
    write = (lambda y, s: y.assign(s)) if how == "assign" else (lambda y, s: gk.copy(y, s))
    x, s, w, y, l = _host_write_case(device, rng, write)
    np.testing.assert_allclose(y.numpy(), s.numpy())
    np.testing.assert_allclose(s.grad.numpy(), 2 * w.numpy() * s.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 0.0)


@pytest.mark.parametrize("how", ["assign-numpy", "fill_", "zero_", "assign-scalar"])
def test_constant_writes_cut_the_gradient(device, rng, how):
    values = rng.uniform(-1, 1, 5)
    write = {"assign-numpy": lambda y, s: y.assign(values), "fill_": lambda y, s: y.fill_(0.25),
             "zero_": lambda y, s: y.zero_(), "assign-scalar": lambda y, s: y.assign(0.5)}[how]
    x, s, w, y, l = _host_write_case(device, rng, write)
    np.testing.assert_allclose(x.grad.numpy(), 0.0)
    np.testing.assert_allclose(s.grad.numpy(), 0.0)
    expected = {"assign-numpy": values, "fill_": 0.25, "zero_": 0.0, "assign-scalar": 0.5}[how]
    np.testing.assert_allclose(l.numpy(), [np.sum(w.numpy() * np.broadcast_to(expected, 5) ** 2)], rtol=1e-12)


def test_copy_and_partial_copy_are_differentiated(device, rng):
    """y = 2x; z = y.copy(); z[1:4] = s[0:3] (gk.copy with offsets); l = Σ w z²."""
    n = 5
    x = f64(rng.uniform(-1, 1, n), device, requires_grad=True)
    s = f64(rng.uniform(-1, 1, n), device, requires_grad=True)
    w = f64(rng.uniform(0.5, 1.5, n), device)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=l):
        gk.launch(mul2, n, inputs=[x], outputs=[y], device=device)
        z = y.copy()
        gk.copy(z, s, dest_offset=1, src_offset=0, count=3)
        gk.launch(weighted_total, n, inputs=[z, w], outputs=[l], device=device)
    zx = 2 * x.numpy()
    zs = zx.copy()
    zs[1:4] = s.numpy()[:3]
    np.testing.assert_allclose(z.numpy(), zs, rtol=1e-12)
    gx = 2 * w.numpy() * zs * 2
    gx[1:4] = 0
    gs = np.zeros(n)
    gs[:3] = 2 * w.numpy()[1:4] * zs[1:4]
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), gs, rtol=1e-12)


def test_host_writes_outside_a_tape_and_without_grad_are_not_recorded(device):
    a = gk.zeros(3, device=device)
    g = gk.zeros(3, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        a.assign([1.0, 2.0, 3.0])
        a.fill_(2.0)
        b = gk.full(3, 1.5, device=device, requires_grad=True)
        c = gk.ones_like(g)
    assert tape.records == []
    np.testing.assert_allclose(b.numpy(), 1.5)
    np.testing.assert_allclose(c.numpy(), 1.0)


@pytest.mark.parametrize("kwargs, match", [
    ({"dest_offset": -1}, "dest_offset"), ({"src_offset": 5}, "src_offset"), ({"count": 9}, "count"),
    ({"dest_offset": 2, "count": 3}, "dest_offset"),
])
def test_gk_copy_bad_ranges_name_the_argument(device, kwargs, match):
    dst, src = gk.zeros(4, device=device), gk.ones(4, device=device)
    with pytest.raises(ValueError, match=match):
        gk.copy(dst, src, **kwargs)
    np.testing.assert_allclose(dst.numpy(), 0.0)          # nothing written by a failed call


# --------------------------------------------------------------------------- writes through host views

@gk.kernel
def sin_of(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = gk.sin(x[i])


def _view_write(how, x):
    if not isinstance(how, str):                     # a view taken before recording, written after
        how[:] = 0.5
    elif how == "numpy":
        x.numpy()[:] = 0.5
    elif how == "asarray":
        np.asarray(x)[1] = 0.5
    else:
        np.from_dlpack(x)[2] = 0.5


@pytest.mark.parametrize("how", ["numpy", "asarray", "dlpack", "early-view"])
def test_writes_through_host_views_after_recording_are_caught(how, rng):
    """A host view (cpu arrays are zero-copy) written after recording: backward would differentiate sin at
    the new values, so it raises instead; reading through views raises nothing."""
    x = f64(rng.uniform(-1, 1, 4), "cpu", requires_grad=True)
    y = gk.zeros(4, dtype=gk.float64, device="cpu", requires_grad=True)
    early = x.numpy() if how == "early-view" else None
    tape = gk.Tape()
    with tape:
        gk.launch(sin_of, 4, inputs=[x], outputs=[y], device="cpu")
    x.numpy().sum(), np.asarray(x).max(), np.from_dlpack(x).min()       # reads alone are fine
    _view_write(early if early is not None else how, x)
    with pytest.raises(gk.GradientRuleError, match="modified after it was recorded"):
        tape.backward(grads={y: f64(np.ones(4), "cpu")})


def test_reading_views_keeps_backward_working(device, rng):
    x_np = rng.uniform(-1, 1, 4)
    x = f64(x_np, device, requires_grad=True)
    y = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    view = x.numpy()
    tape = gk.Tape()
    with tape:
        gk.launch(sin_of, 4, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(view, x_np)
    np.testing.assert_allclose(np.asarray(y), np.sin(x_np), rtol=1e-12)
    tape.backward(grads={y: f64(np.ones(4), device)})
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x_np), rtol=1e-12)


# --------------------------------------------------------------------------- one array in and out

@pytest.mark.parametrize("check", [True, False])
def test_same_array_in_and_out_raises(device, rng, check):
    """`y = x * x` launched with x as both x and y: under checks the launch is refused before it runs (x
    keeps its values); without, backward refuses instead of differentiating at the overwritten values."""
    x_np = rng.uniform(-1, 1, 3)
    x = f64(x_np, device, requires_grad=True)
    tape = gk.Tape(check=check)
    if check:
        with pytest.raises(gk.GradientRuleError, match="writes the same array"):
            with tape:
                gk.launch(square, 3, inputs=[x], outputs=[x], device=device)
        np.testing.assert_allclose(x.numpy(), x_np)
        return
    with tape:
        gk.launch(square, 3, inputs=[x], outputs=[x], device=device)
    with pytest.raises(gk.GradientRuleError, match="writes the same array"):
        tape.backward(grads={x: f64(np.ones(3), device)})


@gk.kernel
def scale_in_place(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] *= x[i]
    y[i] += gk.sin(y[i])


@gk.kernel
def rule_one(x: gk.array(dtype=gk.float64), b: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    loss[0] = x[1] * b[0]                       # Taichi's rule-1 example: b read, then modified
    b[0] += 100.0


def test_read_modify_write_in_place_is_differentiated(device, rng):
    """`y[i] *= x[i]; y[i] += sin(y[i])` in place: the adjoint reads y as it was before the launch (a copy
    the tape took), so dy_new/dx = y_old (1 + cos(x y_old)) and dy_new/dy_old = x (1 + cos(x y_old))."""
    x_np, y_np, w = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    x, y = f64(x_np, device, requires_grad=True), f64(y_np, device, requires_grad=True)
    tape = gk.Tape()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gk.GradientRuleWarning)
        with tape:
            gk.launch(scale_in_place, 4, inputs=[x, y], device=device)
    p = x_np * y_np
    np.testing.assert_allclose(y.numpy(), p + np.sin(p), rtol=1e-12)
    tape.backward(grads={y: f64(w, device)})
    np.testing.assert_allclose(x.grad.numpy(), w * y_np * (1 + np.cos(p)), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), w * x_np * (1 + np.cos(p)), rtol=1e-12)


def test_taichi_rule_one_program_gets_the_right_gradient(device, rng):
    x_np, b0 = rng.uniform(-1, 1, 2), float(rng.uniform(-1, 1))
    x = f64(x_np, device, requires_grad=True)
    b = f64([b0], device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gk.GradientRuleWarning)
        with gk.Tape(loss=loss):
            gk.launch(rule_one, 1, inputs=[x, b, loss], device=device)
    np.testing.assert_allclose(b.numpy(), [b0 + 100.0])
    np.testing.assert_allclose(x.grad.numpy(), [0.0, b0], rtol=1e-12)       # b as the launch read it
    np.testing.assert_allclose(b.grad.numpy(), [x_np[1]], rtol=1e-12)


# --------------------------------------------------------------------------- atomic_min / atomic_max ties

@gk.kernel
def extremes(x: gk.array(dtype=float), m: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_max(m, 0, x[i] * 2.0)
    gk.atomic_min(m, 1, x[i])


@gk.kernel
def extremes64(x: gk.array(dtype=gk.float64), m: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_max(m, 0, x[i] * 2.0)
    gk.atomic_min(m, 1, x[i])


@pytest.mark.parametrize("dtype", [gk.float32, gk.float64])
@pytest.mark.parametrize("values", [[1.0, 1.0, 1.0, 1.0], [0.5, 1.0, -0.25, 1.0], [0.3, -0.7, 0.9, 0.1]])
def test_atomic_min_max_ties_give_the_gradient_once(device, dtype, values):
    """max(2x) and min(x) over 4 threads: the gradient reaches exactly one of the threads holding the
    extreme (ties included), so Σ x.grad = 2 w_max + w_min — not 4× that when all four tie. When the
    initial value is the extreme, no thread gets any gradient and the element keeps it."""
    kernel = extremes if dtype is gk.float32 else extremes64
    x = gk.array(np.array(values), dtype=dtype, device=device, requires_grad=True)
    m = gk.array(np.array([-10.0, 10.0]), dtype=dtype, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, 4, inputs=[x, m], device=device)
    w = np.array([0.75, 1.25])
    tape.backward(grads={m: gk.array(w, dtype=dtype, device=device)})
    v = np.array(values)
    g = x.grad.numpy()
    assert g.sum() == pytest.approx(2 * w[0] + w[1])
    winners_max, winners_min = np.flatnonzero(v == v.max()), np.flatnonzero(v == v.min())
    assert set(np.flatnonzero(g)) <= set(winners_max) | set(winners_min)
    assert np.isclose(g[winners_max].sum() - (w[1] if v.max() == v.min() else 0), 2 * w[0])
    high = gk.array(np.array([10.0, -10.0]), dtype=dtype, device=device, requires_grad=True)
    x.grad.zero_()
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, 4, inputs=[x, high], device=device)
    tape.backward(grads={high: gk.array(w, dtype=dtype, device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 0.0)
    np.testing.assert_allclose(high.grad.numpy(), w)


def test_forward_mode_of_atomic_max_is_refused(device):
    x = gk.array([1.0, 2.0], device=device)
    m = gk.zeros(2, device=device)
    with pytest.raises(gk.CompileError, match="atomic_max"):
        with gk.ForwardMode(seeds={x: gk.array([1.0, 1.0], device=device)}):
            gk.launch(extremes, 2, inputs=[x, m], device=device)


@gk.kernel
def weighted_square_max(x: gk.array(dtype=gk.float64), c: gk.array(dtype=gk.float64),
                        m: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_max(m, 0, c[i] * x[i] * x[i])


def test_hessian_vector_product_through_atomic_max(device, rng):
    """Forward-over-reverse through the adjoint's claim of the winner's gradient (the `xchg` atomic carries
    its tangent): d(grad)/dx · v = 2 c_win v_win at the winning thread, zero elsewhere."""
    x_np, c_np, v_np = rng.uniform(0.5, 1.5, 5), rng.uniform(0.5, 1.5, 5), rng.uniform(-1, 1, 5)
    x, c = f64(x_np, device, requires_grad=True), f64(c_np, device)
    m = f64([-1.0], device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(weighted_square_max, 5, inputs=[x, c, m], device=device)
    with gk.ForwardMode(seeds={x: f64(v_np, device)}):
        tape.backward(grads={m: f64([1.0], device)})
    win = np.argmax(c_np * x_np ** 2)
    grad, hvp = np.zeros(5), np.zeros(5)
    grad[win], hvp[win] = 2 * c_np[win] * x_np[win], 2 * c_np[win] * v_np[win]
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12)
    np.testing.assert_allclose(x.grad.dual.numpy(), hvp, rtol=1e-12)
