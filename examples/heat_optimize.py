"""Heat equation: recover the initial temperature field from the field observed later.

A 2-D grid diffuses heat for `steps` explicit steps (u <- u + alpha * laplacian(u) inside, the
boundary held). The target is what a hidden initial field (two warm blobs) becomes after those
steps. Starting from a flat field, gradient descent on loss = sum((u_T - target)^2) with gradients
from a gk.Tape moves the initial field towards one that diffuses into the target; the loss falls by
orders of magnitude over the iterations.

Every step writes a new array (u[0], u[1], ...): overwriting one array in place would destroy values
the backward pass needs (`gk.Tape(check=True)` reports that as a GradientRuleError).

Run: python examples/heat_optimize.py [--device cpu|opencl|...] [--iters N]
Debug: gradkit debug examples/heat_optimize.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.kernel
def heat_step(u: gk.array(dtype=float, ndim=2), alpha: float, out: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    if i > 0 and j > 0 and i < u.shape[0] - 1 and j < u.shape[1] - 1:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + alpha * lap
    else:
        out[i, j] = u[i, j]


@gk.kernel
def squared_misfit(u: gk.array(dtype=float, ndim=2), target: gk.array(dtype=float, ndim=2),
                   loss: gk.array(dtype=float)):
    i, j = gk.tid()
    d = u[i, j] - target[i, j]
    gk.atomic_add(loss, 0, d * d)


@gk.kernel
def descend(u: gk.array(dtype=float, ndim=2), grad: gk.array(dtype=float, ndim=2), lr: float):
    i, j = gk.tid()
    u[i, j] = u[i, j] - lr * grad[i, j]


def diffuse_reference(u0: np.ndarray, alpha: float, steps: int) -> np.ndarray:
    """The same explicit scheme in float64 NumPy."""
    u = u0.astype(np.float64)
    for _ in range(steps):
        nxt = u.copy()
        nxt[1:-1, 1:-1] += alpha * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        u = nxt
    return u


def loss_reference(u0: np.ndarray, target: np.ndarray, alpha: float, steps: int) -> float:
    return float(((diffuse_reference(u0, alpha, steps) - target) ** 2).sum())


def hidden_field(n: int) -> np.ndarray:
    """The initial field the optimisation should find: two warm blobs on a cold plate."""
    y, x = np.mgrid[0:n, 0:n] / (n - 1)
    blob = lambda cx, cy, w: np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * w * w))
    return (blob(0.35, 0.4, 0.08) + 0.6 * blob(0.7, 0.65, 0.1)).astype(np.float32)


def run(device: str | None = None, n: int = 48, steps: int = 16, iters: int = 40, alpha: float = 0.2,
        lr: float = 0.4, verbose: bool = False) -> dict:
    """Optimise the initial field; returns the loss per iteration, the fields and the last tape."""
    with gk.ScopedDevice(device or gk.get_device()):
        target = gk.array(diffuse_reference(hidden_field(n), alpha, steps).astype(np.float32), label="target")
        u0 = gk.zeros((n, n), requires_grad=True, label="initial field")
        states = [u0] + [gk.zeros((n, n), requires_grad=True, label=f"u[{t + 1}]") for t in range(steps)]
        loss = gk.zeros(1, requires_grad=True, label="loss")
        tape = gk.Tape()
        losses = []
        for it in range(iters):
            tape.reset()                      # zeroes the gradients the tape touched, drops the record
            loss.zero_()
            with tape:
                with tape.scope("diffuse"):
                    for t in range(steps):
                        gk.launch(heat_step, (n, n), inputs=[states[t], alpha], outputs=[states[t + 1]])
                with tape.scope("loss"):
                    gk.launch(squared_misfit, (n, n), inputs=[states[-1], target], outputs=[loss])
            tape.backward(loss=loss)
            losses.append(float(loss.numpy()[0]))
            if verbose and (it % 10 == 0 or it == iters - 1):
                print(f"iteration {it:3d}: loss {losses[-1]:.6f}")
            if it < iters - 1:
                gk.launch(descend, (n, n), inputs=[u0, u0.grad, lr])
        return {"losses": losses, "initial": u0.numpy(), "grad": u0.grad.numpy(), "target": target.numpy(),
                "hidden": hidden_field(n), "alpha": alpha, "steps": steps, "tape": tape}


def render(out: dict, path: str) -> None:
    """The hidden initial field, the recovered one, the target and the loss (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 4, figsize=(11, 2.9))
    for a, (field, title) in zip(axes, ((out["hidden"], "hidden initial field"), (out["initial"], "recovered"),
                                        (out["target"], "target (16 steps later)"))):
        a.imshow(field, cmap="inferno")
        a.set(title=title, xticks=[], yticks=[])
    axes[3].semilogy(out["losses"])
    axes[3].set(title="loss", xlabel="iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--size", type=int, default=48)
    args = parser.parse_args(argv)
    out = run(args.device, n=args.size, iters=args.iters, verbose=True)
    if args.image:
        render(out, args.image)
    first, last = out["losses"][0], out["losses"][-1]
    final = loss_reference(out["initial"], out["target"], out["alpha"], out["steps"])
    print(f"loss {first:.5f} -> {last:.6f} over {len(out['losses'])} iterations "
          f"(float64 reference of the last field: {final:.6f})")
    ok = last < 0.05 * first
    print("the recovered field diffuses into the target" if ok else "the loss did not fall enough")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
