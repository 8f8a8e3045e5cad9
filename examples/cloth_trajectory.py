"""Mass-spring cloth: find the initial velocities that throw a cloth onto a target.

A square sheet of particles joined by springs (structural and shear) falls under gravity for `steps`
semi-implicit Euler steps. The loss is the mean squared distance of the final particle positions from
a target pose (the rest pose shifted sideways and up). Gradient descent on the per-particle initial
velocities, with gradients through the whole trajectory from a gk.Tape, brings the loss down over the
iterations. Spring forces are accumulated with atomic adds onto both end particles; each step writes
new arrays so the tape keeps every state the backward pass needs.

Run: python examples/cloth_trajectory.py [--device cpu|opencl|...] [--iters N]
Debug: gradkit debug examples/cloth_trajectory.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.kernel
def spring_forces(x: gk.array(dtype=gk.vec3), v: gk.array(dtype=gk.vec3), springs: gk.array(dtype=int, ndim=2),
                  rest: gk.array(dtype=float), stiffness: float, damping: float, f: gk.array(dtype=gk.vec3)):
    s = gk.tid()
    a = springs[s, 0]
    b = springs[s, 1]
    d = x[b] - x[a]
    length = gk.length(d)
    direction = d / length
    relative_speed = gk.dot(v[b] - v[a], direction)
    magnitude = stiffness * (length - rest[s]) + damping * relative_speed
    gk.atomic_add(f, a, magnitude * direction)
    gk.atomic_sub(f, b, magnitude * direction)


@gk.kernel
def integrate(x: gk.array(dtype=gk.vec3), v: gk.array(dtype=gk.vec3), f: gk.array(dtype=gk.vec3), mass: float,
              gravity: gk.vec3, dt: float, x_new: gk.array(dtype=gk.vec3), v_new: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    vel = v[i] + dt * (f[i] / mass + gravity)
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


@gk.kernel
def pose_loss(x: gk.array(dtype=gk.vec3), target: gk.array(dtype=gk.vec3), inv_n: float,
              loss: gk.array(dtype=float)):
    i = gk.tid()
    d = x[i] - target[i]
    gk.atomic_add(loss, 0, inv_n * gk.dot(d, d))


@gk.kernel
def descend(v: gk.array(dtype=gk.vec3), grad: gk.array(dtype=gk.vec3), lr: float):
    i = gk.tid()
    v[i] = v[i] - lr * grad[i]


def make_cloth(side: int, spacing: float = 0.1):
    """Rest positions (side*side, 3) in the x-z plane and springs (pairs, rest lengths)."""
    ii, jj = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    pos = np.stack([ii.ravel() * spacing, np.full(side * side, 1.0), jj.ravel() * spacing], 1).astype(np.float32)
    idx = lambda i, j: i * side + j
    pairs = []
    for i in range(side):
        for j in range(side):
            for di, dj in ((1, 0), (0, 1), (1, 1), (1, -1)):
                if 0 <= i + di < side and 0 <= j + dj < side:
                    pairs.append((idx(i, j), idx(i + di, j + dj)))
    pairs = np.array(pairs, dtype=np.int32)
    rest = np.linalg.norm(pos[pairs[:, 1]] - pos[pairs[:, 0]], axis=1).astype(np.float32)
    return pos, pairs, rest


PARAMS = dict(stiffness=200.0, damping=1.0, mass=0.05, gravity=(0.0, -9.8, 0.0), dt=0.005)


def simulate_reference(pos, vel0, pairs, rest, steps, stiffness, damping, mass, gravity, dt) -> np.ndarray:
    """The same trajectory in float64 NumPy; returns the final positions."""
    x, v = pos.astype(np.float64), vel0.astype(np.float64)
    g = np.asarray(gravity, np.float64)
    for _ in range(steps):
        d = x[pairs[:, 1]] - x[pairs[:, 0]]
        length = np.linalg.norm(d, axis=1)
        direction = d / length[:, None]
        rel = ((v[pairs[:, 1]] - v[pairs[:, 0]]) * direction).sum(1)
        mag = (stiffness * (length - rest) + damping * rel)[:, None] * direction
        f = np.zeros_like(x)
        np.add.at(f, pairs[:, 0], mag)
        np.add.at(f, pairs[:, 1], -mag)
        v = v + dt * (f / mass + g)
        x = x + dt * v
    return x


def run(device: str | None = None, side: int = 8, steps: int = 60, iters: int = 30, lr: float = 60.0,
        shift=(0.3, 0.25, 0.0), verbose: bool = False) -> dict:
    """Optimise the initial velocities; returns the loss per iteration, velocities, gradient and the tape."""
    pos_np, pairs_np, rest_np = make_cloth(side)
    n, p = PARAMS, len(pairs_np)
    target_np = pos_np + np.asarray(shift, np.float32)
    with gk.ScopedDevice(device or gk.get_device()):
        springs = gk.array(pairs_np, dtype=gk.int32, label="springs")
        rest = gk.array(rest_np, label="rest lengths")
        target = gk.array(target_np, dtype=gk.vec3, label="target pose")
        xs = [gk.array(pos_np, dtype=gk.vec3, label="x[0]")]
        vs = [gk.zeros(len(pos_np), dtype=gk.vec3, requires_grad=True, label="initial velocity")]
        fs = []
        for t in range(steps):
            fs.append(gk.zeros(len(pos_np), dtype=gk.vec3, requires_grad=True, label=f"f[{t}]"))
            xs.append(gk.zeros(len(pos_np), dtype=gk.vec3, requires_grad=True, label=f"x[{t + 1}]"))
            vs.append(gk.zeros(len(pos_np), dtype=gk.vec3, requires_grad=True, label=f"v[{t + 1}]"))
        loss = gk.zeros(1, requires_grad=True, label="loss")
        gravity = gk.vec3(*n["gravity"])
        tape, losses = gk.Tape(), []
        for it in range(iters):
            tape.reset()
            loss.zero_()
            for f in fs:
                f.zero_()                       # forces accumulate with atomic adds
            with tape:
                with tape.scope("simulate"):
                    for t in range(steps):
                        gk.launch(spring_forces, p, inputs=[xs[t], vs[t], springs, rest, n["stiffness"],
                                                            n["damping"]], outputs=[fs[t]])
                        gk.launch(integrate, len(pos_np), inputs=[xs[t], vs[t], fs[t], n["mass"], gravity, n["dt"]],
                                  outputs=[xs[t + 1], vs[t + 1]])
                with tape.scope("loss"):
                    gk.launch(pose_loss, len(pos_np), inputs=[xs[-1], target, 1.0 / len(pos_np)], outputs=[loss])
            tape.backward(loss=loss)
            losses.append(float(loss.numpy()[0]))
            if verbose and (it % 5 == 0 or it == iters - 1):
                print(f"iteration {it:3d}: loss {losses[-1]:.6f}")
            if it < iters - 1:
                gk.launch(descend, len(pos_np), inputs=[vs[0], vs[0].grad, lr])
        return {"losses": losses, "velocity": vs[0].numpy(), "grad": vs[0].grad.numpy(), "final": xs[-1].numpy(),
                "pos": pos_np, "pairs": pairs_np, "rest": rest_np, "target": target_np, "steps": steps,
                "tape": tape}


def loss_reference(out: dict, velocity: np.ndarray) -> float:
    final = simulate_reference(out["pos"], velocity, out["pairs"], out["rest"], out["steps"], **PARAMS)
    return float(((final - out["target"]) ** 2).sum(1).mean())


def render(out: dict, path: str) -> None:
    """The thrown cloth seen from the front, and its loss per iteration (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(8, 3.4))
    a = fig.add_subplot(1, 2, 1, projection="3d")
    for pts, style, label in ((out["pos"], "o", "start"), (out["target"], "x", "target"), (out["final"], ".", "landed")):
        a.plot(pts[:, 0], pts[:, 2], pts[:, 1], style, ms=3, label=label)
    for i, j in out["pairs"]:
        a.plot(out["final"][[i, j], 0], out["final"][[i, j], 2], out["final"][[i, j], 1], "-", color="C2", lw=0.4)
    a.set(title="cloth after the trajectory", xlabel="x", ylabel="z", zlabel="y (up)")
    a.legend(fontsize=7)
    b = fig.add_subplot(1, 2, 2)
    b.semilogy(out["losses"])
    b.set(title="loss", xlabel="iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args(argv)
    out = run(args.device, steps=args.steps, iters=args.iters, verbose=True)
    if args.image:
        render(out, args.image)
    first, last = out["losses"][0], out["losses"][-1]
    print(f"loss {first:.5f} -> {last:.6f} over {len(out['losses'])} iterations "
          f"(float64 reference trajectory from the last velocities: {loss_reference(out, out['velocity']):.6f})")
    ok = last < 0.1 * first
    print("the cloth lands on the target" if ok else "the loss did not fall enough")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
