"""Quick start: a kernel, its gradient through a Tape, and a look at the generated IR.

Run: python examples/quickstart.py
"""

import argparse

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


def render(x: np.ndarray, y: np.ndarray, grad: np.ndarray, path: str) -> None:
    """y = 2 sin x and the tape's gradient of sum(y²) against the analytic one (matplotlib, headless: the docs
    gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, a = plt.subplots(figsize=(6, 3.4))
    xs = np.linspace(0.0, 1.0, 200)
    a.plot(xs, 2 * np.sin(xs), "C0-", lw=1, label="y = 2 sin x")
    a.plot(xs, 8 * np.sin(xs) * np.cos(xs), "C1-", lw=1, label="8 sin x cos x (analytic)")
    a.plot(x, y, "C0o", ms=4, label="kernel")
    a.plot(x, grad, "C1s", ms=4, label="tape gradient")
    a.set(title="d sum(y²)/dx through a gk.Tape", xlabel="x")
    a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    args = parser.parse_args(argv)
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
    if args.image:
        render(x.numpy(), y.numpy(), x.grad.numpy(), args.image)
    print("loss      ", loss.numpy()[0])
    print("dloss/dx  ", x.grad.numpy())
    print("analytic  ", expected.astype(np.float32))
    print("\ncore IR of scale_sin:\n" + scale_sin.ir())
    print("adjoint IR:\n" + scale_sin.ir(adjoint=True))


if __name__ == "__main__":
    main()
