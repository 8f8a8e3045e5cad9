"""Tape semantics that Warp and Taichi programs rely on (issue 17): time-indexed arrays, Warp's seeding
idioms, repeated backward passes and rule warnings only where they help — each on every device."""

import warnings

import numpy as np
import pytest

import gradkit as gk


def f64(values, device, requires_grad=False):
    return gk.array(np.asarray(values, dtype=np.float64), dtype=gk.float64, device=device,
                    requires_grad=requires_grad)


# --------------------------------------------------------------------------- time-indexed trajectories

@gk.kernel
def step(x: gk.array(dtype=float, ndim=2), t: int):
    i = gk.tid()
    x[t, i] = gk.sin(x[t - 1, i])


@gk.kernel
def last(x: gk.array(dtype=float, ndim=2), l: gk.array(dtype=float)):
    l[0] = x[2, 0]


@gk.kernel
def step64(x: gk.array(dtype=gk.float64, ndim=2), v: gk.array(dtype=gk.float64), t: int):
    i = gk.tid()
    x[t, i] = x[t - 1, i] + 0.1 * gk.cos(x[t - 1, i]) * v[i]


@gk.kernel
def trajectory_loss(x: gk.array(dtype=gk.float64, ndim=2), t: int, l: gk.array(dtype=gk.float64)):
    i = gk.tid()
    l[0] += x[t, i] * x[t, i]


def test_issue_snippet_time_indexed_rows(device):
    """Each step writes row t and reads row t - 1: no false "modified after recording"; the gradient is
    the float64 reference's: d sin(sin(x00)) / d x00."""
    x = gk.ones((3, 2), requires_grad=True, device=device)
    l = gk.zeros(1, requires_grad=True, device=device)
    with gk.Tape(loss=l):
        gk.launch(step, 2, inputs=[x, 1], device=device)
        gk.launch(step, 2, inputs=[x, 2], device=device)
        gk.launch(last, 1, inputs=[x, l], device=device)
    expected = np.zeros((3, 2))
    expected[0, 0] = np.cos(np.sin(1.0)) * np.cos(1.0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(l.numpy(), [np.sin(np.sin(1.0))], rtol=1e-6)


def test_trajectory_in_one_array_matches_float64(device, rng):
    """A 6-step trajectory x[t, i] with a velocity input, against central differences in float64."""
    steps, n = 6, 4
    x0, v0 = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)

    def run(x0_np, v_np, dev=device):
        x = gk.zeros((steps + 1, n), dtype=gk.float64, device=dev, requires_grad=True)
        x.assign(np.vstack([x0_np, np.zeros((steps, n))]))
        v = f64(v_np, dev, requires_grad=True)
        l = gk.zeros(1, dtype=gk.float64, device=dev, requires_grad=True)
        tape = gk.Tape()
        with tape:
            for t in range(1, steps + 1):
                gk.launch(step64, n, inputs=[x, v, t], device=dev)
            gk.launch(trajectory_loss, n, inputs=[x, steps, l], device=dev)
        return tape, x, v, l

    tape, x, v, l = run(x0, v0)
    tape.backward(loss=l)

    def ref(v_np):
        s = x0.copy()
        for _ in range(steps):
            s = s + 0.1 * np.cos(s) * v_np
        return np.sum(s * s)

    eps = 1e-6
    fd = np.array([(ref(v0 + eps * e) - ref(v0 - eps * e)) / (2 * eps) for e in np.eye(n)])
    np.testing.assert_allclose(l.numpy(), [ref(v0)], rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), fd, rtol=1e-7)


def test_overwriting_a_needed_row_still_raises(device):
    x = gk.ones((3, 2), requires_grad=True, device=device)
    l = gk.zeros(1, requires_grad=True, device=device)
    tape = gk.Tape()
    with tape:
        gk.launch(step, 2, inputs=[x, 1], device=device)
        gk.launch(step, 2, inputs=[x, 2], device=device)
        gk.launch(last, 1, inputs=[x, l], device=device)
        gk.launch(step, 2, inputs=[x, 1], device=device)       # rewrites row 1, which step(t=2) read
    with pytest.raises(gk.GradientRuleError, match="writes row 1"):
        tape.backward(loss=l)


@pytest.mark.parametrize("how", ["outside-tape", "host-element", "assign"])
def test_untracked_writes_to_a_needed_array_raise(device, how):
    x = gk.ones((3, 2), requires_grad=True, device=device)
    l = gk.zeros(1, requires_grad=True, device=device)
    tape = gk.Tape()
    with tape:
        gk.launch(step, 2, inputs=[x, 1], device=device)
        gk.launch(last, 1, inputs=[x, l], device=device)
    if how == "outside-tape":
        gk.launch(step, 2, inputs=[x, 2], device=device)         # row 2 only, but the tape did not see it
    elif how == "host-element":
        x[0, 1] = 3.0
    else:
        x.assign(np.full((3, 2), 0.5, dtype=np.float32))
    with pytest.raises(gk.GradientRuleError, match="modified after it was recorded"):
        tape.backward(loss=l)


def test_view_writes_before_recording_are_not_flagged(device, rng):
    """A NumPy view written between training steps, before the next tape records the array, is the data that
    tape records: its backward must run (with the new values) instead of calling them modified."""
    x = f64(rng.random(5), device, requires_grad=True)
    view = x.numpy()
    for step_no in range(3):
        new = rng.random(5)
        if device.startswith("cpu") or view.base is not None:
            view[:] = new                      # host memory: a write through the view handed out at step 0
            x.numpy()[:] = new                 # and through a fresh one
        else:
            x.assign(new)
        y = gk.zeros(5, dtype=gk.float64, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(cube, 5, inputs=[x], outputs=[y], device=device)
        tape.backward(grads={y: np.ones(5)})
        np.testing.assert_allclose(x.grad.numpy(), 3 * new ** 2, rtol=1e-12)
        x.grad.zero_()


def test_view_write_between_two_records_is_caught(device, rng):
    """Recorded twice on one tape with a write through a view in between: the first record's values are gone,
    which the checksum taken when *it* was recorded tells."""
    x = f64(rng.random(4), device, requires_grad=True)
    view = x.numpy()
    y1 = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    y2 = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(cube, 4, inputs=[x], outputs=[y1], device=device)
        if view.base is None:                  # a copy (device memory): write the way such arrays are written
            x.assign(rng.random(4))
        else:
            view[:] = rng.random(4)
        gk.launch(cube, 4, inputs=[x], outputs=[y2], device=device)
    with pytest.raises(gk.GradientRuleError, match="'x'.*(modified|overwritten).* after it was recorded"):
        tape.backward(grads={y1: np.ones(4), y2: np.ones(4)})


def test_check_versions_off(device):
    x = gk.ones((3, 2), requires_grad=True, device=device)
    l = gk.zeros(1, requires_grad=True, device=device)
    tape = gk.Tape(check_versions=False)
    with tape:
        gk.launch(step, 2, inputs=[x, 1], device=device)
        gk.launch(last, 1, inputs=[x, l], device=device)
    x[2, 1] = 3.0                       # an expert knows row 0 (what step's adjoint reads) is unchanged
    tape.backward(loss=l)


# --------------------------------------------------------------------------- Warp's seeding idioms

@gk.kernel
def cube(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i]


@gk.kernel
def scale(y: gk.array(dtype=gk.float64), z: gk.array(dtype=gk.float64)):
    i = gk.tid()
    z[i] = 2.0 * gk.sin(y[i])


def _forward(device, x_np, y_grad=True):
    x = f64(x_np, device, requires_grad=True)
    y = gk.zeros(len(x_np), dtype=gk.float64, device=device, requires_grad=y_grad)
    tape = gk.Tape()
    with tape:
        gk.launch(cube, len(x_np), inputs=[x], outputs=[y], device=device)
    return tape, x, y


def test_grads_with_the_outputs_own_gradient(device, rng):
    """Warp: `y.grad = seed; tape.backward(grads={y: y.grad})` — the seed is not wiped first."""
    x_np, w = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    tape, x, y = _forward(device, x_np)
    y.grad.assign(w)
    tape.backward(grads={y: y.grad})
    np.testing.assert_allclose(x.grad.numpy(), 3 * x_np ** 2 * w, rtol=1e-12)


def test_backward_without_arguments_uses_the_gradients_set(device, rng):
    x_np, w = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    tape, x, y = _forward(device, x_np)
    y.grad.assign(w)
    tape.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x_np ** 2 * w, rtol=1e-12)


def test_seed_on_an_array_without_requires_grad(device, rng):
    """As in Warp, seeding an output that has no `.grad` gives it one, and gradients flow from it."""
    x_np, w = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    tape, x, y = _forward(device, x_np, y_grad=False)
    tape.backward(grads={y: f64(w, device)})
    np.testing.assert_allclose(x.grad.numpy(), 3 * x_np ** 2 * w, rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), w)


def test_manual_checkpointing_idiom(device, rng):
    """Warp's checkpointed examples: the second segment's backward leaves dL/dy in y.grad; the first
    segment is re-run on a fresh tape and `tape.backward()` continues from that gradient."""
    x_np = rng.uniform(-1, 1, 4)
    x = f64(x_np, device, requires_grad=True)
    y = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    z = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    gk.launch(cube, 4, inputs=[x], outputs=[y], device=device)            # forward without a tape
    seg2 = gk.Tape()
    with seg2:
        gk.launch(scale, 4, inputs=[y], outputs=[z], device=device)
    seg2.backward(grads={z: f64(np.ones(4), device)})                      # y.grad = 2 cos(y)
    seg1 = gk.Tape()
    with seg1:
        gk.launch(cube, 4, inputs=[x], outputs=[y], device=device)        # re-run segment 1
    seg1.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(x_np ** 3) * 3 * x_np ** 2, rtol=1e-12)


def test_adjoint_launch_writes_seed_before_backward(device, rng):
    """An adjoint launch filling y.grad by hand, then tape.backward() from it (kept, not wiped)."""
    x_np = rng.uniform(-1, 1, 4)
    x = f64(x_np, device, requires_grad=True)
    y = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    z = gk.zeros(4, dtype=gk.float64, device=device)
    tape = gk.Tape()
    with tape:
        gk.launch(cube, 4, inputs=[x], outputs=[y], device=device)
    gk.launch(scale, 4, inputs=[y], outputs=[z], device=device, adjoint=True,
              adj_inputs=[y.grad], adj_outputs=[f64(np.ones(4), device)])
    tape.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(x_np ** 3) * 3 * x_np ** 2, rtol=1e-12)


def test_repeated_backward_is_fresh_each_pass(device, rng):
    """Two backward passes on one tape: intermediates hold one pass's gradient, inputs accumulate."""
    x_np = rng.uniform(-1, 1, 4)
    x = f64(x_np, device, requires_grad=True)
    y = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    z = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(cube, 4, inputs=[x], outputs=[y], device=device)
        gk.launch(scale, 4, inputs=[y], outputs=[z], device=device)
    one_pass = 2 * np.cos(x_np ** 3) * 3 * x_np ** 2
    for k in (1, 2):
        tape.backward(grads={z: f64(np.ones(4), device)})
        np.testing.assert_allclose(y.grad.numpy(), 2 * np.cos(x_np ** 3), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), k * one_pass, rtol=1e-12)
    tape.zero()
    tape.backward(grads={z: f64(np.ones(4), device)})
    np.testing.assert_allclose(x.grad.numpy(), one_pass, rtol=1e-12)


# --------------------------------------------------------------------------- rule warnings

def test_rule_warning_only_when_recorded_and_once(device):
    @gk.kernel
    def optimiser_step(p: gk.array(dtype=float), g: gk.array(dtype=float)):
        i = gk.tid()
        p[i] = p[i] - 0.1 * g[i] * p[i]          # read-then-modify: a rule-1 violation

    p, g = gk.ones(3, device=device, requires_grad=True), gk.ones(3, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gk.GradientRuleWarning)
        for _ in range(3):
            gk.launch(optimiser_step, 3, inputs=[p, g], device=device)     # never on a tape: quiet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with gk.Tape():
                gk.launch(optimiser_step, 3, inputs=[p, g], device=device)
    rule = [w for w in caught if issubclass(w.category, gk.GradientRuleWarning)]
    assert len(rule) == 1 and "p" in str(rule[0].message)
