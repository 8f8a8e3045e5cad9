"""A whole tape through the Warp rules added for #40: a time-stepping loop whose force kernel reads a local
first assigned inside a loop after the loop (loop_locals="last") and calls a @wp.func typed by its first
return from inside a branch, writing one force buffer reused every step, then an integrate kernel reading it.
The gradient of the final state's loss with respect to the initial positions matches central differences
in float64 on every device."""

import numpy as np

import gradkit.warp as wp


@wp.func
def spring(d: wp.float64, k: int):
    if d > wp.float64(1.0):
        return wp.float64(0.5) * d * d
    for j in range(k):
        if d < wp.float64(-1.0 - j):
            return -d
    return wp.sin(d)


@wp.kernel
def forces(x: wp.array(dtype=wp.float64), n: int, f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    acc = wp.float64(0.0)
    for j in range(n):
        d = x[(i + j + 1) % x.shape[0]] - x[i]
        acc = acc + spring(d, 2)
    f[i] = acc + wp.float64(0.1) * d          # `d`: the last trip's value


@wp.kernel
def integrate(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64), dt: wp.float64,
              out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    out[i] = x[i] + dt * f[i]


def _loss(x0, device, steps=4, tape=None):
    n = len(x0)
    xs = [wp.array(x0, dtype=wp.float64, device=device, requires_grad=True)]
    f = wp.zeros(n, dtype=wp.float64, device=device, requires_grad=True)      # reused every step
    for _ in range(steps):
        wp.launch(forces, n, inputs=[xs[-1], 3, f], device=device)
        xs.append(wp.zeros(n, dtype=wp.float64, device=device, requires_grad=True))
        wp.launch(integrate, n, inputs=[xs[-2], f, 0.05], outputs=[xs[-1]], device=device)
    return xs, float(np.sum(xs[-1].numpy() ** 2))


def test_tape_through_loop_locals_and_first_return_types(device):
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-2.0, 2.0, 12)
    tape = wp.Tape()
    with tape:
        xs, _ = _loss(x0, device)
    tape.backward(grads={xs[-1]: wp.array(2.0 * xs[-1].numpy(), dtype=wp.float64, device=device)})
    got = xs[0].grad.numpy()
    h, fd = 1e-6, np.zeros_like(x0)
    for k in range(len(x0)):
        e = np.zeros_like(x0)
        e[k] = h
        fd[k] = (_loss(x0 + e, device)[1] - _loss(x0 - e, device)[1]) / (2 * h)
    assert np.abs(fd).max() > 0.1
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)
