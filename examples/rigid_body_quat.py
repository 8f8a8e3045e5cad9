"""A spinning rigid body: choose its initial angular velocity so that, 100 steps later, a marker on it
points at a target direction.

The body's state is a `@gk.struct` (orientation quaternion `q`, body-frame angular velocity `omega`); its
settings another (time step, principal moments of inertia). Each step integrates Euler's equations for a
torque-free body (I ω̇ = -ω × Iω) and the orientation (q̇ = ½ q ⊗ (ω, 0), renormalised), writing a new
array of states so that a gk.Tape differentiates all 100 steps. Gradient descent (`gk.optim.Adam`) on
the initial angular velocity turns the marker `quat_rotate(q, (1, 0, 0))` towards the target.

Run: python examples/rigid_body_quat.py [--device cpu|opencl|...] [--iters N]
Debug: gradkit debug examples/rigid_body_quat.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.struct
class Body:
    q: gk.quatd
    omega: gk.vec3d


@gk.struct
class Settings:
    dt: gk.float64
    inertia: gk.vec3d


@gk.kernel
def start(omega0: gk.array(dtype=gk.vec3d), out: gk.array(dtype=Body)):
    i = gk.tid()
    out[i] = Body(gk.quat_identity(dtype=gk.float64), omega0[i])


@gk.kernel
def step(s: Settings, cur: gk.array(dtype=Body), nxt: gk.array(dtype=Body)):
    i = gk.tid()
    b = cur[i]
    w = b.omega
    torque_free = -gk.cross(w, s.inertia * w)
    b.omega = w + s.dt * gk.vec3d(torque_free.x / s.inertia.x, torque_free.y / s.inertia.y,
                                  torque_free.z / s.inertia.z)
    spin = b.q * gk.quatd(b.omega.x, b.omega.y, b.omega.z, 0.0)
    b.q = gk.normalize(b.q + spin * (0.5 * s.dt))
    nxt[i] = b


@gk.kernel
def aim(cur: gk.array(dtype=Body), target: gk.vec3d, loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = gk.quat_rotate(cur[i].q, gk.vec3d(1.0, 0.0, 0.0)) - target
    gk.atomic_add(loss, 0, gk.dot(d, d))


DT, INERTIA, TARGET = 0.01, np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.6, 0.8])


def hamilton(a, b):
    return np.r_[a[3] * b[:3] + b[3] * a[:3] + np.cross(a[:3], b[:3]), a[3] * b[3] - a[:3] @ b[:3]]


def simulate_reference(omega0: np.ndarray, steps: int) -> np.ndarray:
    """The same scheme in float64 NumPy; returns the final orientation."""
    q, w = np.array([0, 0, 0, 1.0]), omega0.astype(np.float64).copy()
    for _ in range(steps):
        w = w + DT * (-np.cross(w, INERTIA * w)) / INERTIA
        q = q + hamilton(q, np.r_[w, 0.0]) * 0.5 * DT
        q = q / np.linalg.norm(q)
    return q


def loss_reference(omega0: np.ndarray, steps: int) -> float:
    q = simulate_reference(omega0, steps)
    v, w = q[:3], q[3]
    marker = np.array([1.0, 0, 0]) * (2 * w * w - 1) + 2 * v[0] * v + 2 * w * np.cross(v, [1.0, 0, 0])
    d = marker - TARGET
    return float(d @ d)


def run(device: str = "cpu", steps: int = 100, iters: int = 40, lr: float = 0.1) -> dict:
    settings = Settings(dt=DT, inertia=INERTIA)
    omega0 = gk.array([[0.3, -0.2, 0.5]], dtype=gk.vec3d, device=device, requires_grad=True)
    opt = gk.optim.Adam([omega0], lr=lr)
    losses = []
    for _ in range(iters):
        states = [gk.array(dtype=Body, shape=1, device=device, requires_grad=True) for _ in range(steps + 1)]
        loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(start, 1, inputs=[omega0, states[0]], device=device)
            for t in range(steps):
                gk.launch(step, 1, inputs=[settings, states[t], states[t + 1]], device=device)
            gk.launch(aim, 1, inputs=[states[-1], gk.vec3d(*TARGET), loss], device=device)
        tape.backward(loss=loss)
        losses.append(float(loss.numpy()[0]))
        grad, before = omega0.grad.numpy()[0].copy(), omega0.numpy()[0].copy()
        opt.step([omega0.grad])
        tape.zero()
    return {"losses": losses, "omega0": before, "grad": grad, "steps": steps, "final_q": states[-1].q.numpy()[0]}


def render(out: dict, path: str) -> None:
    """Where the marker points before and after training, and the loss (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(8, 3.4))
    a = fig.add_subplot(1, 2, 1, projection="3d")
    def marker(q):                          # the body's x axis rotated by q (what `aim` compares)
        return hamilton(hamilton(q, np.r_[1.0, 0, 0, 0]), np.r_[-q[:3], q[3]])[:3]
    first = marker(simulate_reference(np.array([0.3, -0.2, 0.5]), out["steps"]))
    for d, label in ((first, "first try"), (marker(out["final_q"]), "trained"), (TARGET, "target")):
        a.plot([0, d[0]], [0, d[1]], [0, d[2]], lw=2, label=label)
    a.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), title="marker after 100 steps")
    a.legend(fontsize=7)
    b = fig.add_subplot(1, 2, 2)
    b.semilogy(out["losses"])
    b.set(title="loss", xlabel="Adam step")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iters", type=int, default=40)
    args = parser.parse_args(argv)
    out = run(args.device, iters=args.iters)
    if args.image:
        render(out, args.image)
    ref = loss_reference(out["omega0"], out["steps"])
    print(f"marker misfit {out['losses'][0]:.4f} -> {out['losses'][-1]:.6f} over {args.iters} iterations "
          f"(float64 NumPy reference of the last: {ref:.6f}); initial angular velocity {out['omega0'].round(4)}")
    ok = abs(out["losses"][-1] - ref) <= 1e-8 * max(1.0, ref) and out["losses"][-1] < 0.05 * out["losses"][0]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
