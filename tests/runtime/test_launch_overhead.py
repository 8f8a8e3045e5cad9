"""The launch fast paths of issue 43 (W5), by behaviour, not timing: a pre-bound launch and a prepared adjoint
run the arguments the backend packed for them last (the CPU backend's `relaunch`), so another launch of the
same kernel in between, other threads, a code upgrade, settings changes and freed arrays must all leave the
results, the version counters and the gradients right (against NumPy float64)."""

import gc
import threading
import weakref

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def scale(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = 2.5 * x[i] + gk.sin(x[i])


@gk.kernel
def square(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


def _ref(x):
    return 2.5 * x + np.sin(x)


def test_interleaved_plans_of_one_kernel_each_get_their_own_arrays(device, rng):
    """Two argument sets of one kernel alternating (the block repacked each time), then one repeated (run
    as packed): every launch writes its own output, and each write bumps the output's version."""
    a, b = (gk.array(rng.normal(size=n), dtype=gk.float64, device=device) for n in (5, 9))
    ya, yb = gk.zeros(5, dtype=gk.float64, device=device), gk.zeros(9, dtype=gk.float64, device=device)
    for step in range(40):
        x, y, n = (a, ya, 5) if step % 3 else (b, yb, 9)
        y.zero_()
        v = y.version
        gk.launch(scale, n, inputs=[x], outputs=[y], device=device)
        assert y.version == v + 1
        np.testing.assert_allclose(y.numpy(), _ref(x.numpy()), rtol=1e-14)
    for _ in range(50):
        ya.zero_()
        gk.launch(scale, 5, inputs=[a], outputs=[ya], device=device)
        np.testing.assert_allclose(ya.numpy(), _ref(a.numpy()), rtol=1e-14)
    assert yb.numpy().any()


def test_new_values_in_the_same_arrays_are_read_each_launch(device, rng):
    """The packed arguments are the arrays, not their values: values written between launches are read."""
    x = gk.array(rng.normal(size=7), dtype=gk.float64, device=device)
    y = gk.zeros(7, dtype=gk.float64, device=device)
    for _ in range(60):
        host = rng.normal(size=7)
        x.assign(host)
        gk.launch(scale, 7, inputs=[x], outputs=[y], device=device)
        np.testing.assert_allclose(y.numpy(), _ref(host), rtol=1e-14)


def test_a_wide_launch_upgrading_the_code_in_between(device, rng):
    """Tiny launches (the code may stay on a lower tier), one wide launch of other arrays (the code is
    replaced), then the tiny launches again: each right."""
    x = gk.array(rng.normal(size=3), dtype=gk.float64, device=device)
    y = gk.zeros(3, dtype=gk.float64, device=device)
    wide_x = gk.array(rng.normal(size=70_000), dtype=gk.float64, device=device)
    wide_y = gk.zeros(70_000, dtype=gk.float64, device=device)
    for k in range(80):
        if k == 40:
            gk.launch(square, 70_000, inputs=[wide_x], outputs=[wide_y], device=device)
            np.testing.assert_allclose(wide_y.numpy(), wide_x.numpy() ** 2, rtol=1e-15)
        y.zero_()
        gk.launch(square, 3, inputs=[x], outputs=[y], device=device)
        np.testing.assert_allclose(y.numpy(), x.numpy() ** 2, rtol=1e-15)


def test_settings_changed_between_repeated_launches_take_effect(device):
    """gk.config.check_nan turned on after repeated launches: the next repeated launch is scanned."""
    x = gk.array(np.array([1.0, -1.0, 4.0]), dtype=gk.float64, device=device)
    y = gk.zeros(3, dtype=gk.float64, device=device)

    @gk.kernel
    def root(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = gk.sqrt(x[i])

    for _ in range(40):
        gk.launch(root, 3, inputs=[x], outputs=[y], device=device)
    y.zero_()                        # the scan reports NaNs a launch adds, not ones already there
    gk.config.check_nan = True
    try:
        with pytest.raises(gk.NaNError, match="root"):
            gk.launch(root, 3, inputs=[x], outputs=[y], device=device)
    finally:
        gk.config.check_nan = False
    gk.launch(root, 3, inputs=[x], outputs=[y], device=device)
    assert np.isnan(y.numpy()[1]) and y.numpy()[2] == 2.0


def test_threads_repeating_launches_of_one_kernel_on_their_own_arrays(device):
    """Four threads, each repeating launches of one kernel on its own arrays (each thread's plan replaces
    the others', the packed block is shared): every result is its own thread's."""
    errors: list = []
    gen = np.random.default_rng(5)
    inputs = [gen.normal(size=4 + t) for t in range(4)]

    def work(t):
        try:
            x = gk.array(inputs[t], dtype=gk.float64, device=device)
            y = gk.zeros(4 + t, dtype=gk.float64, device=device)
            for _ in range(300):
                y.zero_()
                gk.launch(scale, 4 + t, inputs=[x], outputs=[y], device=device)
                got = y.numpy()
                if not np.allclose(got, _ref(inputs[t]), rtol=1e-14, atol=0):
                    errors.append((t, got))
                    return
        except BaseException as e:       # noqa: BLE001 - reported below
            errors.append((t, e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]


def test_repeated_backward_passes_interleaved_with_forward_launches(device, rng):
    """A tape of repeated launches differentiated several times, with forward launches of the same kernel on
    other arrays in between (which repack its block): each pass's gradient against NumPy."""
    x = gk.array(rng.normal(size=6), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(6, dtype=gk.float64, device=device, requires_grad=True)
    other_x = gk.array(rng.normal(size=6), dtype=gk.float64, device=device)
    other_y = gk.zeros(6, dtype=gk.float64, device=device)
    tape = gk.Tape()
    with tape:
        for _ in range(5):
            gk.launch(scale, 6, inputs=[x], outputs=[y], device=device)
    seed = rng.normal(size=6)
    # y is overwritten by each launch: only the last one's adjoint reaches x (the others see a consumed
    # gradient), so dx = seed * (2.5 + cos x) once per pass
    want = seed * (2.5 + np.cos(x.numpy()))
    for _ in range(4):
        x.grad.zero_()
        tape.backward(grads={y: gk.array(seed, dtype=gk.float64, device=device)})
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-13)
        gk.launch(scale, 6, inputs=[other_x], outputs=[other_y], device=device)
        np.testing.assert_allclose(other_y.numpy(), _ref(other_x.numpy()), rtol=1e-14)


def test_accumulating_records_sum_every_adjoint(device, rng):
    """Records that read and add (y += sin x) on the same arrays: each record's adjoint runs as packed and
    each adds, so the gradient is the number of records times one's (against NumPy)."""

    @gk.kernel
    def acc(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = y[i] + gk.sin(x[i])

    x = gk.array(rng.normal(size=4), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        for _ in range(30):
            gk.launch(acc, 4, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), 30 * np.sin(x.numpy()), rtol=1e-13)
    for _ in range(3):
        x.grad.zero_()
        tape.backward(grads={y: gk.ones(4, dtype=gk.float64, device=device)})
        np.testing.assert_allclose(x.grad.numpy(), 30 * np.cos(x.numpy()), rtol=1e-13)


def test_repeated_launches_keep_no_array_alive(device, rng):
    """Neither a pre-bound launch nor a prepared adjoint keeps its arrays alive through the backend's
    record of what it packed last."""
    x = gk.array(rng.normal(size=3), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(3, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        for _ in range(3):
            gk.launch(square, 3, inputs=[x], outputs=[y], device=device)
    tape.backward(grads={y: gk.ones(3, dtype=gk.float64, device=device)})
    tape.backward(grads={y: gk.ones(3, dtype=gk.float64, device=device)})
    refs = [weakref.ref(x), weakref.ref(y)]
    del tape, x, y
    gc.collect()
    assert all(r() is None for r in refs)


def test_records_alternating_between_arrays_get_their_own_adjoints(device, rng):
    """Records of one kernel alternating between two sets of arrays (one prepared adjoint each, one packed
    block between them): each pass gives each input the gradient of its own records (against NumPy)."""

    @gk.kernel
    def acc(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = y[i] + x[i] * x[i] * x[i]

    xa, xb = (gk.array(rng.normal(size=5), dtype=gk.float64, device=device, requires_grad=True) for _ in range(2))
    ya, yb = (gk.zeros(5, dtype=gk.float64, device=device, requires_grad=True) for _ in range(2))
    tape = gk.Tape()
    with tape:
        for k in range(12):
            if k % 3 == 2:
                gk.launch(acc, 5, inputs=[xb], outputs=[yb], device=device)
            else:
                gk.launch(acc, 5, inputs=[xa], outputs=[ya], device=device)
    sa, sb = rng.normal(size=5), rng.normal(size=5)
    for _ in range(3):
        xa.grad.zero_()
        xb.grad.zero_()
        tape.backward(grads={ya: gk.array(sa, dtype=gk.float64, device=device),
                             yb: gk.array(sb, dtype=gk.float64, device=device)})
        np.testing.assert_allclose(xa.grad.numpy(), 8 * 3 * xa.numpy() ** 2 * sa, rtol=1e-13)
        np.testing.assert_allclose(xb.grad.numpy(), 4 * 3 * xb.numpy() ** 2 * sb, rtol=1e-13)


def test_a_new_tape_each_iteration_reuses_the_binding_and_sees_other_adjoint_launches(device, rng):
    """A tape per iteration over the same arrays (its adjoint revived from the kernel's recipe, with the
    recipe's backend token), and every other iteration an explicit adjoint launch of the same kernel on
    other arrays in between (which packs that adjoint for them): each gradient against NumPy."""

    @gk.kernel
    def cube(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), a: gk.float64):
        i = gk.tid()
        y[i] = y[i] + a * x[i] * x[i] * x[i]

    x = gk.array(rng.normal(size=5), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(5, dtype=gk.float64, device=device, requires_grad=True)
    x2 = gk.array(rng.normal(size=5), dtype=gk.float64, device=device)
    y2 = gk.zeros(5, dtype=gk.float64, device=device)
    gx2, gy2 = gk.zeros(5, dtype=gk.float64, device=device), gk.array(rng.normal(size=5), dtype=gk.float64,
                                                                         device=device)
    seed = rng.normal(size=5)
    for it in range(6):
        tape = gk.Tape()
        with tape:
            gk.launch(cube, 5, inputs=[x], outputs=[y, 0.5], device=device)
        if it % 2:
            gx2.zero_()
            gk.launch(cube, 5, inputs=[x2], outputs=[y2, 0.5], device=device, adjoint=True,
                      adj_inputs=[gx2], adj_outputs=[gy2, None])
            np.testing.assert_allclose(gx2.numpy(), 1.5 * x2.numpy() ** 2 * gy2.numpy(), rtol=1e-13)
        x.grad.zero_()
        tape.backward(grads={y: gk.array(seed, dtype=gk.float64, device=device)})
        np.testing.assert_allclose(x.grad.numpy(), 1.5 * x.numpy() ** 2 * seed, rtol=1e-13)


@gk.kernel
def _reads(a: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    out[i] = a[i] * a[i]


@gk.kernel
def _scale_in_place(a: gk.array(dtype=gk.float64)):
    i = gk.tid()
    a[i] = 2.0 * a[i]


def test_a_pre_bound_launch_on_a_tape_is_checked_and_recorded(device, rng):
    """Repeated launches of one kernel (pre-bound) recorded on a tape: the tape's rule check still refuses an
    overwrite of a value an earlier record's adjoint reads, before anything runs, and records of allowed
    launches carry each launch's versions (the output's version right after it)."""
    a = gk.array(rng.normal(size=4), dtype=gk.float64, device=device, requires_grad=True, label="state")
    out = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    for _ in range(5):                                  # the plan of each kernel, off the tape
        gk.launch(_scale_in_place, 4, inputs=[a], device=device)
        gk.launch(_reads, 4, inputs=[a], outputs=[out], device=device)
    before = a.numpy().copy()
    with pytest.raises(gk.GradientRuleError, match="state"):
        with gk.Tape(check=True):
            gk.launch(_reads, 4, inputs=[a], outputs=[out], device=device)
            gk.launch(_scale_in_place, 4, inputs=[a], device=device)
    np.testing.assert_array_equal(a.numpy(), before)    # the refused launch did not run
    tape = gk.Tape()
    with tape:
        for _ in range(4):
            gk.launch(_reads, 4, inputs=[a], outputs=[out], device=device)
    versions = [rec.versions[1] for rec in tape.launches]
    assert versions == sorted(versions) and len(set(versions)) == 4 and versions[-1] == out.version
    assert all(rec.kernel == "_reads" and rec.inputs == [a] and rec.outputs == [out] for rec in tape.launches)
    tape.backward(grads={out: gk.ones(4, dtype=gk.float64, device=device)})
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.numpy(), rtol=1e-14)


@gk.kernel
def _stepped(x: gk.array(dtype=gk.float64, ndim=2), y: gk.array(dtype=gk.float64), t: int, s: int):
    i = gk.tid()
    y[i] = x[t - 1, i] + x[t, i + s] + x[0, i + 2]


def test_bounds_proven_at_launch_never_involve_a_scalar_argument(device, rng):
    """A pre-bound launch proves no bounds again when only scalars change (plan.py): sound because the
    accesses proven at launch (bounds.scan) are affine in thread ids and constants only. An index built from
    a scalar argument is not among them; a constant-and-tid one is, and is proven on the planned path."""
    from gradkit.runtime.launch.bounds import scan
    fn = _stepped.lowered("forward")
    found, _ = scan(fn)
    params = [p.name for p in fn.params]
    assert {(params[a.param], a.dim, a.axis, a.scale, a.offset) for a in found} == {
        ("y", 0, 0, 1, 0), ("x", 0, None, 0, 0), ("x", 1, 0, 1, 2), ("x", 1, 0, 1, 0)}
    x = gk.array(rng.normal(size=(6, 10)), dtype=gk.float64, device=device)
    y = gk.zeros(8, dtype=gk.float64, device=device)
    host = x.numpy()
    for t in range(1, 6):
        gk.launch(_stepped, 8, inputs=[x, y, t, 1], device=device)
        np.testing.assert_allclose(y.numpy(), host[t - 1, :8] + host[t, 1:9] + host[0, 2:10], rtol=1e-15)
    with pytest.raises(IndexError, match="'x'"):
        gk.launch(_stepped, 9, inputs=[x, y, 1, 0], device=device)      # x[0, i + 2] past 10 columns


@gk.kernel
def _reciprocal(y: gk.array(dtype=gk.float32), a: gk.float32, k: int):
    i = gk.tid()
    y[i] = 1.0 / a + gk.float32(k)


def test_scalars_converted_once_keep_every_value_and_check(device, rng):
    """Scalar arguments are converted once per value and kept (bind.py): a zero's sign still reaches the
    kernel (0.0 == -0.0 but 1/x tells them apart), float32 rounding is NumPy's, an int parameter still
    refuses an out-of-range or float value after many in-range ones."""
    y = gk.zeros(3, dtype=gk.float32, device=device)
    for a in (0.0, -0.0, 0.0, -0.0):
        gk.launch(_reciprocal, 3, inputs=[y, a, 0], device=device)
        assert np.all(y.numpy() == np.float32(1.0) / np.float32(a) if a else np.isinf(y.numpy()))
        assert np.all(np.signbit(y.numpy()) == np.signbit(a))
    values = rng.normal(size=20) * 1e3
    for _ in range(2):
        for k, a in enumerate(values):
            gk.launch(_reciprocal, 3, inputs=[y, float(a), k], device=device)
            want = np.float32(1.0) / np.float32(a) + np.float32(k)
            np.testing.assert_array_equal(y.numpy(), np.full(3, want, np.float32))
    with pytest.raises(ValueError, match="parameter 'k'"):
        gk.launch(_reciprocal, 3, inputs=[y, 1.0, 2**40], device=device)
    with pytest.raises(TypeError, match="parameter 'k'"):
        gk.launch(_reciprocal, 3, inputs=[y, 1.0, 2.0], device=device)
    with pytest.raises(ValueError, match="parameter 'a'"):
        gk.launch(_reciprocal, 3, inputs=[y, 1e39, 2], device=device)


def test_threads_repeating_launches_with_their_own_scalars(device):
    """Four threads launching one kernel, each on its own arrays with a scalar that changes every launch (the
    backend rewrites only the scalar slots while its block holds a plan's arrays): every result is the
    thread's own, against NumPy."""

    @gk.kernel
    def axpb(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), a: gk.float64, b: int):
        i = gk.tid()
        y[i] = a * x[i] + gk.float64(b)

    errors: list = []
    gen = np.random.default_rng(11)
    inputs = [gen.normal(size=3 + t) for t in range(4)]

    def work(t):
        try:
            x = gk.array(inputs[t], dtype=gk.float64, device=device)
            y = gk.zeros(3 + t, dtype=gk.float64, device=device)
            for step in range(200):
                a, b = 0.25 * step + t, step - 7 * t
                gk.launch(axpb, 3 + t, inputs=[x], outputs=[y, a, b], device=device)
                if not np.array_equal(y.numpy(), a * inputs[t] + b):
                    errors.append((t, step))
                    return
        except BaseException as e:       # noqa: BLE001 - reported below
            errors.append((t, e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]


@gk.kernel
def _step(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64, ndim=2), t: int, c: gk.float64):
    i = gk.tid()
    y[t, i] = y[t - 1, i] + c * gk.float64(t) * gk.sin(x[i])


def test_time_stepped_tapes_write_each_records_step_into_the_shared_binding(device, rng):
    """A new tape per iteration of a time-stepped program (records of one kernel on the same arrays differing
    in a step number and a coefficient: their revived adjoints share one backend token and write only the
    scalars), with an explicit adjoint launch of the kernel on other arrays between iterations: the gradient
    against NumPy each time."""
    steps, n = 6, 5
    x = gk.array(rng.normal(size=n), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros((steps, n), dtype=gk.float64, device=device, requires_grad=True)
    x2 = gk.array(rng.normal(size=n), dtype=gk.float64, device=device)
    y2 = gk.zeros((steps, n), dtype=gk.float64, device=device)
    gx2 = gk.zeros(n, dtype=gk.float64, device=device)
    gy2 = gk.array(rng.normal(size=(steps, n)), dtype=gk.float64, device=device)
    seed = rng.normal(size=(steps, n))
    coef = [0.5 + 0.25 * t for t in range(steps)]
    # y[T-1] = sum_t c_t * t * sin(x): d/dx of sum(seed * y) over every row
    rows = np.cumsum([coef[t] * t for t in range(steps)])
    want = (seed * rows[:, None]).sum(axis=0) * np.cos(x.numpy())
    for it in range(4):
        tape = gk.Tape()
        with tape:
            for t in range(1, steps):
                gk.launch(_step, n, inputs=[x], outputs=[y, t, coef[t]], device=device)
        x.grad.zero_()
        tape.backward(grads={y: gk.array(seed, dtype=gk.float64, device=device)})
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
        if it % 2:
            gx2.zero_()
            g3 = gy2.numpy()[3].copy()          # the adjoint of the store reads then resets y2's gradient row
            gk.launch(_step, n, inputs=[x2], outputs=[y2, 3, 2.0], device=device, adjoint=True,
                      adj_inputs=[gx2], adj_outputs=[gy2, None, None])
            np.testing.assert_allclose(gx2.numpy(), g3 * 2.0 * 3 * np.cos(x2.numpy()), rtol=1e-12)
            gy2.assign(rng.normal(size=(steps, n)))


@gk.kernel
def _relax(u: gk.array(dtype=gk.float64), v: gk.array(dtype=gk.float64)):
    i = gk.tid()
    v[i] = 0.5 * u[i] + 0.25 * gk.sin(u[i])


def test_double_buffered_launches_alternate_between_two_plans(device, rng):
    """A kernel launched on two arrays swapped every step (state ping-pong) takes the plan before the last:
    each step's values against NumPy, each write bumps its output's version, a taped run of it gives the
    gradient against NumPy, and neither plan keeps an array alive."""
    host = rng.normal(size=7)
    a = gk.array(host, dtype=gk.float64, device=device, requires_grad=True)
    b = gk.zeros(7, dtype=gk.float64, device=device, requires_grad=True)
    pair = [a, b]
    for s in range(12):
        src, dst = pair[s % 2], pair[1 - s % 2]
        v = dst.version
        gk.launch(_relax, 7, inputs=[src], outputs=[dst], device=device)
        assert dst.version == v + 1
        host = 0.5 * host + 0.25 * np.sin(host)
        np.testing.assert_allclose(dst.numpy(), host, rtol=1e-13)
    assert {id(_relax._plan.refs[0][1]()), id(_relax._plan_other.refs[0][1]())} == {id(a), id(b)}
    c = gk.array(rng.normal(size=7), dtype=gk.float64, device=device)       # a third pair: neither plan's
    d = gk.zeros(7, dtype=gk.float64, device=device)
    for src, dst in ((c, d), (a, b), (b, a), (c, d), (b, a)):
        gk.launch(_relax, 7, inputs=[src], outputs=[dst], device=device)
        np.testing.assert_allclose(dst.numpy(), 0.5 * src.numpy() + 0.25 * np.sin(src.numpy()), rtol=1e-13)
    x = gk.array(rng.normal(size=7), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(7, dtype=gk.float64, device=device, requires_grad=True)
    z = gk.zeros(7, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(_relax, 7, inputs=[x], outputs=[y], device=device)
        gk.launch(_relax, 7, inputs=[y], outputs=[z], device=device)
    tape.backward(grads={z: gk.ones(7, dtype=gk.float64, device=device)})
    xs = x.numpy()
    ys = 0.5 * xs + 0.25 * np.sin(xs)
    np.testing.assert_allclose(x.grad.numpy(), (0.5 + 0.25 * np.cos(ys)) * (0.5 + 0.25 * np.cos(xs)), rtol=1e-13)
    refs = [weakref.ref(t) for t in (a, b, x, y, z)]
    del a, b, pair, src, dst, x, y, z, tape
    gc.collect()
    assert all(r() is None for r in refs)
