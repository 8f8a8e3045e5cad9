"""Debugger test script: x -> y = 2x -> sqrt(y) -> sum. y[0] = 0, so the adjoint of sqrt writes inf into
y.grad and the NaN check stops backward there: the adjoint of `scale` never runs and x is "not reached"."""

import numpy as np
import gradkit as gk

@gk.kernel
def scale(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 2.0 * x[i]

@gk.kernel
def root(y: gk.array(dtype=float), r: gk.array(dtype=float)):
    i = gk.tid()
    r[i] = gk.sqrt(y[i])

@gk.kernel
def total(r: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, r[i])

x = gk.array(np.arange(4, dtype=np.float32), requires_grad=True, label="x")
y = gk.zeros(4, requires_grad=True, label="y")
r = gk.zeros(4, requires_grad=True, label="r")
loss = gk.zeros(1, requires_grad=True, label="loss")
tape = gk.Tape()
with tape:
    gk.launch(scale, 4, inputs=[x], outputs=[y])
    gk.launch(root, 4, inputs=[y], outputs=[r])
    gk.launch(total, 4, inputs=[r], outputs=[loss])
tape.backward(loss=loss)
