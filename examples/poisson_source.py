"""Poisson source inversion: find the heat source f whose steady temperature u (−Δu = f on the unit
square, u = 0 on the boundary) matches a target field, with gradients through a conjugate-gradient solve.

The 5-point Laplacian is a `gk.sparse` matrix; each iteration solves A u = f with `gk.linalg.cg` on a
gk.Tape, where the solve is one step: its backward pass solves the adjoint system A λ = ∂loss/∂u once
(the implicit-function-theorem gradient), instead of differentiating the CG iterations. Gradient descent
on f then drives loss = h² Σ (u − target)² down by orders of magnitude.

Run: python examples/poisson_source.py [--device cpu|opencl|...] [--iters N] [--size N]
Debug: gradkit debug examples/poisson_source.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.kernel
def misfit(u: gk.array(dtype=gk.float64), target: gk.array(dtype=gk.float64), h2: gk.float64,
           loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = u[i] - target[i]
    gk.atomic_add(loss, 0, h2 * d * d)


@gk.kernel
def descend(f: gk.array(dtype=gk.float64), grad: gk.array(dtype=gk.float64), lr: gk.float64):
    i = gk.tid()
    f[i] = f[i] - lr * grad[i]


def laplacian(n: int, device=None) -> "gk.sparse.BsrMatrix":
    """−Δ on an n x n grid of interior points of the unit square (h = 1 / (n + 1)), Dirichlet boundary."""
    h2 = 1.0 / (n + 1) ** 2
    idx = np.arange(n * n).reshape(n, n)
    rows, cols, vals = [idx.ravel()], [idx.ravel()], [np.full(n * n, 4.0 / h2)]
    for a, b in ((idx[1:, :], idx[:-1, :]), (idx[:, 1:], idx[:, :-1])):
        for r, c in ((a, b), (b, a)):
            rows.append(r.ravel())
            cols.append(c.ravel())
            vals.append(np.full(r.size, -1.0 / h2))
    return gk.sparse.bsr_from_triplets(n * n, n * n, np.concatenate(rows), np.concatenate(cols),
                                       np.concatenate(vals), device=device)


def hidden_source(n: int) -> np.ndarray:
    """The source the optimisation should recover (up to what the smoothing solve can see): two blobs."""
    y, x = np.mgrid[1:n + 1, 1:n + 1] / (n + 1)
    blob = lambda cx, cy, w: np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * w * w))
    return (100.0 * blob(0.3, 0.4, 0.1) - 60.0 * blob(0.7, 0.65, 0.12)).ravel()


def loss_reference(f: np.ndarray, target: np.ndarray, n: int) -> float:
    """The loss in float64 NumPy with a dense solve."""
    return float(((np.linalg.solve(laplacian(n, "cpu").to_dense(), f) - target) ** 2).sum() / (n + 1) ** 2)


def run(device: str | None = None, n: int = 16, iters: int = 6, lr: float | None = None, tol: float = 1e-10,
        verbose: bool = False) -> dict:
    """Gradient descent on the source; returns the losses, the source, its last gradient, the CG counts.
    `lr` defaults to 1.6 / the loss's largest curvature (2 h² / λ_min(A)², its smoothest mode)."""
    h = 1.0 / (n + 1)
    if lr is None:
        lam_min = 8.0 * np.sin(np.pi * h / 2) ** 2 / h ** 2
        lr = 1.6 * lam_min ** 2 / (2 * h * h)
    with gk.ScopedDevice(device or gk.get_device()):
        A = laplacian(n)
        h2 = 1.0 / (n + 1) ** 2
        target_u = gk.zeros(n * n, dtype=gk.float64, label="target")
        gk.linalg.cg(A, gk.array(hidden_source(n)), target_u, tol=tol)
        f = gk.zeros(n * n, dtype=gk.float64, requires_grad=True, label="source f")
        u = gk.zeros(n * n, dtype=gk.float64, requires_grad=True, label="temperature u")
        loss = gk.zeros(1, dtype=gk.float64, requires_grad=True, label="loss")
        tape = gk.Tape(params=[f])
        losses, counts = [], []
        for it in range(iters):
            tape.reset()
            loss.zero_()
            with tape:
                with tape.scope("solve"):
                    iterations, residual = gk.linalg.cg(A, f, u, tol=tol, M="diag")
                with tape.scope("loss"):
                    gk.launch(misfit, n * n, inputs=[u, target_u, h2], outputs=[loss])
            tape.backward(loss=loss)
            losses.append(float(loss.numpy()[0]))
            counts.append(iterations)
            if verbose:
                print(f"iteration {it}: loss {losses[-1]:.6g} (cg: {iterations} iterations, residual {residual:.2e})")
            if it < iters - 1:
                gk.launch(descend, n * n, inputs=[f, f.grad, lr])
        return {"losses": losses, "source": f.numpy().copy(), "grad": f.grad.numpy().copy(),
                "target": target_u.numpy().copy(), "cg_iterations": counts, "n": n, "tape": tape}


def render(out: dict, path: str) -> None:
    """The hidden source, the recovered one, the target temperature and the loss (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = out["n"]
    fig, axes = plt.subplots(1, 4, figsize=(11, 2.9))
    for a, (field, title) in zip(axes, ((hidden_source(n), "hidden source"), (out["source"], "recovered source"),
                                        (out["target"], "target temperature"))):
        a.imshow(np.asarray(field).reshape(n, n), cmap="viridis")
        a.set(title=title, xticks=[], yticks=[])
    axes[3].semilogy(out["losses"], "o-")
    axes[3].set(title="loss", xlabel="iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--iters", type=int, default=6)
    parser.add_argument("--size", type=int, default=16)
    args = parser.parse_args(argv)
    out = run(args.device, n=args.size, iters=args.iters, verbose=True)
    if args.image:
        render(out, args.image)
    first, last = out["losses"][0], out["losses"][-1]
    print(f"loss {first:.5g} -> {last:.5g} over {len(out['losses'])} iterations")
    ok = last < 0.1 * first
    print("the source found reproduces the target temperature" if ok else "the loss did not fall enough")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
