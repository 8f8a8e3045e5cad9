"""Whole programs written the way Warp's and Taichi's documentation and examples write them — time-indexed
trajectories in one array, manual checkpointing with `tape.backward()` from seeded gradients, copies on
the tape — each checked against a float64 NumPy run of the same program and central differences, on
every device."""

import numpy as np

import gradkit as gk

STEPS, N = 8, 3
DT, K, REST = 0.05, 40.0, 0.6


@gk.kernel
def spring_step(x: gk.array(dtype=gk.vec2d, ndim=2), v: gk.array(dtype=gk.vec2d, ndim=2),
                k: gk.array(dtype=gk.float64), t: int):
    """DiffTaichi's mass-spring style: state for every step in one array, row t from row t - 1."""
    i = gk.tid()
    f = gk.vec2d(0.0, -9.8)
    for j in range(x.shape[1]):
        if j != i:
            d = x[t - 1, i] - x[t - 1, j]
            r = gk.length(d)
            f = f - k[0] * (r - REST) * d / r
    v[t, i] = v[t - 1, i] + DT * f
    x[t, i] = x[t - 1, i] + DT * v[t, i]


@gk.kernel
def distance_to_target(x: gk.array(dtype=gk.vec2d, ndim=2), t: int, target: gk.vec2d,
                       loss: gk.array(dtype=gk.float64)):
    d = x[t, 0] - target
    loss[0] = gk.dot(d, d)


def _spring_reference(x0, v0, k):
    x, v = x0.copy(), v0.copy()
    for _ in range(STEPS):
        f = np.tile([0.0, -9.8], (N, 1))
        for i in range(N):
            for j in range(N):
                if j != i:
                    d = x[i] - x[j]
                    r = np.linalg.norm(d)
                    f[i] -= k * (r - REST) * d / r
        v = v + DT * f
        x = x + DT * v
    return float(np.sum((x[0] - np.array([0.3, 0.2])) ** 2))


def test_time_indexed_mass_spring(device, rng):
    x0 = np.array([[0.0, 0.0], [0.7, 0.1], [0.2, 0.6]]) + rng.uniform(-0.05, 0.05, (N, 2))
    v0 = rng.uniform(-0.5, 0.5, (N, 2))
    k0 = 40.0 + rng.uniform(-5, 5)
    x = gk.zeros((STEPS + 1, N), dtype=gk.vec2d, device=device, requires_grad=True)
    v = gk.zeros((STEPS + 1, N), dtype=gk.vec2d, device=device, requires_grad=True)
    x.assign(np.concatenate([x0[None], np.zeros((STEPS, N, 2))]))
    v.assign(np.concatenate([v0[None], np.zeros((STEPS, N, 2))]))
    k = gk.array(np.array([k0]), dtype=gk.float64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=loss):
        for t in range(1, STEPS + 1):
            gk.launch(spring_step, N, inputs=[x, v, k, t], device=device)
        gk.launch(distance_to_target, 1, inputs=[x, STEPS, gk.vec2d(0.3, 0.2), loss], device=device)
    np.testing.assert_allclose(loss.numpy(), [_spring_reference(x0, v0, k0)], rtol=1e-10)
    eps = 1e-6
    fd_k = (_spring_reference(x0, v0, k0 + eps) - _spring_reference(x0, v0, k0 - eps)) / (2 * eps)
    np.testing.assert_allclose(k.grad.numpy(), [fd_k], rtol=1e-6)
    fd_v = np.zeros((N, 2))
    for idx in np.ndindex(N, 2):
        e = np.zeros((N, 2))
        e[idx] = eps
        fd_v[idx] = (_spring_reference(x0, v0 + e, k0) - _spring_reference(x0, v0 - e, k0)) / (2 * eps)
    np.testing.assert_allclose(v.grad.numpy()[0], fd_v, rtol=1e-6, atol=1e-9)


@gk.kernel
def advance(a: gk.array(dtype=gk.float64), b: gk.array(dtype=gk.float64), c: gk.float64):
    i = gk.tid()
    b[i] = a[i] + 0.1 * gk.sin(a[i] * c)


@gk.kernel
def sum_squares(a: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, a[i] * a[i])


def _advance_ref(a, c, steps):
    for _ in range(steps):
        a = a + 0.1 * np.sin(a * c)
    return float(np.sum(a * a))


def test_manual_checkpointing_as_warp_examples_do(device, rng):
    """Warp's checkpointed optimisation: keep only segment-boundary states; for the gradient, walk the
    segments backwards, re-run each on a fresh tape and call `tape.backward()` from the gradient the next
    segment left in its output state's `.grad`."""
    n, segments, per = 5, 3, 4
    a0 = rng.uniform(-1, 1, n)
    states = [gk.array(a0, dtype=gk.float64, device=device, requires_grad=True)]
    states += [gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True) for _ in range(segments)]
    scratch = [gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True) for _ in range(per - 1)]
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)

    def segment(s):
        chain = [states[s], *scratch, states[s + 1]]
        for a, b in zip(chain, chain[1:]):
            gk.launch(advance, n, inputs=[a, b, 1.3], device=device)

    for s in range(segments):                 # forward: no tape, boundaries only
        segment(s)
    last = gk.Tape()
    with last:
        gk.launch(sum_squares, n, inputs=[states[-1], loss], device=device)
    last.backward(loss=loss)
    for s in reversed(range(segments)):
        for a in scratch + [states[s]]:
            a.grad.zero_()
        tape = gk.Tape()
        with tape:
            segment(s)
        tape.backward()                       # seeds: states[s + 1].grad from the later segment
    ref = _advance_ref(a0, 1.3, segments * per)
    np.testing.assert_allclose(loss.numpy(), [ref], rtol=1e-12)
    eps = 1e-6
    fd = [(_advance_ref(a0 + eps * e, 1.3, segments * per) - _advance_ref(a0 - eps * e, 1.3, segments * per))
          / (2 * eps) for e in np.eye(n)]
    np.testing.assert_allclose(states[0].grad.numpy(), fd, rtol=1e-7)


@gk.kernel
def double(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * 2.0


def test_copies_on_the_tape_as_warp_documents(device, rng):
    """Warp's "Copying is differentiable": double → gk.copy → double → clone (copy()) → assign → sum."""
    x_np = rng.uniform(-1, 1, 3)
    x = gk.array(x_np, dtype=gk.float64, device=device, requires_grad=True)
    y, z, w, u = (gk.zeros(3, dtype=gk.float64, device=device, requires_grad=True) for _ in range(4))
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=loss):
        gk.launch(double, 3, inputs=[x, y], device=device)
        gk.copy(z, y)
        gk.launch(double, 3, inputs=[z, w], device=device)
        clone = w.copy()
        u.assign(clone)
        gk.launch(sum_squares, 3, inputs=[u, loss], device=device)
    np.testing.assert_allclose(loss.numpy(), [np.sum((4 * x_np) ** 2)], rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 32 * x_np, rtol=1e-12)
