"""Implicit cloth: learn a cloth's spring stiffness through the linear solves of its implicit steps.

A hanging sheet of particles (top row pinned) joined by structural and shear springs, linearised about
the rest pose, falls under gravity for a few backward-Euler steps: each step solves
(M + h² K) v' = M v + h (f_gravity − K u) with `gk.linalg.cg` on a 3x3-block `gk.sparse` matrix, then
moves u' = u + h v'. The stiffness matrix K is built from the stiffness by a kernel, so on a
gk.Tape gradients reach it through every solve (each solve one tape step whose backward solves the
adjoint system) and through K's product with u. Gradient descent on the log-stiffness recovers the
stiffness that produced an observed final pose.

Run: python examples/implicit_cloth.py [--device cpu|opencl|...] [--iters N] [--side N]
Debug: gradkit debug examples/implicit_cloth.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk

TRUE_STIFFNESS = 60.0               # the observed pose's (structural springs; shear ones SHEAR times it)
START_STIFFNESS = 12.0              # the guess training starts from
SHEAR = 0.25
PARAMS = dict(mass=0.05, dt=0.04, steps=4, gravity=(0.0, -9.8, 0.0))


@gk.kernel
def spring_blocks(log_k: gk.array(dtype=gk.float64), scale: gk.array(dtype=gk.float64),
                  dir: gk.array(dtype=gk.vec3d), free: gk.array(dtype=gk.float64, ndim=2),
                  blocks: gk.array(dtype=gk.mat33d)):
    """Spring s's four blocks of K (ii, jj: +k d dᵀ; ij, ji: −k d dᵀ), each zero in a pinned end's row or
    column (free[s] says whether each end moves), so pinned particles stay out of the system."""
    s = gk.tid()
    kd = gk.exp(log_k[0]) * scale[s] * gk.outer(dir[s], dir[s])
    fi = free[s, 0]
    fj = free[s, 1]
    blocks[4 * s + 0] = fi * kd
    blocks[4 * s + 1] = fj * kd
    blocks[4 * s + 2] = -(fi * fj) * kd
    blocks[4 * s + 3] = -(fi * fj) * kd


@gk.kernel
def step_rhs(v: gk.array(dtype=gk.vec3d), ku: gk.array(dtype=gk.vec3d), mass: gk.array(dtype=gk.float64),
             gravity: gk.vec3d, h: gk.float64, b: gk.array(dtype=gk.vec3d)):
    """b = M v + h (m g − K u); pinned particles (mass 0 here) get b = 0, so v' = 0 there."""
    i = gk.tid()
    b[i] = mass[i] * v[i] + h * (mass[i] * gravity - ku[i])


@gk.kernel
def advance(u: gk.array(dtype=gk.vec3d), v: gk.array(dtype=gk.vec3d), h: gk.float64,
            u_new: gk.array(dtype=gk.vec3d)):
    i = gk.tid()
    u_new[i] = u[i] + h * v[i]


@gk.kernel
def pose_loss(u: gk.array(dtype=gk.vec3d), target: gk.array(dtype=gk.vec3d), inv_n: gk.float64,
              loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = u[i] - target[i]
    gk.atomic_add(loss, 0, inv_n * gk.dot(d, d))


def make_cloth(side: int, spacing: float = 0.1) -> dict:
    """Rest pose of a side x side sheet in the x-y plane (row 0 pinned), springs (i, j), their stiffness
    relative to the structural one (1 or SHEAR), unit rest directions and whether each end moves."""
    idx = np.arange(side * side).reshape(side, side)
    pairs, kinds = [], []
    for (di, dj), kind in (((1, 0), 1.0), ((0, 1), 1.0), ((1, 1), SHEAR), ((1, -1), SHEAR)):
        a = idx[max(0, -di):side - max(0, di), max(0, -dj):side - max(0, dj)]
        b = idx[max(0, di):side + min(0, di), max(0, dj):side + min(0, dj)]
        pairs.append(np.stack([a.ravel(), b.ravel()], 1))
        kinds.append(np.full(a.size, kind))
    pairs, kinds = np.concatenate(pairs), np.concatenate(kinds)
    ii, jj = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    pos = np.stack([jj.ravel() * spacing, -ii.ravel() * spacing, 0.0 * ii.ravel()], 1)
    d = pos[pairs[:, 1]] - pos[pairs[:, 0]]
    pinned = ii.ravel() == 0
    return dict(side=side, pos=pos, pairs=pairs, scale=kinds, dirs=d / np.linalg.norm(d, axis=1, keepdims=True),
                pinned=pinned, free=(~pinned[pairs]).astype(np.float64))


def triplet_pattern(cloth: dict) -> tuple:
    """(rows, cols) of K's four blocks per spring, in spring_blocks's order."""
    i, j = cloth["pairs"][:, 0], cloth["pairs"][:, 1]
    return np.stack([i, j, i, j], 1).ravel(), np.stack([i, j, j, i], 1).ravel()


def masses(cloth: dict, mass: float) -> np.ndarray:
    return np.where(cloth["pinned"], 0.0, mass)


def simulate(log_k: gk.array, cloth: dict, params: dict, tol: float = 1e-10) -> tuple:
    """The final displacement after params['steps'] implicit steps from rest, and the CG iteration counts."""
    n, h = cloth["side"] ** 2, params["dt"]
    rows, cols = triplet_pattern(cloth)
    blocks = gk.zeros(rows.size, dtype=gk.mat33d, requires_grad=True, label="spring blocks")
    gk.launch(spring_blocks, len(cloth["pairs"]),
              inputs=[log_k, gk.array(cloth["scale"]), gk.array(cloth["dirs"], dtype=gk.vec3d),
                      gk.array(cloth["free"])], outputs=[blocks])
    K = gk.sparse.bsr_from_triplets(n, n, rows, cols, blocks)
    m = masses(cloth, params["mass"])
    mass_blocks = np.where(cloth["pinned"], 1.0, m)[:, None, None] * np.eye(3)       # pinned rows: identity
    A = gk.sparse.bsr_axpy(K, gk.sparse.bsr_diag(mass_blocks), alpha=h * h, beta=1.0)   # M + h² K
    mass = gk.array(m)
    u = gk.zeros(n, dtype=gk.vec3d, requires_grad=True, label="u0")
    v = gk.zeros(n, dtype=gk.vec3d, requires_grad=True, label="v0")
    counts = []
    for step in range(params["steps"]):
        ku = gk.sparse.bsr_mv(K, u)
        b = gk.zeros(n, dtype=gk.vec3d, requires_grad=True, label=f"rhs {step}")
        gk.launch(step_rhs, n, inputs=[v, ku, mass, gk.vec3d(*params["gravity"]), h], outputs=[b])
        v = gk.zeros(n, dtype=gk.vec3d, requires_grad=True, label=f"v{step + 1}")
        iterations, _ = gk.linalg.cg(A, b, v, tol=tol, M="block_diag")
        counts.append(iterations)
        u_new = gk.zeros(n, dtype=gk.vec3d, requires_grad=True, label=f"u{step + 1}")
        gk.launch(advance, n, inputs=[u, v, h], outputs=[u_new])
        u = u_new
    return u, counts


def reference_pose(stiffness, cloth: dict, params: dict) -> np.ndarray:
    """The final displacement in float64 NumPy with dense solves: the example's reference."""
    n, h = cloth["side"] ** 2, params["dt"]
    K = np.zeros((3 * n, 3 * n))
    for (i, j), scale, d, (fi, fj) in zip(cloth["pairs"], cloth["scale"], cloth["dirs"], cloth["free"]):
        kd = stiffness * scale * np.outer(d, d)
        for r, c, w in ((i, i, fi), (j, j, fj), (i, j, -fi * fj), (j, i, -fi * fj)):
            K[3 * r:3 * r + 3, 3 * c:3 * c + 3] += w * kd
    m = np.repeat(masses(cloth, params["mass"]), 3)
    A = np.diag(np.where(m == 0.0, 1.0, m)) + h * h * K
    g = np.tile(params["gravity"], n)
    u, v = np.zeros(3 * n), np.zeros(3 * n)
    for _ in range(params["steps"]):
        v = np.linalg.solve(A, m * v + h * (m * g - K @ u))
        u = u + h * v
    return u.reshape(n, 3)


def loss_reference(stiffness, target: np.ndarray, cloth: dict, params: dict) -> float:
    return float(((reference_pose(stiffness, cloth, params) - target) ** 2).sum() / len(target))


def run(device: str | None = None, side: int = 6, iters: int = 15, lr: float = 250.0, verbose: bool = False) -> dict:
    """Gradient descent on the log-stiffness (`lr` about 0.75 / the loss's curvature in log k at the answer,
    so every step lowers the loss); returns per iteration the loss, the stiffness it was taken at, its
    gradient d loss / d stiffness and the CG counts of the steps."""
    cloth, params = make_cloth(side), PARAMS
    target = reference_pose(TRUE_STIFFNESS, cloth, params)       # the observed pose
    with gk.ScopedDevice(device or gk.get_device()):
        target_u = gk.array(target, dtype=gk.vec3d, label="observed pose")
        log_k = gk.array(np.log([START_STIFFNESS]), requires_grad=True, label="log stiffness")
        loss = gk.zeros(1, dtype=gk.float64, requires_grad=True, label="loss")
        opt = gk.optim.SGD([log_k], lr=lr)
        tape = gk.Tape(params=[log_k])
        losses, counts, stiffnesses, grads = [], [], [], []
        for it in range(iters):
            tape.reset()
            loss.zero_()
            with tape:
                with tape.scope("simulate"):
                    u, cg_counts = simulate(log_k, cloth, params)
                with tape.scope("loss"):
                    gk.launch(pose_loss, side * side, inputs=[u, target_u, 1.0 / (side * side)], outputs=[loss])
            tape.backward(loss=loss)
            losses.append(float(loss.numpy()[0]))
            counts.append(cg_counts)
            stiffnesses.append(float(np.exp(log_k.numpy()[0])))
            grads.append(float(log_k.grad.numpy()[0]) / stiffnesses[-1])     # d loss / d k = (d loss / d log k) / k
            if verbose:
                print(f"iteration {it}: loss {losses[-1]:.4e}  stiffness {stiffnesses[-1]:8.4f}"
                      f"  (cg iterations per step: {cg_counts})")
            if it < iters - 1:
                opt.step([log_k.grad])
        return {"losses": losses, "stiffness": stiffnesses, "grad": grads, "target": target, "cloth": cloth,
                "params": params, "cg_iterations": counts, "tape": tape}


def render(out: dict, path: str) -> None:
    """The observed pose, the pose at the starting guess and the loss and stiffness per step (matplotlib,
    headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.4))
    rest = out["cloth"]["pos"]
    guess = rest + reference_pose(START_STIFFNESS, out["cloth"], out["params"])
    for pts, style, label in ((rest, "o", "rest"), (guess, ".", f"k = {START_STIFFNESS:g} (start)"),
                              (rest + out["target"], "x", f"observed (k = {TRUE_STIFFNESS:g})")):
        a.plot(pts[:, 0], pts[:, 1], style, ms=4, label=label)
    a.set(title="the sheet after the implicit steps (x, y)", aspect="equal")
    a.legend(fontsize=7)
    b.semilogy(out["losses"], "o-", ms=3)
    b.set(title="loss", xlabel="SGD step on log k")
    c = b.twinx()
    c.plot(out["stiffness"], "C1s-", ms=3)
    c.set_ylabel("stiffness k", color="C1")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--iters", type=int, default=15)
    parser.add_argument("--side", type=int, default=6)
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    args = parser.parse_args(argv)
    out = run(args.device, side=args.side, iters=args.iters, verbose=True)
    if args.image:
        render(out, args.image)
    first, last = out["losses"][0], out["losses"][-1]
    print(f"loss {first:.4e} -> {last:.4e}; stiffness {out['stiffness'][-1]:.4f} (true {TRUE_STIFFNESS})")
    ok = last < 1e-2 * first
    print("the stiffness found reproduces the observed pose" if ok else "the loss did not fall enough")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
