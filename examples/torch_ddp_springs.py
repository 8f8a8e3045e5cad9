"""Learning a spring stiffness with PyTorch through a gradkit simulation, data-parallel on torch.distributed.

64 damped oscillators are stepped 40 times by a gradkit kernel; `gk.torch_function` makes the whole rollout a
torch op, so a torch model (here one parameter, log k) is trained by torch's optimiser from observed final
positions. With `--world-size 2` the script starts two processes (gloo backend, as `torchrun` would), each
simulating half the oscillators; DistributedDataParallel averages their gradients, so the run matches the
single-process one. Across machines the same script runs under torchrun:

    torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        examples/torch_ddp_springs.py

Run: python examples/torch_ddp_springs.py [--device cpu|opencl|...] [--world-size 2]
Debug: gradkit debug examples/torch_ddp_springs.py
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys

import numpy as np

import gradkit as gk

F64 = gk.float64
TRUE_K, STEPS, DT, COUNT = 2.0, 40, 0.05, 64


@gk.kernel
def spring_step(x: gk.array(dtype=F64), v: gk.array(dtype=F64), k: gk.array(dtype=F64), dt: F64,
                x_out: gk.array(dtype=F64), v_out: gk.array(dtype=F64)):
    i = gk.tid()
    a = -k[0] * x[i] - 0.1 * v[i]
    v_out[i] = v[i] + dt * a
    x_out[i] = x[i] + dt * v_out[i]


def simulate(x0, v0, k):
    """Final positions after STEPS symplectic Euler steps (a new array per step, so a tape can replay it)."""
    x, v = x0, v0
    for _ in range(STEPS):
        xn, vn = gk.zeros_like(x), gk.zeros_like(v)
        gk.launch(spring_step, x.shape[0], inputs=[x, v, k, DT], outputs=[xn, vn], device=x.device)
        x, v = xn, vn
    return x


def data(seed: int = 0):
    """Initial states and the final positions the true stiffness gives (float64 NumPy, no gradkit)."""
    rng = np.random.default_rng(seed)
    x0, v0 = rng.uniform(-1, 1, COUNT), rng.uniform(-1, 1, COUNT)
    x, v = x0.copy(), v0.copy()
    for _ in range(STEPS):
        v = v + DT * (-TRUE_K * x - 0.1 * v)
        x = x + DT * v
    return x0, v0, x


def train(device: str = "cpu", rank: int = 0, world: int = 1, iters: int = 60, lr: float = 0.3) -> dict:
    import torch
    import torch.distributed as dist

    class Stiffness(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.log_k = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
            self.rollout = gk.torch_function(simulate, device=device)

        def forward(self, x0, v0):
            return self.rollout(x0, v0, self.log_k.exp())

    torch.manual_seed(0)
    model = Stiffness()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    x0, v0, target = (torch.from_numpy(a) for a in data())
    shard = slice(rank * COUNT // world, (rank + 1) * COUNT // world)     # this process's oscillators
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(iters):
        opt.zero_grad()
        loss = ((model(x0[shard], v0[shard]) - target[shard]) ** 2).mean()
        loss.backward()                       # DDP averages the gradient over the processes
        opt.step()
        losses.append(float(loss.detach()))
    log_k = (model.module if world > 1 else model).log_k.item()
    if world > 1:
        dist.barrier()
    return {"k": float(np.exp(log_k)), "losses": losses}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_workers(device: str, world: int, iters: int) -> list[dict]:
    """Start `world` copies of this script as ranks of one gloo group (what torchrun does), on this host."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(world))
    procs = [subprocess.Popen([sys.executable, __file__, "--device", device, "--iters", str(iters), "--json"],
                              env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a worker failed: exit codes {[p.returncode for p in procs]}")
    return [json.loads(o.strip().splitlines()[-1]) for o in outs]


def render(out: dict, path: str) -> None:
    """The loss of torch's optimiser through the gradkit rollout (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, a = plt.subplots(figsize=(6, 3.4))
    a.semilogy(out["losses"])
    a.set(title=f"learned k = {out['k']:.4f} (true {TRUE_K})", xlabel="torch SGD step", ylabel="loss")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--world-size", type=int, default=1, help="processes to start on this host")
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--json", action="store_true", help="print the result as JSON (worker processes)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("this example needs PyTorch: pip install 'gradkit[torch]' (make test installs its CPU build)")
        return 0
    if "RANK" in os.environ:                  # a worker: started by launch_workers or by torchrun
        import torch.distributed as dist
        dist.init_process_group("gloo")
        out = train(args.device, dist.get_rank(), dist.get_world_size(), args.iters)   # ends in a barrier
        print(json.dumps(out) if args.json else f"rank {dist.get_rank()}: learned k = {out['k']:.4f}", flush=True)
        # Leave without the interpreter's teardown: under load, gloo's and the OpenCL driver's threads being
        # torn down together aborted a finished worker now and then ("terminate called without an active
        # exception"). Every rank has passed the barrier, so nothing is lost.
        sys.stderr.flush()
        os._exit(0 if abs(out["k"] - TRUE_K) < 0.05 else 1)
    elif args.world_size > 1:
        out = launch_workers(args.device, args.world_size, args.iters)[0]
    else:
        out = train(args.device, iters=args.iters)
    if args.image:
        render(out, args.image)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"learned k = {out['k']:.4f} (true {TRUE_K}); loss {out['losses'][0]:.3e} -> {out['losses'][-1]:.3e}")
    return 0 if abs(out["k"] - TRUE_K) < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
