"""As-rigid-as-possible deformation by gradient descent, with the best-fitting rotations from
`gk.polar_decompose` inside the energy.

A small block of points (a 4x3x2 lattice, edges to lattice neighbours) is dragged by four handle points
whose targets are the rest positions rotated by 40 degrees and shifted. For each point i the energy fits
the rotation R_i that best maps its rest edges p_i - p_j onto its current edges x_i - x_j — the rotation
factor of the polar decomposition of S_i = Σ_j (x_i - x_j)(p_i - p_j)ᵀ — and charges what that rotation
cannot explain, Σ_j |(x_i - x_j) - R_i (p_i - p_j)|², plus a stiff spring pulling each handle to its
target. A gk.Tape differentiates the energy through the decomposition (its gradient checked against
central differences of a NumPy float64 reference) and gk.optim.Adam moves the points. Because the
handles ask for a rigid motion, the block ends up rotated and shifted as a whole: energy near zero, every
point at its rigidly moved position.

Run: python examples/decompositions.py [--device cpu|opencl|...] [--iters N]
Debug: gradkit debug examples/decompositions.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk

HANDLE_WEIGHT = 100.0


@gk.kernel
def arap_energy(x: gk.array(dtype=gk.vec3d), rest: gk.array(dtype=gk.vec3d), nbr: gk.array2d(dtype=gk.int32),
                handle: gk.array(dtype=gk.float64), target: gk.array(dtype=gk.vec3d),
                energy: gk.array(dtype=gk.float64)):
    i = gk.tid()
    S = gk.mat33d()
    for k in range(nbr.shape[1]):                 # covariance of current and rest edges
        j = nbr[i, k]
        if j >= 0:
            S += gk.outer(x[i] - x[j], rest[i] - rest[j])
    R, P = gk.polar_decompose(S)                  # R: the rotation closest to S
    e = gk.float64(0.0)
    for k in range(nbr.shape[1]):
        j = nbr[i, k]
        if j >= 0:
            d = (x[i] - x[j]) - R @ (rest[i] - rest[j])
            e += gk.dot(d, d)
    off = x[i] - target[i]
    gk.atomic_add(energy, 0, e + HANDLE_WEIGHT * handle[i] * gk.dot(off, off))


def lattice(nx: int = 4, ny: int = 3, nz: int = 2):
    """Rest positions and a neighbour table (-1 pads) of an nx x ny x nz lattice with spacing 1."""
    idx = {(a, b, c): n for n, (a, b, c) in enumerate(np.ndindex(nx, ny, nz))}
    rest = np.array(list(idx), dtype=np.float64)
    nbr = -np.ones((len(idx), 6), dtype=np.int32)
    for (a, b, c), n in idx.items():
        k = 0
        for da, db, dc in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)):
            m = idx.get((a + da, b + db, c + dc))
            if m is not None:
                nbr[n, k] = m
                k += 1
    return rest, nbr, idx


def rigid_targets(rest: np.ndarray, angle: float = np.radians(40.0)):
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    R = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K        # Rodrigues
    return rest @ R.T + np.array([0.5, -0.2, 0.3])


def energy_reference(x, rest, nbr, handle, target) -> float:
    """The same energy in NumPy float64, the rotation from np.linalg.svd (det fixed to +1)."""
    total = 0.0
    for i in range(len(x)):
        js = [j for j in nbr[i] if j >= 0]
        S = sum(np.outer(x[i] - x[j], rest[i] - rest[j]) for j in js)
        u, _, vt = np.linalg.svd(S)
        if np.linalg.det(u @ vt) < 0:
            u[:, -1] *= -1
        R = u @ vt
        total += sum(np.sum((x[i] - x[j] - R @ (rest[i] - rest[j])) ** 2) for j in js)
        total += HANDLE_WEIGHT * handle[i] * np.sum((x[i] - target[i]) ** 2)
    return total


def run(device: str = "cpu", iters: int = 400, lr: float = 0.03) -> dict:
    rest_np, nbr_np, idx = lattice()
    goal = rigid_targets(rest_np)
    handle_np = np.zeros(len(rest_np))
    for corner in ((0, 0, 0), (3, 0, 0), (0, 2, 0), (0, 0, 1)):     # four points not in one plane
        handle_np[idx[corner]] = 1.0
    rest = gk.array(rest_np, dtype=gk.vec3d, device=device)
    nbr = gk.array(nbr_np, dtype=gk.int32, device=device)
    handle = gk.array(handle_np, dtype=gk.float64, device=device)
    target = gk.array(goal * handle_np[:, None], dtype=gk.vec3d, device=device)
    x = gk.array(rest_np, dtype=gk.vec3d, device=device, requires_grad=True)
    energy = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    opt = gk.optim.Adam([x], lr=lr)
    energies, first_grad = [], None
    for it in range(iters):
        tape = gk.Tape()
        with tape:
            energy.zero_()
            gk.launch(arap_energy, len(rest_np), inputs=[x, rest, nbr, handle, target, energy], device=device)
        tape.backward(loss=energy)
        energies.append(float(energy.numpy()[0]))
        if it == 0:
            first_grad = x.grad.numpy().copy()
        opt.step([x.grad])
        tape.zero()
    return {"energies": energies, "first_grad": first_grad, "x": x.numpy().copy(), "goal": goal,
            "rest": rest_np, "nbr": nbr_np, "handle": handle_np, "target": goal * handle_np[:, None]}


def render(out: dict, path: str) -> None:
    """The block at rest, moved by Adam, and its energy per step (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(8, 3.4))
    a = fig.add_subplot(1, 2, 1, projection="3d")
    for pts, style, label in ((out["rest"], "o", "rest"), (out["goal"], "x", "rigidly moved"), (out["x"], ".", "found")):
        a.plot(pts[:, 0], pts[:, 1], pts[:, 2], style, ms=4, label=label)
    a.set_title("ARAP block")
    a.legend(fontsize=7)
    b = fig.add_subplot(1, 2, 2)
    b.semilogy(out["energies"])
    b.set(title="energy", xlabel="Adam step")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iters", type=int, default=400)
    args = parser.parse_args(argv)
    out = run(args.device, args.iters)
    if args.image:
        render(out, args.image)
    err = np.abs(out["x"] - out["goal"]).max()
    e0 = energy_reference(out["rest"], out["rest"], out["nbr"], out["handle"], out["target"])
    print(f"energy {out['energies'][0]:.4g} (NumPy: {e0:.4g}) -> {out['energies'][-1]:.3g} after "
          f"{args.iters} steps; farthest point from the rigidly moved block: {err:.2e}")
    return 0 if out["energies"][-1] < 1e-3 * out["energies"][0] and err < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
