"""Benchmark runner: times W1-W5 on gradkit devices (and Warp/Taichi when installed), checking every
result against a float64 NumPy reference first. Prints a table; writes JSON and Markdown.

    python benchmarks/run.py [--smoke] [--devices cpu,opencl] [--repeat 9] [--out bench-results]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import gradkit as gk  # noqa: E402
import workloads as W  # noqa: E402


def timed(fn, repeat: int, warmup: int = 2) -> dict:
    """min/median wall ms over `repeat` runs after `warmup`, and CPU parallelism (CPU time / wall time)."""
    for _ in range(warmup):
        fn()
    walls = []
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        walls.append((time.perf_counter() - t) * 1e3)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"min_ms": min(walls), "median_ms": statistics.median(walls), "parallelism": cpu / wall if wall else 0.0}


def check(name, got, ref, rtol, atol=0.0):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if not np.allclose(got, ref, rtol=rtol, atol=atol):
        err = np.max(np.abs(got - ref))
        raise AssertionError(f"{name}: result differs from the float64 reference (max abs err {err:.3g})")


def gradkit_cases(device: str, size: dict) -> dict:
    """name -> (setup-and-check, timed callable) for one gradkit device."""
    rng = np.random.default_rng(0)
    cases = {}
    sync = lambda: gk.synchronize(device)  # noqa: E731

    # W1 streaming
    n = size["w1"]
    x_np = rng.uniform(-2, 2, n).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.zeros(n, device=device, requires_grad=True)
    y_ref, g_ref = W.ref_w1(x_np)

    def w1_fwd():
        gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device)
        sync()

    def w1_bwd():
        # The adjoint launch; seeding dL/dy = 1 is the caller's data and is done before timing.
        gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device, adjoint=True)
        sync()
    w1_fwd()
    check("W1 forward", y.numpy(), y_ref, 1e-5, 1e-5)
    x.grad.zero_()
    y.grad.fill_(1.0)
    w1_bwd()
    check("W1 backward", x.grad.numpy(), g_ref, 1e-4, 1e-4)
    cases["W1 forward"], cases["W1 backward"] = w1_fwd, w1_bwd

    # W1 forward mode: value and tangent in one kernel (seed dx = 1, so dy = dy/dx)
    x.dual = gk.ones(n, device=device)
    y.dual = gk.zeros(n, device=device)

    def w1_tangent():
        gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device, tangent=True)
        sync()
    w1_tangent()
    check("W1 tangent", y.dual.numpy(), g_ref, 1e-4, 1e-4)
    cases["W1 tangent"] = w1_tangent

    # W2 reduction
    loss = gk.zeros(1, device=device, requires_grad=True)

    def w2_fwd():
        loss.zero_()
        gk.launch(W.w2_reduce, n, inputs=[x], outputs=[loss], device=device)
        sync()

    def w2_bwd():
        loss.grad.fill_(1.0)    # one element
        gk.launch(W.w2_reduce, n, inputs=[x], outputs=[loss], device=device, adjoint=True)
        sync()
    w2_fwd()
    check("W2 forward", loss.numpy()[0], np.sum(x_np.astype(np.float64) ** 2), 1e-3)
    x.grad.zero_()
    w2_bwd()
    check("W2 backward", x.grad.numpy(), 2 * x_np.astype(np.float64), 1e-6)
    cases["W2 forward"], cases["W2 backward"] = w2_fwd, w2_bwd

    # W3 n-body
    m = size["w3"]
    p_np = rng.uniform(0, 1, (m, 2)).astype(np.float32)
    p = gk.array(p_np, dtype=gk.vec2, device=device, requires_grad=True)
    U = gk.zeros(1, device=device, requires_grad=True)
    u_ref, gp_ref = W.ref_w3(p_np)

    def w3_fwd():
        U.zero_()
        gk.launch(W.w3_nbody, m, inputs=[p], outputs=[U], device=device)
        sync()

    def w3_bwd():
        U.grad.fill_(1.0)
        gk.launch(W.w3_nbody, m, inputs=[p], outputs=[U], device=device, adjoint=True)
        sync()
    w3_fwd()
    check("W3 forward", U.numpy()[0], u_ref, 1e-3)
    p.grad.zero_()
    w3_bwd()
    check("W3 backward", p.grad.numpy(), gp_ref, 2e-2, 2e-2 * np.abs(gp_ref).max())
    cases["W3 forward"], cases["W3 backward"] = w3_fwd, w3_bwd

    # W4 stencil on a tape
    k, steps = size["w4"], 16
    u0_np = rng.uniform(0, 1, (k, k)).astype(np.float32)
    states = [gk.array(u0_np, device=device, requires_grad=True)] + \
        [gk.zeros((k, k), device=device, requires_grad=True) for _ in range(steps)]
    l4 = gk.zeros(1, device=device, requires_grad=True)
    tape = gk.Tape()

    def w4_fwd():
        tape.reset()
        l4.zero_()
        with tape:
            for s in range(steps):
                gk.launch(W.w4_heat, (k, k), inputs=[states[s]], outputs=[states[s + 1]], device=device)
            gk.launch(W.w4_loss, (k, k), inputs=[states[-1]], outputs=[l4], device=device)
        sync()

    def w4_bwd():
        tape.zero()
        tape.backward(loss=l4)
        sync()
    w4_fwd()
    l_ref, g4_ref = W.ref_w4(u0_np, steps)
    check("W4 forward", l4.numpy()[0], l_ref, 1e-3)
    w4_bwd()
    check("W4 backward", states[0].grad.numpy(), g4_ref, 1e-3, 1e-4)
    cases["W4 forward"], cases["W4 backward"] = w4_fwd, w4_bwd

    # W5 launch overhead (µs per launch)
    xs = gk.array([1.0], device=device)
    ys = gk.zeros(1, device=device)
    launches = size["w5"]

    def w5():
        for _ in range(launches):
            gk.launch(W.w5_tiny, 1, inputs=[xs], outputs=[ys], device=device)
        sync()
    w5()
    check("W5", ys.numpy()[0], 2.0, 0)
    cases["W5 launch"] = w5
    return cases


SIZES = {"full": {"w1": 1 << 24, "w3": 2048, "w4": 1024, "w5": 20000},
         "smoke": {"w1": 1 << 14, "w3": 64, "w4": 32, "w5": 200}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    ap.add_argument("--devices", default=None, help="comma-separated gradkit devices (default: all)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--out", default="bench-results")
    args = ap.parse_args(argv)
    size = SIZES["smoke" if args.smoke else "full"]
    devices = args.devices.split(",") if args.devices else \
        [d.name for d in gk.get_devices() if d.backend in ("cpu", "opencl")]   # the numpy plugin is an oracle
    results = []
    for dev in devices:
        print(f"== gradkit {dev}: checking results against float64 references ...", flush=True)
        for name, fn in gradkit_cases(dev, size).items():
            r = timed(fn, args.repeat)
            if name == "W5 launch":
                r["us_per_launch"] = r["min_ms"] * 1e3 / size["w5"]
            r.update(system=f"gradkit {dev}", workload=name)
            results.append(r)
            extra = f"  ({r['us_per_launch']:.2f} us/launch)" if "us_per_launch" in r else ""
            print(f"  {name:<14} min {r['min_ms']:9.3f} ms  median {r['median_ms']:9.3f} ms  "
                  f"parallelism {r['parallelism']:.2f}{extra}", flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(exist_ok=True)
    (out / "results.json").write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2))
    lines = ["| system | workload | min ms | median ms | parallelism |", "|---|---|---|---|---|"]
    lines += [f"| {r['system']} | {r['workload']} | {r['min_ms']:.3f} | {r['median_ms']:.3f} | {r['parallelism']:.2f} |"
              for r in results]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'results.json'} and {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
