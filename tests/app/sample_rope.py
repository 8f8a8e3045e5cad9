"""Debugger test script: a rope of particles stepped 20 times. Each step a wind kernel writes the force
buffer, then the spring kernel overwrites all of it (`f[i] = ...` where `+=` was meant) before the integrator
reads it: the wind gets no gradient. The debugger shows wind's gradient as zero with that hazard named
(both lines). A threshold read only through a comparison is the other hazard the tape names."""

import numpy as np

import gradkit as gk

F = gk.array(dtype=gk.float64)


@gk.kernel
def wind_force(wind: F, f: F):
    i = gk.tid()
    f[i] = wind[0] * gk.float64(0.5)


@gk.kernel
def spring_force(x: F, k: F, f: F):
    i = gk.tid()
    n = len(x)
    left = x[gk.max(i - 1, 0)]
    right = x[gk.min(i + 1, n - 1)]
    f[i] = k[0] * (left + right - gk.float64(2.0) * x[i])


@gk.kernel
def integrate(x: F, v: F, f: F, limit: F, dt: float, x_out: F, v_out: F):
    i = gk.tid()
    vi = v[i] + gk.float64(dt) * f[i]
    if x[i] > limit[0]:                 # particles past the limit stop
        vi = gk.float64(0.0)
    v_out[i] = vi
    x_out[i] = x[i] + gk.float64(dt) * vi


@gk.kernel
def total(x: F, loss: F):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


def main(n: int = 8, steps: int = 20) -> None:
    wind = gk.array(np.array([0.3]), dtype=gk.float64, requires_grad=True, label="wind")
    k = gk.array(np.array([2.0]), dtype=gk.float64, requires_grad=True, label="k")
    limit = gk.array(np.array([50.0]), dtype=gk.float64, requires_grad=True, label="limit")
    f = gk.zeros(n, dtype=gk.float64, requires_grad=True, label="f")
    xs = [gk.array(np.linspace(0.0, 1.0, n) ** 2, dtype=gk.float64, requires_grad=True, label="x0")]
    vs = [gk.zeros(n, dtype=gk.float64, requires_grad=True, label="v0")]
    loss = gk.zeros(1, dtype=gk.float64, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        for s in range(steps):
            xs.append(gk.zeros(n, dtype=gk.float64, requires_grad=True, label=f"x{s + 1}"))
            vs.append(gk.zeros(n, dtype=gk.float64, requires_grad=True, label=f"v{s + 1}"))
            gk.launch(wind_force, n, inputs=[wind], outputs=[f])
            gk.launch(spring_force, n, inputs=[xs[s], k], outputs=[f])
            gk.launch(integrate, n, inputs=[xs[s], vs[s], f, limit, 0.01], outputs=[xs[s + 1], vs[s + 1]])
        gk.launch(total, n, inputs=[xs[-1]], outputs=[loss])
    tape.backward(loss=loss)


if __name__ == "__main__":
    main()
