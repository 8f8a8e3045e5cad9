"""Quick start: a kernel, its gradient through a Tape, and a look at the generated IR.

Run: python examples/quickstart.py
"""

import numpy as np

import gradkit as gk


@gk.kernel
def scale_sin(x: gk.array(dtype=float), a: float, y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a * gk.sin(x[i])


@gk.kernel
def sum_squares(y: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, y[i] * y[i])


def main() -> None:
    n = 8
    x = gk.array(np.linspace(0.0, 1.0, n, dtype=np.float32), requires_grad=True)
    y = gk.zeros(n, requires_grad=True)
    loss = gk.zeros(1, requires_grad=True)

    tape = gk.Tape()
    with tape:
        gk.launch(scale_sin, n, inputs=[x, 2.0], outputs=[y])
        gk.launch(sum_squares, n, inputs=[y], outputs=[loss])
    tape.backward(loss=loss)

    xs = x.numpy().astype(np.float64)
    expected = 8.0 * np.sin(xs) * np.cos(xs)          # d/dx sum (2 sin x)^2
    print("loss      ", loss.numpy()[0])
    print("dloss/dx  ", x.grad.numpy())
    print("analytic  ", expected.astype(np.float32))
    print("\ncore IR of scale_sin:\n" + scale_sin.ir())
    print("adjoint IR:\n" + scale_sin.ir(adjoint=True))


if __name__ == "__main__":
    main()
