"""The tape's short recording path (Tape.record_launch, arrays it recorded before, nothing to copy, check or
snapshot) makes the same records as the full one, and every check the full one feeds still fires: writes
through a NumPy view handed out between launches, arrays first named by record_func, scopes, scalars."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def _square(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def _step(x: gk.array(dtype=float), dt: float, y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] + dt * x[i] * x[i]


def _arrays(device, rng, n=8):
    x = gk.array(rng.uniform(0.1, 1.0, n).astype(np.float32), device=device, requires_grad=True)
    return x, gk.zeros(n, device=device, requires_grad=True)


def test_repeated_launch_records_match_the_full_path(device, rng):
    """The first launch takes the full path (first touch), the next ones the short one: same fields, and
    each record's versions are those right after its launch."""
    x, y = _arrays(device, rng)
    with gk.Tape() as tape:
        seen = []
        for _ in range(4):
            gk.launch(_square, 8, inputs=[x], outputs=[y], device=device)
            seen.append((x.version, y.version))
    assert [r.versions for r in tape.records] == seen
    first = tape.records[0]
    for r in tape.records:
        assert (r.kernel, r.dim, r.device, r.n_inputs, r.kernel_obj) == \
            (first.kernel, first.dim, first.device, first.n_inputs, first.kernel_obj)
        assert r.args[0] is x and r.args[1] is y and r.inputs == [x] and r.outputs == [y]
        assert (r.scope, r.variant, r.saved, r.crcs, r.snapshots, r.kind) == ((), "forward", None, None, None,
                                                                                 "launch")


def test_scalar_arguments_and_scopes(device, rng):
    x, y = _arrays(device, rng)
    z, w = (gk.zeros(8, device=device, requires_grad=True) for _ in range(2))
    with gk.Tape() as tape:
        gk.launch(_step, 8, inputs=[x, 0.5], outputs=[y], device=device)
        with tape.scope("later"):
            gk.launch(_step, 8, inputs=[y, 0.25], outputs=[z], device=device)
            gk.launch(_step, 8, inputs=[x, 0.5], outputs=[w], device=device)
    assert [r.scope for r in tape.records] == [(), ("later",), ("later",)]
    assert all(r.versions[1] is None for r in tape.records)
    assert tape.records[2].versions == (x.version, None, w.version)
    tape.backward(grads={z: gk.ones(8, device=device)})
    x0 = x.numpy().astype(np.float64)
    y0 = x0 + 0.5 * x0 ** 2
    dz_dy = 1.0 + 2 * 0.25 * y0
    np.testing.assert_allclose(x.grad.numpy(), dz_dy * (1.0 + 2 * 0.5 * x0), rtol=1e-5)


def test_view_written_between_recorded_launches_is_caught(device, rng):
    """A NumPy view handed out after the first record and written through before backward: the adjoint
    of the first launch would read the new values, so backward raises (host-memory devices, where views
    are zero-copy)."""
    x, y = _arrays(device, rng)
    y2 = gk.zeros(8, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(_square, 8, inputs=[x], outputs=[y], device=device)
        view = x.numpy()
        view[:] = 3.0
        gk.launch(_square, 8, inputs=[x], outputs=[y2], device=device)
    if x._host is None:                       # a copy, not a view: nothing written into x
        tape.backward(grads={y: gk.ones(8, device=device)})
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * x.numpy(), rtol=1e-6)
        return
    with pytest.raises(gk.GradientRuleError):
        tape.backward(grads={y: gk.ones(8, device=device)})


def test_array_first_named_by_record_func_is_held(device, rng):
    """An array the tape first saw through record_func, then a launch: a view written afterwards is caught
    (the launch marks it recorded, so handing out the view takes a checksum)."""
    x, y = _arrays(device, rng)
    with gk.Tape() as tape:
        tape.record_func(lambda: None, [x])
        gk.launch(_square, 8, inputs=[x], outputs=[y], device=device)
        gk.launch(_square, 8, inputs=[x], outputs=[y], device=device)
    if x._host is None:
        return
    x.numpy()[:] = 2.0
    with pytest.raises(gk.GradientRuleError):
        tape.backward(grads={y: gk.ones(8, device=device)})


@gk.kernel
def _row_step(x: gk.array(dtype=float, ndim=2), t: int, dt: float):
    i = gk.tid()
    v = x[t, i]
    x[t + 1, i] = v + dt * v * v


def test_time_stepped_gradient_matches_float64(device, rng):
    """DiffTaichi's layout: one trajectory array, step t reads row t and writes row t + 1, every launch
    after the first on the short path (scalar arguments too): d(sum x_T)/d x_0 against the float64
    recurrence; a write the tape did not see into a row an adjoint reads (row 1) is still caught."""
    n, steps, dt = 4, 200, 0.01
    x0 = rng.uniform(0.1, 0.5, n)
    start = np.zeros((steps + 1, n), np.float32)
    start[0] = x0
    x = gk.array(start, device=device, requires_grad=True)
    with gk.Tape() as tape:
        for t in range(steps):
            gk.launch(_row_step, n, inputs=[x, t, dt], device=device)
    assert [r.versions[0] for r in tape.records] == list(range(x.version - steps + 1, x.version + 1))
    seed = np.zeros((steps + 1, n), np.float32)
    seed[-1] = 1.0
    tape.backward(grads={x: gk.array(seed, device=device)})
    v, d = x0.copy(), np.ones(n)
    for _ in range(steps):
        d *= 1.0 + 2 * dt * v
        v = v + dt * v * v
    np.testing.assert_allclose(x.numpy()[-1], v, rtol=1e-4)
    np.testing.assert_allclose(x.grad.numpy()[0], d, rtol=1e-4)
    gk.launch(_row_step, n, inputs=[x, 0, dt], device=device, record_tape=False)   # row 1, untaped
    with pytest.raises(gk.GradientRuleError):
        tape.backward(grads={x: gk.array(seed, device=device)})


def test_an_output_with_a_view_out_records_like_any_other(device, rng):
    """An output printed once (a NumPy view out) records the same versions, and the inputs' checks still
    fire: a view of the input written afterwards is caught."""
    x, y = _arrays(device, rng)
    print(y.numpy())
    with gk.Tape() as tape:
        seen = []
        for _ in range(3):
            gk.launch(_square, 8, inputs=[x], outputs=[y], device=device)
            seen.append((x.version, y.version))
    assert [r.versions for r in tape.records] == seen
    assert all(not r.crcs for r in tape.records)
    tape.backward(grads={y: gk.ones(8, device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * x.numpy().astype(np.float64), rtol=1e-6)
    if x._host is None:
        return
    x.numpy()[:] = 0.5
    with pytest.raises(gk.GradientRuleError):
        tape.backward(grads={y: gk.ones(8, device=device)})
