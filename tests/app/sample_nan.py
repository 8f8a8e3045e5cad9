"""Debugger test script: a tiny pipeline whose log() meets a negative value, so the forward pass of
`log_energy` writes a NaN (what `gradkit debug` should pin to the line `e[i] = gk.log(y[i])`)."""

import numpy as np

import gradkit as gk


@gk.kernel
def affine(x: gk.array(dtype=float), w: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = w[i] * x[i] - 0.5


@gk.kernel
def log_energy(y: gk.array(dtype=float), e: gk.array(dtype=float)):
    i = gk.tid()
    e[i] = gk.log(y[i])


@gk.kernel
def total(e: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, e[i])


def main(n: int = 16) -> None:
    x = gk.array(np.linspace(0.1, 2.0, n, dtype=np.float32), requires_grad=True, label="x")
    w = gk.array(np.full(n, 1.5, dtype=np.float32), requires_grad=True, label="w")
    y = gk.zeros(n, requires_grad=True, label="y")
    e = gk.zeros(n, requires_grad=True, label="e")
    loss = gk.zeros(1, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        gk.launch(affine, n, inputs=[x, w], outputs=[y])
        gk.launch(log_energy, n, inputs=[y], outputs=[e])
        gk.launch(total, n, inputs=[e], outputs=[loss])
    tape.backward(loss=loss)
    print("loss", loss.numpy()[0])


if __name__ == "__main__":
    main()
