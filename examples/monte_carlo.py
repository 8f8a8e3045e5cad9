"""Monte Carlo with gradients: the Gaussian-smoothed sine, E[sin(x + σε)] with ε ~ N(0, 1), and its
derivative, from random draws inside a kernel.

Each thread takes its own random stream (`gk.rand_init(seed, tid)`), draws `samples` normal numbers with
`gk.randn` and averages sin(x + σε). The draws carry no gradient, so the gradient a gk.Tape gives is the
Monte Carlo estimate of E[cos(x + σε)] — both compared with the closed forms sin(x)·exp(-σ²/2) and
cos(x)·exp(-σ²/2) within their statistical error. The same seed gives the same numbers on every device.

Run: python examples/monte_carlo.py [--device cpu|opencl|...] [--samples N]
Debug: gradkit debug examples/monte_carlo.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.kernel
def smoothed_sine(x: gk.array(dtype=gk.float64), sigma: gk.float64, samples: int, seed: int,
                  y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    state = gk.rand_init(seed, i)
    acc = gk.float64(0.0)
    for k in range(samples):
        acc += gk.sin(x[i] + sigma * gk.float64(gk.randn(state)))
    y[i] = acc / gk.float64(samples)


def run(device: str = "cpu", n: int = 16, samples: int = 4000, sigma: float = 0.7, seed: int = 2026) -> dict:
    x_np = np.linspace(-3, 3, n)
    x = gk.array(x_np, dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(smoothed_sine, n, inputs=[x, sigma, samples, seed, y], device=device)
    tape.backward(grads={y: gk.array(np.ones(n), device=device)})
    damp = np.exp(-sigma ** 2 / 2)
    # standard errors of the two sample means (variance of sin / cos of a normal variable, ≤ 1/2 + ...)
    se = np.sqrt(0.5 / samples)
    return {"x": x_np, "value": y.numpy().copy(), "grad": x.grad.numpy().copy(), "exact_value": np.sin(x_np) * damp,
            "exact_grad": np.cos(x_np) * damp, "stderr": se}


def render(out: dict, path: str) -> None:
    """The Monte Carlo estimates against the closed forms (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, a = plt.subplots(figsize=(6, 3.4))
    x = np.linspace(out["x"][0], out["x"][-1], 200)
    damp = out["exact_value"][0] / np.sin(out["x"][0])
    a.plot(x, np.sin(x) * damp, "C0-", lw=1, label="E[sin(x + σε)]")
    a.plot(x, np.cos(x) * damp, "C1-", lw=1, label="d/dx")
    a.errorbar(out["x"], out["value"], out["stderr"], fmt="C0o", ms=3, label="kernel")
    a.errorbar(out["x"], out["grad"], out["stderr"], fmt="C1s", ms=3, label="tape gradient")
    a.set(title="smoothed sine and its gradient", xlabel="x")
    a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--samples", type=int, default=4000)
    args = parser.parse_args(argv)
    out = run(args.device, samples=args.samples)
    if args.image:
        render(out, args.image)
    err_v = np.abs(out["value"] - out["exact_value"]).max()
    err_g = np.abs(out["grad"] - out["exact_grad"]).max()
    print(f"max error of the value {err_v:.4f} and of the gradient {err_g:.4f} "
          f"(standard error about {out['stderr']:.4f} per point)")
    return 0 if max(err_v, err_g) < 5 * out["stderr"] else 1


if __name__ == "__main__":
    sys.exit(main())
