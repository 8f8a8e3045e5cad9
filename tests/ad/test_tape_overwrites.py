"""Arrays that several recorded steps write (issue 36): an overwriting store consumes the gradient of what it
overwrote, `+=` passes it through, views count as their base, host copies route gradients within one memory,
checkpoint blocks check their inputs and keep later writes, and `backward()` fails cleanly — each against
float64 central differences or an analytic value, on every device."""

import numpy as np
import pytest

import gradkit as gk


from tests.ad.tape_cases import (_fd, add_cube_into, f64, odd_sin_into, scale_into, square_into, total,
                                  twice_into, weighted_sum, z64)


def _program(device, x_np, k_np, w_np, record=True):
    """y = k x read into z = 2 y; then y's odd elements overwritten by sin(x); y += x^3; read; y overwritten
    again and never read: every way of writing one buffer again, in one tape (reads of y are linear: a
    nonlinear read followed by an overwrite is refused, see below)."""
    n = x_np.size
    x, k, w = f64(x_np, device, record), f64(k_np, device, record), f64(w_np, device, False)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=record)
    z = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=record)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=record)
    tape = gk.Tape()
    with tape:
        gk.launch(scale_into, n, [x, k], [y], device=device)        # y = k x
        gk.launch(twice_into, n, [y], [z], device=device)           # z = 2 y (reads the first y)
        gk.launch(odd_sin_into, n, [x], [y], device=device)         # guarded: overwrites odd elements only
        gk.launch(add_cube_into, n, [x], [y], device=device)        # accumulation passes gradient through
        gk.launch(total, n, [y], [l], device=device)
        gk.launch(square_into, n, [x], [y], device=device)          # the last write is never read
        gk.launch(weighted_sum, n, [z, w], [l], device=device)
    return tape, x, k, l


def test_overwrite_guarded_overwrite_and_accumulate_match_central_differences(device, rng):
    n = 6
    x_np, k_np, w_np = rng.uniform(-1, 1, n), rng.uniform(0.5, 1.5, 1), rng.uniform(-1, 1, n)
    tape, x, k, l = _program(device, x_np, k_np, w_np)
    tape.backward(loss=l)

    def loss_x(xv):
        return _program(device, xv, k_np, w_np, False)[3].numpy()[0]

    def loss_k(kv):
        return _program(device, x_np, kv, w_np, False)[3].numpy()[0]

    np.testing.assert_allclose(x.grad.numpy(), _fd(loss_x, x_np), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(k.grad.numpy(), _fd(loss_k, k_np), rtol=1e-6, atol=1e-8)


def test_an_array_written_once_keeps_the_gradient_that_reached_it(device, rng):
    """The consuming reset runs only where an earlier step used the memory: a buffer written once keeps its
    gradient (Taichi's behaviour, Warp's retain_grad), so the debugger's flow view can show it."""
    n = 5
    x_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    x, w = f64(x_np, device), f64(w_np, device, False)
    y = z64(n, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, n, [x], [y], device=device)
        gk.launch(weighted_sum, n, [y, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(y.grad.numpy(), w_np, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x_np * w_np, rtol=1e-12)
    assert [r.consume for r in tape.launches] == [False, False]


def test_a_write_through_a_view_consumes_like_a_write_of_the_base(device, rng):
    """y is written, then overwritten through y.reshape(...): the first write gets no gradient."""
    n = 6
    x_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    x, k, w = f64(x_np, device), f64([1.5], device), f64(w_np, device, False)
    y = z64(n, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(scale_into, n, [x, k], [y], device=device)
        gk.launch(square_into, n, [x], [y.reshape((2, 3)).flatten()], device=device)
        gk.launch(weighted_sum, n, [y, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(k.grad.numpy(), [0.0], atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x_np * w_np, rtol=1e-12)


def test_one_memory_read_and_written_as_two_parameters_in_one_launch(device, rng):
    """y = 2 x with y a view of x (a linear read needs no saved values): dL/dx_before = 2 w, not 2 w + w."""
    n = 4
    x_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    x, w = f64(x_np, device), f64(w_np, device, False)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(twice_into, n, [x], [x.reshape(-1)], device=device)
        gk.launch(weighted_sum, n, [x, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 2 * w_np, rtol=1e-12)


def test_a_view_written_while_its_base_is_read_nonlinearly_is_refused(device, rng):
    """x read (its values needed by the adjoint) and written through x.flatten() in one launch: the same
    refusal as passing x twice, at backward and, with checks on, before the launch."""
    x = f64(rng.uniform(-1, 1, 4), device)
    l = z64(1, device)
    before = x.numpy().copy()
    with pytest.raises(gk.GradientRuleError, match="reads array"):
        with gk.Tape(check=True):
            gk.launch(square_into, 4, [x], [x.flatten()], device=device)
    np.testing.assert_array_equal(x.numpy(), before)          # refused before anything was written
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, 4, [x], [x.flatten()], device=device)
        gk.launch(weighted_sum, 4, [x, x], [l], device=device)
    with pytest.raises(gk.GradientRuleError, match="reads array"):
        tape.backward(loss=l)


def test_a_later_write_through_a_view_breaks_a_recorded_read(device, rng):
    x = f64(rng.uniform(-1, 1, 4), device)
    y = z64(4, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, 4, [x], [y], device=device)        # its adjoint needs x
        gk.launch(square_into, 4, [y], [x.reshape((2, 2)).flatten()], device=device)
        gk.launch(weighted_sum, 4, [y, y], [l], device=device)
    with pytest.raises(gk.GradientRuleError, match="modified after it was recorded"):
        tape.backward(loss=l)


# --------------------------------------------------------------------------- host writes

def test_overlapping_copy_within_one_array_routes_gradients_like_memmove(device):
    """y[1:4] = y[0:3] then loss = sum(y): dL/dy_before = [2, 1, 1, 0] (Warp leaves [1, 1, 1, 1] with a
    warning)."""
    y = f64([1.0, 2.0, 3.0, 4.0], device)
    w = f64(np.ones(4), device, False)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.copy(y, y, dest_offset=1, src_offset=0, count=3)
        gk.launch(weighted_sum, 4, [y, w], [l], device=device)
    np.testing.assert_array_equal(y.numpy(), [1.0, 1.0, 2.0, 3.0])
    tape.backward(loss=l)
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 1.0, 1.0, 0.0])


def test_copy_between_two_views_of_one_memory(device):
    """gk.copy(a, b) with a and b views of one array (no MEM_COPY_OVERLAP on OpenCL; the gradient passes
    through an identity copy unchanged)."""
    base = f64([[1.0, 2.0], [3.0, 4.0]], device)
    flat, w = base.flatten(), f64([1.0, 2.0, 3.0, 4.0], device, False)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.copy(flat, base.reshape(-1))
        gk.copy(flat, base.reshape(-1), dest_offset=2, src_offset=0, count=2)   # [1, 2, 1, 2]
        gk.launch(weighted_sum, 4, [flat, w], [l], device=device)
    np.testing.assert_array_equal(base.numpy(), [[1.0, 2.0], [1.0, 2.0]])
    tape.backward(loss=l)
    np.testing.assert_array_equal(base.grad.numpy(), [[4.0, 6.0], [0.0, 0.0]])


def test_a_copy_of_a_view_passes_gradient_like_a_copy_of_the_array(device, rng):
    n = 4
    x_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    x, w = f64(x_np, device), f64(w_np, device, False)
    y = z64(n, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, n, [x], [y], device=device)
        c = y.reshape((2, 2)).copy().reshape(-1)
        gk.launch(weighted_sum, n, [c, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x_np * w_np, rtol=1e-12)


def test_a_host_write_then_a_kernel_overwrite(device, rng):
    """assign from another array, then a kernel overwrites part of the destination: only the rest of the
    copy passes gradient to its source."""
    n = 6
    s_np, x_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    s, x, w = f64(s_np, device), f64(x_np, device), f64(w_np, device, False)
    y = z64(n, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        y.assign(s)
        gk.launch(odd_sin_into, n, [x], [y], device=device)
        gk.launch(weighted_sum, n, [y, w], [l], device=device)
    tape.backward(loss=l)
    odd = np.arange(n) % 2 == 1
    np.testing.assert_allclose(s.grad.numpy(), np.where(odd, 0.0, w_np), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), np.where(odd, np.cos(x_np) * w_np, 0.0), rtol=1e-12)


# --------------------------------------------------------------------------- checkpoint blocks

def _step_block(x, k, y):
    gk.launch(scale_into, x.shape[0], [x, k], [y], device=x.device)


def test_a_checkpoint_recompute_refuses_an_input_changed_since(device, rng):
    x, k = f64(rng.uniform(-1, 1, 4), device), f64([2.0], device)
    y = z64(4, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.checkpoint(_step_block, x, k, y)
        gk.launch(weighted_sum, 4, [y, y], [l], device=device)
        gk.launch(square_into, 4, [y], [x], device=device)        # x changes after the block read it
    with pytest.raises(gk.GradientRuleError, match="checkpoint.*modified after the block ran"):
        tape.backward(loss=l)


def test_a_checkpoint_recompute_leaves_later_writes_in_place(device, rng):
    """y is the block's output and a later launch overwrites it: after backward y holds the later values,
    and the block's write (overwritten before anything read it) passes no gradient."""
    x_np = rng.uniform(-1, 1, 4)
    x, k, w = f64(x_np, device), f64([2.0], device), f64(np.ones(4), device, False)
    y = z64(4, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.checkpoint(_step_block, x, k, y)
        gk.launch(square_into, 4, [x], [y], device=device)
        gk.launch(weighted_sum, 4, [y, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(y.numpy(), x_np ** 2, rtol=1e-12)
    np.testing.assert_allclose(k.grad.numpy(), [0.0], atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x_np, rtol=1e-12)


def test_a_checkpoint_block_overwriting_what_an_earlier_launch_wrote(device, rng):
    """The recompute runs on a fresh tape, but the memory it overwrites was written before the block: its
    adjoint must consume that gradient too."""
    x_np = rng.uniform(-1, 1, 4)
    x, k, w = f64(x_np, device), f64([3.0], device), f64(np.ones(4), device, False)
    y = z64(4, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, 4, [x], [y], device=device)          # dead: the block overwrites y
        gk.checkpoint(_step_block, x, k, y)
        gk.launch(weighted_sum, 4, [y, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 3.0), rtol=1e-12)
    np.testing.assert_allclose(k.grad.numpy(), [x_np.sum()], rtol=1e-12)


def test_a_checkpoint_block_that_overwrites_its_own_input_is_refused(device):
    x, k = f64(np.ones(4), device), f64([2.0], device)
    with gk.Tape():
        with pytest.raises(gk.GradientRuleError, match="overwrites it"):
            gk.checkpoint(_step_block, x, k, x)


# --------------------------------------------------------------------------- backward() itself

def test_backward_with_nothing_to_seed_names_what_to_pass(device):
    x = f64([1.0, 2.0], device)
    y = z64(2, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, 2, [x], [y], device=device)
    with pytest.raises(ValueError, match="loss=.*grads="):
        tape.backward()
    assert not x.grad.numpy().any()
    y.grad.fill_(1.0)                        # a seed set by hand (Warp's idiom) is enough
    tape.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_a_backward_that_raises_midway_leaves_every_gradient_as_it_was(device, rng):
    """A Python record raising in the middle of the pass: the gradients written before it are put back, so a
    retry does not count them twice."""
    n = 4
    x_np, w_np = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    x, w = f64(x_np, device), f64(w_np, device, False)
    y = z64(n, device)
    l = z64(1, device)
    fail = [True]

    def flaky():
        if fail[0]:
            raise RuntimeError("interrupted")

    x.grad.fill_(0.25)                        # an earlier gradient that must survive
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, n, [x], [y], device=device)
        tape.record_func(flaky, [y])
        gk.launch(weighted_sum, n, [y, w], [l], device=device)
    with pytest.raises(RuntimeError, match="interrupted"):
        tape.backward(loss=l)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(n, 0.25))
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros(n))
    np.testing.assert_array_equal(l.grad.numpy(), [0.0])
    fail[0] = False
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), 0.25 + 2 * x_np * w_np, rtol=1e-12)


def test_a_version_error_raises_before_any_gradient_is_written(device, rng):
    x = f64(rng.uniform(-1, 1, 4), device)
    y = z64(4, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, 4, [x], [y], device=device)
        gk.launch(weighted_sum, 4, [y, y], [l], device=device)     # reads y twice: its adjoint needs y
    y.assign(np.zeros(4))                                          # changed after recording
    with pytest.raises(gk.GradientRuleError):
        tape.backward(loss=l)
    assert not l.grad.numpy().any() and not x.grad.numpy().any() and not y.grad.numpy().any()


# --------------------------------------------------------------------------- custom backward functions

@gk.grad_replaced
def scale_block(x, k, y):
    gk.launch(scale_into, x.shape[0], [x, k], [y], device=x.device)


@gk.grad_for(scale_block)
def scale_block_grad(x, k, y):
    scale_into.grad(x.shape[0], [x, k], [y], device=x.device)


def test_a_grad_for_function_consumes_what_it_overwrites(device, rng):
    """y is written by a launch, then overwritten inside a @gk.grad_replaced function whose @gk.grad_for runs
    kernel.grad(): that adjoint consumes y's gradient, so the first write (dead) passes none to x."""
    x_np = rng.uniform(-1, 1, 4)
    x, k, w = f64(x_np, device), f64([3.0], device), f64(np.ones(4), device, False)
    y = z64(4, device)
    l = z64(1, device)
    tape = gk.Tape()
    with tape:
        gk.launch(square_into, 4, [x], [y], device=device)           # dead: overwritten by the block
        scale_block(x, k, y)
        gk.launch(weighted_sum, 4, [y, w], [l], device=device)
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 3.0), rtol=1e-12)
    np.testing.assert_allclose(k.grad.numpy(), [x_np.sum()], rtol=1e-12)
    # outside a tape, kernel.grad() keeps the gradient it read, as Taichi's does
    y.grad.fill_(1.0)
    scale_into.grad(4, [x, k], [y], device=device)
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(4))


# --------------------------------------------------------------------------- stencils on two buffers

@gk.kernel
def heat64(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i == 0 or j == 0 or i == n - 1 or j == m - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = u[i, j] + gk.float64(0.2) * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                                 - gk.float64(4.0) * u[i, j])


@gk.kernel
def weighted_sum2(y: gk.array(dtype=gk.float64, ndim=2), w: gk.array(dtype=gk.float64, ndim=2),
                  l: gk.array(dtype=gk.float64)):
    i, j = gk.tid()
    gk.atomic_add(l, 0, w[i, j] * y[i, j])


def test_a_ping_pong_stencil_consumes_in_its_gathered_adjoint(device, rng):
    """Heat steps alternating between two buffers (u0 -> u1 -> u0 ...): each buffer is overwritten while its
    earlier value's gradient is still owed, and the stencil's adjoint is the gathered one where the device
    prefers it — the consuming adjoint takes its place, against central differences."""
    shape, steps = (6, 7), 5
    u_np, w_np = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)

    def run(start, grad):
        u0 = f64(start, device, grad)
        u1 = gk.zeros(shape, dtype=gk.float64, device=device, requires_grad=grad)
        w = f64(w_np, device, False)
        l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=grad)
        tape = gk.Tape()
        with tape:
            a, b = u0, u1
            for _ in range(steps):
                gk.launch(heat64, shape, [a], [b], device=device)
                a, b = b, a
            gk.launch(weighted_sum2, shape, [a, w], [l], device=device)
        if grad:
            tape.backward(loss=l)
            return tape, u0.grad.numpy()
        return tape, l.numpy()[0]

    tape, g = run(u_np, True)
    assert any(r.consume for r in tape.launches)
    np.testing.assert_allclose(g, _fd(lambda v: run(v, False)[1], u_np), rtol=1e-6, atol=1e-8)
