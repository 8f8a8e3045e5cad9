"""A tape's first backward pass binds each step record of a time-stepped program from a sibling record of
the same arrays (runtime/launch/adjoint_reuse.py, `_sibling_binding`): only the scalars are bound afresh.
Gradients against a float64 NumPy backward pass, with two chains on different arrays interleaved (each
its own sibling) and a step scalar (`t`) that differs in every record; later tapes agree bit for bit."""

import numpy as np

import gradkit as gk
from gradkit.runtime.launch import adjoint_reuse


@gk.kernel
def step(x: gk.array(dtype=gk.float64, ndim=2), w: gk.array(dtype=gk.float64), t: int, s: gk.float64):
    i = gk.tid()
    x[t, i] = gk.sin(x[t - 1, i]) * w[i] + s * x[t - 1, i]


@gk.kernel
def total(x: gk.array(dtype=gk.float64, ndim=2), t: int, l: gk.array(dtype=gk.float64)):
    l[0] += x[t, gk.tid()] * x[t, gk.tid()]


def _reference(x0, w, s, steps):
    """(d loss / d x[0], d loss / d w) of loss = sum(x[steps-1]^2) in float64 NumPy."""
    xs = [x0]
    for _ in range(1, steps):
        xs.append(np.sin(xs[-1]) * w + s * xs[-1])
    g, gw = 2 * xs[-1], np.zeros_like(w)
    for t in range(steps - 1, 0, -1):
        gw += g * np.sin(xs[t - 1])
        g = g * (np.cos(xs[t - 1]) * w + s)
    return g, gw


def _tape(chains, w, l, steps):
    """One tape over interleaved chains [(x, s)], their losses summed into `l`."""
    l.zero_()
    w.grad.zero_()
    for x, _ in chains:
        x.grad.zero_()
    with gk.Tape() as tape:
        for t in range(1, steps):
            for x, s in chains:
                gk.launch(step, w.shape[0], inputs=[x, w, t, s])
        for x, _ in chains:
            gk.launch(total, w.shape[0], inputs=[x, steps - 1, l])
    tape.backward(loss=l)
    return w.grad.numpy().copy(), [x.grad.numpy().copy() for x, _ in chains]


def test_step_records_bound_from_siblings_give_the_reference_gradients(device, rng, monkeypatch):
    steps, n = 9, 7
    afresh = [0]
    real = adjoint_reuse._prepare_afresh

    def counting(*args, **kwargs):
        afresh[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(adjoint_reuse, "_prepare_afresh", counting)
    for kernel in (step, total):        # no recipes from other tests: the first tape binds everything
        kernel.__dict__.pop("_adjoint_recipes", None)
    x0a, x0b = rng.normal(size=n), rng.normal(size=n)
    wn = rng.uniform(0.5, 1.5, size=n)
    sa, sb = 0.5, -0.25
    xa = gk.array(np.vstack([x0a, np.zeros((steps - 1, n))]), dtype=gk.float64, device=device, requires_grad=True)
    xb = gk.array(np.vstack([x0b, np.zeros((steps - 1, n))]), dtype=gk.float64, device=device, requires_grad=True)
    w = gk.array(wn, dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    chains = [(xa, sa), (xb, sb)]
    gw, (gxa, gxb) = _tape(chains, w, l, steps)
    # one binding afresh per kernel and array set (2 chains x step, 2 x total), the other step records from them
    assert afresh[0] == 4
    ga, gwa = _reference(x0a, wn, sa, steps)
    gb, gwb = _reference(x0b, wn, sb, steps)
    np.testing.assert_allclose(gxa[0], ga, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gxb[0], gb, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw, gwa + gwb, rtol=1e-12, atol=1e-14)
    # the next tape revives the recipes (nothing bound) and gives the same bits
    gw2, (gxa2, gxb2) = _tape(chains, w, l, steps)
    assert afresh[0] == 4
    np.testing.assert_array_equal(gw2, gw)
    np.testing.assert_array_equal(gxa2, gxa)
    np.testing.assert_array_equal(gxb2, gxb)


def test_a_sibling_whose_gradient_changed_is_not_used(device, rng, monkeypatch):
    """A `.grad` replaced between two tapes' passes: the sibling of the earlier pass is not carried over,
    and a new gradient array gets the reference gradients."""
    steps, n = 6, 5
    x0, wn = rng.normal(size=n), rng.uniform(0.5, 1.5, size=n)
    x = gk.array(np.vstack([x0, np.zeros((steps - 1, n))]), dtype=gk.float64, device=device, requires_grad=True)
    w = gk.array(wn, dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    _tape([(x, 0.75)], w, l, steps)
    w.grad = gk.zeros(n, dtype=gk.float64, device=device)
    gw, (gx,) = _tape([(x, 0.75)], w, l, steps)
    g, gwr = _reference(x0, wn, 0.75, steps)
    np.testing.assert_allclose(gx[0], g, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw, gwr, rtol=1e-12, atol=1e-14)


@gk.kernel
def drift(p: gk.array(dtype=gk.vec3d, ndim=2), t: int, v: gk.vec3d, c: gk.array(dtype=gk.float64)):
    i = gk.tid()
    p[t, i] = p[t - 1, i] * c[i] + v * gk.float64(t)


@gk.kernel
def drift_loss(p: gk.array(dtype=gk.vec3d, ndim=2), t: int, l: gk.array(dtype=gk.float64)):
    i = gk.tid()
    q = p[t, i]
    l[0] += gk.dot(q, q)


def test_step_records_with_vector_scalars(device, rng):
    """A vector scalar parameter (split into components in the call's arguments) that differs per step."""
    steps, n = 7, 4
    p0, cn = rng.normal(size=(n, 3)), rng.uniform(0.5, 1.5, size=n)
    vs = rng.normal(size=(steps, 3))
    p = gk.array(np.concatenate([p0[None], np.zeros((steps - 1, n, 3))]), dtype=gk.vec3d, device=device,
                 requires_grad=True)
    c = gk.array(cn, dtype=gk.float64, device=device, requires_grad=True)
    l = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    grads = []
    for _ in range(2):
        for a in (p, c, l):
            a.grad.zero_()
        l.zero_()
        with gk.Tape() as tape:
            for t in range(1, steps):
                gk.launch(drift, n, inputs=[p, t, gk.vec3d(*vs[t]), c], device=device)
            gk.launch(drift_loss, n, inputs=[p, steps - 1, l], device=device)
        tape.backward(loss=l)
        grads.append((p.grad.numpy().copy(), c.grad.numpy().copy()))
    # NumPy float64: q_t = q_{t-1} * c + v_t * t, loss = sum |q_{T-1}|^2
    qs = [p0]
    for t in range(1, steps):
        qs.append(qs[-1] * cn[:, None] + vs[t] * t)
    g, gc = 2 * qs[-1], np.zeros(n)
    for t in range(steps - 1, 0, -1):
        gc += (g * qs[t - 1]).sum(axis=1)
        g = g * cn[:, None]
    np.testing.assert_allclose(grads[0][0][0], g, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grads[0][1], gc, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(grads[1][0], grads[0][0])
    np.testing.assert_array_equal(grads[1][1], grads[0][1])
