"""A hanging chain of particles held in an array of `@gk.struct`s: aim its free end at a target.

Particle 0 is pinned; springs join neighbours and gravity pulls the rest down. The simulation state
is an array of `Particle` structs (pos, vel, inv_mass) and its settings one `Sim` struct, both passed
to kernels whole; each of the `steps` semi-implicit Euler steps writes a new array of particles, so a
gk.Tape can differentiate the whole trajectory. Gradient descent (`gk.optim.SGD`) on the initial
velocities moves the last particle's final position towards the target.

While recording, the trajectory of the free end is logged into a 2-D array through a sub-array view
(`row = log[t]`) inside `with gk.no_grad():`, so monitoring adds nothing to the backward pass.

Run: python examples/struct_springs.py [--device cpu|opencl|...] [--iters N]
Debug: gradkit debug examples/struct_springs.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.struct
class Particle:
    pos: gk.vec3d
    vel: gk.vec3d
    inv_mass: gk.float64


@gk.struct
class Sim:
    dt: gk.float64
    stiffness: gk.float64
    rest: gk.float64
    gravity: gk.vec3d


@gk.func
def spring_force(a: gk.vec3d, b: gk.vec3d, sim: Sim) -> gk.vec3d:
    """The force on `a` of a spring from `a` to `b`."""
    d = b - a
    length = gk.length(d)
    return sim.stiffness * (length - sim.rest) / length * d


@gk.kernel
def step(sim: Sim, cur: gk.array(dtype=Particle), nxt: gk.array(dtype=Particle)):
    i = gk.tid()
    p = cur[i]
    force = gk.vec3d(0.0, 0.0, 0.0)
    if i > 0:
        force += spring_force(p.pos, cur[i - 1].pos, sim)
    if i < len(cur) - 1:
        force += spring_force(p.pos, cur[i + 1].pos, sim)
    if p.inv_mass > 0.0:
        p.vel = p.vel + sim.dt * (sim.gravity + p.inv_mass * force)
        p.pos = p.pos + sim.dt * p.vel
    nxt[i] = p


@gk.kernel
def start(rest_pos: gk.array(dtype=gk.vec3d), v0: gk.array(dtype=gk.vec3d), inv_mass: gk.array(dtype=gk.float64),
          out: gk.array(dtype=Particle)):
    i = gk.tid()
    out[i] = Particle(rest_pos[i], v0[i], inv_mass[i])


@gk.kernel
def end_misfit(cur: gk.array(dtype=Particle), target: gk.vec3d, loss: gk.array(dtype=gk.float64)):
    d = cur[len(cur) - 1].pos - target
    loss[0] = gk.dot(d, d)


@gk.kernel
def log_end(cur: gk.array(dtype=Particle), t: int, log: gk.array(dtype=gk.vec3d, ndim=2)):
    row = log[t]                       # a sub-array view: row j of the log is step t's particle j
    j = gk.tid()
    row[j] = cur[j].pos


SIM = dict(dt=0.01, stiffness=400.0, rest=0.1, gravity=(0.0, -9.8, 0.0))


def chain(n: int):
    """Rest positions along x, particle 0 pinned (inverse mass 0)."""
    rest = np.stack([np.arange(n) * SIM["rest"], np.zeros(n), np.zeros(n)], axis=1)
    inv_mass = np.ones(n)
    inv_mass[0] = 0.0
    return rest, inv_mass


def simulate_reference(v0: np.ndarray, steps: int) -> np.ndarray:
    """The same scheme in float64 NumPy; returns the final positions."""
    n = len(v0)
    pos, inv_mass = chain(n)
    vel = v0.astype(np.float64).copy()
    g = np.array(SIM["gravity"])
    for _ in range(steps):
        force = np.zeros_like(pos)
        d = pos[1:] - pos[:-1]
        length = np.linalg.norm(d, axis=1, keepdims=True)
        f = SIM["stiffness"] * (length - SIM["rest"]) / length * d
        force[:-1] += f
        force[1:] -= f
        moving = inv_mass > 0
        vel[moving] += SIM["dt"] * (g + inv_mass[moving, None] * force[moving])
        pos = pos + SIM["dt"] * vel * moving[:, None]
    return pos


def loss_reference(v0: np.ndarray, target: np.ndarray, steps: int) -> float:
    d = simulate_reference(v0, steps)[-1] - target
    return float(d @ d)


def run(device: str = "cpu", n: int = 8, steps: int = 40, iters: int = 30, lr: float = 3.0) -> dict:
    sim = Sim(**SIM)
    rest, inv_mass = chain(n)
    target = np.array([0.55, -0.25, 0.2])
    rest_pos = gk.array(rest, dtype=gk.vec3d, device=device)
    masses = gk.array(inv_mass, dtype=gk.float64, device=device)
    v0 = gk.zeros(n, dtype=gk.vec3d, device=device, requires_grad=True)
    log = gk.zeros((steps, n), dtype=gk.vec3d, device=device)
    opt = gk.optim.SGD([v0], lr=lr)        # plain gradient descent, as a kernel on the device
    losses = []
    for _ in range(iters):
        states = [gk.array(dtype=Particle, shape=n, device=device, requires_grad=True) for _ in range(steps + 1)]
        loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(start, n, inputs=[rest_pos, v0, masses, states[0]], device=device)
            for t in range(steps):
                gk.launch(step, n, inputs=[sim, states[t], states[t + 1]], device=device)
                with gk.no_grad():     # monitoring: not recorded, so not differentiated
                    gk.launch(log_end, n, inputs=[states[t + 1], t, log], device=device)
            gk.launch(end_misfit, 1, inputs=[states[-1], gk.vec3d(*target), loss], device=device)
        tape.backward(loss=loss)
        losses.append(float(loss.numpy()[0]))
        grad = v0.grad.numpy().copy()
        v_before = v0.numpy().copy()
        opt.step([v0.grad])
        tape.zero()
    return {"losses": losses, "velocity": v_before, "grad": grad, "target": target, "steps": steps,
            "log": log.numpy(), "final": states[-1].pos.numpy(), "n_recorded": len(tape.launches)}


def render(out: dict, path: str) -> None:
    """The chain's trajectory towards the target, and the loss (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.4))
    log = out["log"]
    for t in range(0, len(log), 4):
        a.plot(log[t, :, 0], log[t, :, 1], "-", color=plt.cm.viridis(t / len(log)), lw=0.8)
    a.plot(log[:, -1, 0], log[:, -1, 1], "k:", lw=0.8, label="free end")
    a.plot(*out["target"][:2], "rx", label="target")
    a.set(title="the chain every 4 steps (x, y)", aspect="equal")
    a.legend(fontsize=7)
    b.semilogy(out["losses"])
    b.set(title="loss", xlabel="SGD step")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iters", type=int, default=30)
    args = parser.parse_args(argv)
    out = run(args.device, iters=args.iters)
    if args.image:
        render(out, args.image)
    ref = loss_reference(out["velocity"], out["target"], out["steps"])
    print(f"loss {out['losses'][0]:.4f} -> {out['losses'][-1]:.6f} over {args.iters} iterations "
          f"(float64 NumPy reference of the last: {ref:.6f}); {out['n_recorded']} launches recorded per "
          f"iteration, the {out['steps']} logging launches not")
    ok = abs(out["losses"][-1] - ref) <= 1e-6 * max(1.0, ref) and out["losses"][-1] < 0.1 * out["losses"][0]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
