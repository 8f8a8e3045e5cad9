"""A training loop's tapes against central differences (float64, every device): each iteration records a
new tape over the same arrays — a force buffer overwritten at every time step, positions carried across
steps — so the second and later backward passes run the prepared adjoints kept from the first
(runtime/launch/adjoint_reuse.py) and the consuming adjoints of the reused buffer (ad/consume.py). Their
gradients must equal central differences of the whole program, iteration after iteration."""

import numpy as np

import gradkit as gk

STEPS, N, DT = 6, 5, 0.1


@gk.kernel
def spring_force(x: gk.array(dtype=gk.float64), k: gk.array(dtype=gk.float64), f: gk.array(dtype=gk.float64)):
    i = gk.tid()
    f[i] = -k[0] * gk.sin(x[i])                 # overwrites the shared force buffer every step


@gk.kernel
def integrate(x: gk.array(dtype=gk.float64), v: gk.array(dtype=gk.float64), f: gk.array(dtype=gk.float64),
              x_next: gk.array(dtype=gk.float64), v_next: gk.array(dtype=gk.float64)):
    i = gk.tid()
    v_next[i] = v[i] + DT * f[i]
    x_next[i] = x[i] + DT * v_next[i]


@gk.kernel
def energy(x: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


def _reference(x0: np.ndarray, v0: np.ndarray, k: float) -> float:
    x, v = x0.copy(), v0.copy()
    for _ in range(STEPS):
        f = -k * np.sin(x)
        v = v + DT * f
        x = x + DT * v
    return float(np.sum(x * x))


def test_every_iterations_gradient_matches_central_differences(device, rng):
    x0 = rng.uniform(-1, 1, N)
    v0 = rng.uniform(-1, 1, N)
    xs = [gk.array(x0, dtype=gk.float64, device=device, requires_grad=True)]
    xs += [gk.zeros(N, dtype=gk.float64, device=device, requires_grad=True) for _ in range(STEPS)]
    vs = [gk.array(v0, dtype=gk.float64, device=device, requires_grad=True)]
    vs += [gk.zeros(N, dtype=gk.float64, device=device, requires_grad=True) for _ in range(STEPS)]
    force = gk.zeros(N, dtype=gk.float64, device=device, requires_grad=True)        # reused every step
    k = gk.array(np.array([1.5]), dtype=gk.float64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    for iteration in range(3):
        kk = 1.5 + 0.25 * iteration                                  # the parameter changes between tapes
        k.assign(gk.array(np.array([kk]), dtype=gk.float64, device=device))
        loss.zero_()
        with gk.Tape() as tape:
            for t in range(STEPS):
                gk.launch(spring_force, N, inputs=[xs[t], k], outputs=[force], device=device)
                gk.launch(integrate, N, inputs=[xs[t], vs[t], force], outputs=[xs[t + 1], vs[t + 1]],
                          device=device)
            gk.launch(energy, N, inputs=[xs[STEPS]], outputs=[loss], device=device)
        tape.backward(loss=loss)
        assert abs(loss.numpy()[0] - _reference(x0, v0, kk)) < 1e-12
        eps = 1e-6
        want_k = (_reference(x0, v0, kk + eps) - _reference(x0, v0, kk - eps)) / (2 * eps)
        want_x = np.array([(_reference(x0 + eps * e, v0, kk) - _reference(x0 - eps * e, v0, kk)) / (2 * eps)
                           for e in np.eye(N)])
        want_v = np.array([(_reference(x0, v0 + eps * e, kk) - _reference(x0, v0 - eps * e, kk)) / (2 * eps)
                           for e in np.eye(N)])
        np.testing.assert_allclose(k.grad.numpy()[0], want_k, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(xs[0].grad.numpy(), want_x, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(vs[0].grad.numpy(), want_v, rtol=1e-6, atol=1e-9)
        tape.zero()
