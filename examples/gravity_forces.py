"""Gravity forces as the gradient of the potential energy.

N bodies attract each other with softened gravity. One kernel sums the potential energy
U = -1/2 sum_{i != j} m_i m_j / sqrt(|x_i - x_j|^2 + s^2); the tape differentiates it, and the
force on each body is F = -dU/dx. A second kernel computes the forces by hand from the closed form
F_i = sum_j m_i m_j (x_j - x_i) / (|x_i - x_j|^2 + s^2)^(3/2); the script checks that both agree
and compares them with a float64 NumPy reference.

Run: python examples/gravity_forces.py [--device cpu|opencl|...] [--bodies N]
Debug: gradkit debug examples/gravity_forces.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.kernel
def potential_energy(pos: gk.array(dtype=gk.vec3), mass: gk.array(dtype=float), n: int, softening: float,
                     energy: gk.array(dtype=float)):
    i = gk.tid()
    e = float(0.0)
    for j in range(n):
        if j != i:
            d = pos[j] - pos[i]
            e = e - mass[i] * mass[j] / gk.sqrt(gk.dot(d, d) + softening * softening)
    gk.atomic_add(energy, 0, 0.5 * e)


@gk.kernel
def gravity_force(pos: gk.array(dtype=gk.vec3), mass: gk.array(dtype=float), n: int, softening: float,
                  force: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    f = gk.vec3(0.0, 0.0, 0.0)
    for j in range(n):
        if j != i:
            d = pos[j] - pos[i]
            r2 = gk.dot(d, d) + softening * softening
            f = f + (mass[i] * mass[j] / (r2 * gk.sqrt(r2))) * d
    force[i] = f


def reference(pos: np.ndarray, mass: np.ndarray, softening: float) -> tuple[float, np.ndarray]:
    """Potential energy and forces in float64 NumPy (all pairs at once)."""
    pos, mass = pos.astype(np.float64), mass.astype(np.float64)
    d = pos[None, :, :] - pos[:, None, :]                      # d[i, j] = x_j - x_i
    r2 = (d * d).sum(-1) + softening * softening
    mm = mass[:, None] * mass[None, :]
    np.fill_diagonal(mm, 0.0)
    energy = -0.5 * (mm / np.sqrt(r2)).sum()
    force = ((mm / (r2 * np.sqrt(r2)))[:, :, None] * d).sum(1)
    return float(energy), force


def run(device: str | None = None, bodies: int = 256, softening: float = 0.1, seed: int = 0) -> dict:
    """Energy, autodiff forces (-dU/dx), hand-written forces and the float64 reference, as NumPy arrays."""
    rng = np.random.default_rng(seed)
    pos_np = rng.normal(size=(bodies, 3)).astype(np.float32)
    mass_np = rng.uniform(0.5, 1.5, bodies).astype(np.float32)
    with gk.ScopedDevice(device or gk.get_device()):
        pos = gk.array(pos_np, dtype=gk.vec3, requires_grad=True, label="positions")
        mass = gk.array(mass_np, label="masses")                 # constants: no gradient wanted
        energy = gk.zeros(1, requires_grad=True, label="energy")
        force = gk.zeros(bodies, dtype=gk.vec3, label="force (closed form)")

        tape = gk.Tape()
        with tape:
            with tape.scope("energy"):
                gk.launch(potential_energy, bodies, inputs=[pos, mass, bodies, softening], outputs=[energy])
            with tape.scope("forces by hand"):
                gk.launch(gravity_force, bodies, inputs=[pos, mass, bodies, softening], outputs=[force])
        tape.backward(loss=energy)

        ref_energy, ref_force = reference(pos_np, mass_np, softening)
        return {"energy": float(energy.numpy()[0]), "autodiff_force": -pos.grad.numpy(),
                "closed_form_force": force.numpy(), "positions": pos_np, "ref_energy": ref_energy, "ref_force": ref_force,
                "tape": tape}


def render(out: dict, path: str) -> None:
    """Bodies with their forces -dU/dx, and the autodiff forces against the closed form (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.4))
    pos, f = out["positions"], out["autodiff_force"]
    a.quiver(pos[:, 0], pos[:, 1], f[:, 0], f[:, 1], color="C0", width=0.004)
    a.set(title="bodies and -dU/dx (x, y)", aspect="equal")
    b.plot(out["closed_form_force"].ravel(), f.ravel(), ".", ms=3)
    lim = np.abs(f).max()
    b.plot([-lim, lim], [-lim, lim], "k-", lw=0.5)
    b.set(title="force components", xlabel="closed form", ylabel="autodiff")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--bodies", type=int, default=256)
    args = parser.parse_args(argv)
    out = run(args.device, args.bodies)
    if args.image:
        render(out, args.image)

    scale = np.abs(out["ref_force"]).max()
    err_ad = np.abs(out["autodiff_force"] - out["ref_force"]).max() / scale
    err_cf = np.abs(out["closed_form_force"] - out["ref_force"]).max() / scale
    print(f"{args.bodies} bodies on {args.device or gk.get_device()}")
    print(f"potential energy      {out['energy']:.6f}  (float64 reference {out['ref_energy']:.6f})")
    print(f"force = -dU/dx        max error vs reference {err_ad:.2e} (relative to the largest force)")
    print(f"force by hand         max error vs reference {err_cf:.2e}")
    print(f"force on body 0       autodiff {out['autodiff_force'][0]}, closed form {out['closed_form_force'][0]}")
    ok = err_ad < 1e-3 and err_cf < 1e-3
    print("autodiff and closed-form forces agree" if ok else "MISMATCH between autodiff and closed form")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
