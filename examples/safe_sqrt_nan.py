"""Where a NaN gradient comes from, and how a custom gradient removes it.

The derivative of sqrt(x) is 0.5/sqrt(x): infinite at x = 0. Two small stories:

1. loss = sum(sqrt(x)) at x = [1, 2, 0]: the gradient is [0.5, 0.35355338, inf] with the built-in
   sqrt and [0.5, 0.35355338, 0] with `safe_sqrt`, a @gk.func whose @gk.func_grad guards x > 0
   (Warp's documented example).
2. The length of a 2-D vector, sqrt(px^2 + py^2), at the origin: the chain rule multiplies the
   infinite sqrt derivative by 2*px = 0, so the gradient is NaN with the built-in sqrt and 0 with
   `safe_sqrt`.

The safe versions run first. Under `gradkit debug examples/safe_sqrt_nan.py` NaN/Inf checks are on, so
the first non-finite gradient (story 2 with the built-in sqrt) stops the script and the debugger's
NaN/Inf view shows the backward launch, the array and the element where it appeared.
`--check-nan` turns the same check on when run directly (the script then ends with gk.NaNError).

Run: python examples/safe_sqrt_nan.py [--device cpu|opencl|...] [--check-nan]
Debug: gradkit debug examples/safe_sqrt_nan.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.func
def safe_sqrt(x: float) -> float:
    return gk.sqrt(x)


@gk.func_grad(safe_sqrt)
def adj_safe_sqrt(x: float, adj_ret: float):
    if x > 0.0:
        gk.adjoint[x] += adj_ret * 0.5 / gk.sqrt(x)


@gk.kernel
def sqrt_sum(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, gk.sqrt(x[i]))


@gk.kernel
def safe_sqrt_sum(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, safe_sqrt(x[i]))


@gk.kernel
def length(px: gk.array(dtype=float), py: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.sqrt(px[i] * px[i] + py[i] * py[i])


@gk.kernel
def safe_length(px: gk.array(dtype=float), py: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = safe_sqrt(px[i] * px[i] + py[i] * py[i])


@gk.kernel
def total(values: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, values[i])


def sqrt_gradient(kernel, xs) -> np.ndarray:
    """d sum(sqrt(x)) / dx through a tape."""
    x = gk.array(np.asarray(xs, np.float32), requires_grad=True, label="x")
    loss = gk.zeros(1, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, len(xs), inputs=[x], outputs=[loss])
    tape.backward(loss=loss)
    return x.grad.numpy()


def length_gradient(kernel, points) -> tuple[np.ndarray, np.ndarray]:
    """d sum(|p|) / dpx and / dpy through a tape of two launches."""
    points = np.asarray(points, np.float32)
    px = gk.array(points[:, 0], requires_grad=True, label="px")
    py = gk.array(points[:, 1], requires_grad=True, label="py")
    lengths = gk.zeros(len(points), requires_grad=True, label="lengths")
    loss = gk.zeros(1, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, len(points), inputs=[px, py], outputs=[lengths])
        gk.launch(total, len(points), inputs=[lengths], outputs=[loss])
    tape.backward(loss=loss)
    return px.grad.numpy(), py.grad.numpy()


XS = [1.0, 2.0, 0.0]
POINTS = [[3.0, 4.0], [0.0, 0.0], [-1.0, 1.0]]


def run(device: str | None = None) -> dict:
    """All four gradients (safe ones first); a gk.NaNError propagates when NaN checks are on."""
    with gk.ScopedDevice(device or gk.get_device()):
        out = {"safe_sqrt": sqrt_gradient(safe_sqrt_sum, XS), "safe_length": length_gradient(safe_length, POINTS)}
        out["length"] = length_gradient(length, POINTS)
        out["sqrt"] = sqrt_gradient(sqrt_sum, XS)
        return out


def render(out: dict, path: str) -> None:
    """The four gradients: inf and NaN with the built-ins, finite with the custom gradient (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, keys, labels in ((a, ("sqrt", "safe_sqrt"), [f"x={v:g}" for v in XS]),
                             (b, ("length", "safe_length"), [f"{p}" for p in POINTS])):
        for k, key in enumerate(keys):
            g = np.asarray(out[key], np.float64)
            g = g if g.ndim == 1 else g[0]
            finite = np.where(np.isfinite(g), g, 0.0)
            bars = ax.bar(np.arange(len(g)) + 0.4 * k, finite, 0.4, label=key)
            for bar, v in zip(bars, g):
                if not np.isfinite(v):
                    ax.annotate(str(v), (bar.get_x() + 0.2, 0), ha="center", va="bottom", color="red")
        ax.set_xticks(np.arange(len(labels)) + 0.2, labels, fontsize=7)
        ax.legend(fontsize=7)
    a.set(title="d sum(sqrt(x)) / dx")
    b.set(title="d length / d px")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--check-nan", action="store_true", help="raise gk.NaNError at the first NaN/Inf")
    args = parser.parse_args(argv)
    if args.check_nan:
        gk.config.check_nan = True
    with np.printoptions(precision=8):
        out = run(args.device)
    if args.image:
        render(out, args.image)
        print(f"d sum(sqrt(x))/dx at x = {XS}")
        print(f"  built-in sqrt : {out['sqrt']}")
        print(f"  safe_sqrt     : {out['safe_sqrt']}")
        print(f"d sum(|p|)/dp at p = {POINTS}")
        print(f"  built-in sqrt : px {out['length'][0]}, py {out['length'][1]}")
        print(f"  safe_sqrt     : px {out['safe_length'][0]}, py {out['safe_length'][1]}")
    print("the built-in sqrt gives inf and NaN at 0; safe_sqrt's custom gradient gives 0 there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
