"""Debugger test script: a few gradient-descent steps of a linear model in which the weights `w` were
created without requires_grad (their gradient is cut off) and a feature scaled by 1e-12 (its gradient
vanishes). Scopes, several tapes and a loss history, no NaN."""

import sys

import numpy as np

import gradkit as gk


@gk.kernel
def damp(f: gk.array(dtype=float), s: float, g: gk.array(dtype=float)):
    i = gk.tid()
    g[i] = s * f[i]


@gk.kernel
def predict(x: gk.array(dtype=float), g: gk.array(dtype=float), w: gk.array(dtype=float),
            b: gk.array(dtype=float), pred: gk.array(dtype=float)):
    i = gk.tid()
    pred[i] = w[i] * gk.sin(x[i]) + g[i] + b[0]


@gk.kernel
def squared_error(pred: gk.array(dtype=float), target: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    d = pred[i] - target[i]
    gk.atomic_add(loss, 0, d * d)


@gk.kernel
def sgd_step(b: gk.array(dtype=float), db: gk.array(dtype=float), lr: float):
    i = gk.tid()
    b[i] = b[i] - lr * db[i]


def main(steps: int = 3, n: int = 16) -> None:
    rng = np.random.default_rng(0)
    x = gk.array(rng.uniform(-1, 1, n).astype(np.float32), requires_grad=True, label="x")
    f = gk.array(rng.uniform(0, 1, n).astype(np.float32), requires_grad=True, label="feature")
    w = gk.array(np.full(n, 0.7, dtype=np.float32), label="w")          # forgot requires_grad=True
    b = gk.zeros(1, requires_grad=True, label="b")
    target = gk.array(rng.uniform(0, 2, n).astype(np.float32), label="target")
    for step in range(steps):
        g = gk.zeros(n, requires_grad=True, label="g")
        pred = gk.zeros(n, requires_grad=True, label="pred")
        loss = gk.zeros(1, requires_grad=True, label="loss")
        tape = gk.Tape(params=[x, f, w, b])                           # what this loop trains
        with tape:
            with tape.scope("model"):
                gk.launch(damp, n, inputs=[f, 1e-12], outputs=[g])
                gk.launch(predict, n, inputs=[x, g, w, b], outputs=[pred])
            with tape.scope("loss"):
                gk.launch(squared_error, n, inputs=[pred, target], outputs=[loss])
        tape.backward(loss=loss)
        gk.launch(sgd_step, 1, inputs=[b, b.grad, 0.01], outputs=[])
        print(f"step {step}: loss {loss.numpy()[0]:.4f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
