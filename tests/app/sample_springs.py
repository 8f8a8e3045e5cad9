"""Debugger test script for the acceptance case of issue 22: a training loop whose spring length
dist = sqrt(dot(d, d)) hits 0 in one step. Body 0 walks towards body 1 (at the origin) one unit per
iteration and lands on it at iteration 3: forward, sqrt(0) = 0 is fine; backward, d/dd sqrt(d.d) = d/dist
is 0/0 = NaN. The debugger must name sqrt, its line, the gk.launch call site and iteration 3."""

import numpy as np

import gradkit as gk


@gk.kernel
def spring_energy(p: gk.array(dtype=gk.vec3), rest: float, energy: gk.array(dtype=float)):
    d = p[0] - p[1]
    dist = gk.sqrt(gk.dot(d, d))
    gk.atomic_add(energy, 0, (dist - rest) * (dist - rest))


for it in range(6):
    p = gk.array(np.array([[3.0 - it, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32), dtype=gk.vec3,
                 requires_grad=True, label="p")
    energy = gk.zeros(1, requires_grad=True, label="energy")
    tape = gk.Tape()
    with tape:
        gk.launch(spring_energy, 1, inputs=[p, 0.5], outputs=[energy])
    tape.backward(loss=energy)
