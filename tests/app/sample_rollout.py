"""Debugger test script: a 111-launch tape that does not fold to a handful of nodes: 50 steps of a
relax -> clamp pair in scope "solve/step", every 5th step an extra `kick` (so the repeats break), then a
"loss" scope. For the graph's scaling features: folding, collapsing scopes, search, zoom, node facts."""

import numpy as np
import gradkit as gk

N = 16

@gk.kernel
def relax(u: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    left = u[gk.max(i - 1, 0)]
    right = u[gk.min(i + 1, 15)]
    out[i] = 0.5 * u[i] + 0.25 * (left + right)

@gk.kernel
def clamp_field(u: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.clamp(u[i], -2.0, 2.0)

@gk.kernel
def kick(u: gk.array(dtype=float), k: float, out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = u[i] + k * gk.sin(u[i])

@gk.kernel
def energy(u: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, u[i] * u[i])

rng = np.random.default_rng(0)
u = gk.array(rng.standard_normal(N).astype(np.float32), requires_grad=True, label="initial field")
loss = gk.zeros(1, requires_grad=True, label="loss")
tape = gk.Tape()
with tape:
    with tape.scope("solve"):
        for step in range(50):
            with tape.scope("step"):
                mid = gk.zeros(N, requires_grad=True, label=f"mid[{step}]")
                nxt = gk.zeros(N, requires_grad=True, label=f"u[{step + 1}]")
                gk.launch(relax, N, inputs=[u], outputs=[mid])
                gk.launch(clamp_field, N, inputs=[mid], outputs=[nxt])
                u = nxt
            if step % 5 == 4:
                kicked = gk.zeros(N, requires_grad=True, label=f"kicked[{step}]")
                gk.launch(kick, N, inputs=[u, 0.1], outputs=[kicked])
                u = kicked
    with tape.scope("loss"):
        gk.launch(energy, N, inputs=[u], outputs=[loss])
tape.backward(loss=loss)
