"""Jacobians of a kernel three ways, checked against the closed form.

The kernel maps polar coordinates (r, theta) to Cartesian ones (x, y) element-wise. `gk.autograd`
computes its Jacobian by reverse mode (one adjoint launch per output element), forward mode (one
tangent launch per input element) and central finite differences; all three are compared with the
closed form dx/dr = cos(theta), dx/dtheta = -r sin(theta), dy/dr = sin(theta), dy/dtheta = r cos(theta),
and `gk.autograd.gradcheck` confirms the analytic gradients. One row of the Jacobian is then taken
on a gk.Tape by seeding the output gradient directly (`tape.backward(grads={x: seed})`).

Last, a Python function of arrays in place of a kernel (Warp 1.19's form): `segment_lengths(r, theta)`
launches two kernels and returns the lengths of the polyline through the points; its Jacobian with
respect to theta alone (`input_output_mask=[("theta", 0)]`) is compared with central differences of a
float64 NumPy version, and `--plot FILE` draws the Jacobians with `gk.autograd.jacobian_plot`.

Run: python examples/jacobian.py [--device cpu|opencl|...] [--size N] [--plot jacobians.png]
Debug: gradkit debug examples/jacobian.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk


@gk.kernel
def polar_to_cartesian(r: gk.array(dtype=float), theta: gk.array(dtype=float),
                       x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    x[i] = r[i] * gk.cos(theta[i])
    y[i] = r[i] * gk.sin(theta[i])


@gk.kernel
def segment_length(x: gk.array(dtype=float), y: gk.array(dtype=float), length: gk.array(dtype=float)):
    i = gk.tid()
    length[i] = gk.length(gk.vec2(x[i + 1] - x[i], y[i + 1] - y[i]))


def segment_lengths(r, theta):
    """Lengths of the polyline through the points (r, theta): a Python function that launches kernels."""
    n = r.shape[0]
    x, y = gk.zeros(n, requires_grad=True), gk.zeros(n, requires_grad=True)
    length = gk.zeros(n - 1, requires_grad=True)
    gk.launch(polar_to_cartesian, n, inputs=[r, theta], outputs=[x, y])
    gk.launch(segment_length, n - 1, inputs=[x, y], outputs=[length])
    return length


def segment_lengths_reference(r: np.ndarray, theta: np.ndarray) -> np.ndarray:
    p = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
    return np.linalg.norm(np.diff(p, axis=0), axis=1)


def central_differences(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = eps
        cols.append((f(x + e) - f(x - e)) / (2 * eps))
    return np.stack(cols, axis=1)


def closed_form(r: np.ndarray, theta: np.ndarray) -> dict:
    """The Jacobian blocks (out_idx, in_idx) -> (n, n) in float64."""
    r, theta = r.astype(np.float64), theta.astype(np.float64)
    return {(0, 0): np.diag(np.cos(theta)), (0, 1): np.diag(-r * np.sin(theta)),
            (1, 0): np.diag(np.sin(theta)), (1, 1): np.diag(r * np.cos(theta))}


def run(device: str | None = None, size: int = 6, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    r_np = rng.uniform(0.5, 2.0, size).astype(np.float32)
    theta_np = rng.uniform(-np.pi, np.pi, size).astype(np.float32)
    with gk.ScopedDevice(device or gk.get_device()):
        r = gk.array(r_np, requires_grad=True, label="r")
        theta = gk.array(theta_np, requires_grad=True, label="theta")
        x = gk.zeros(size, requires_grad=True, label="x")
        y = gk.zeros(size, requires_grad=True, label="y")
        args = (polar_to_cartesian, size, [r, theta], [x, y])
        out = {"reverse": gk.autograd.jacobian(*args), "forward": gk.autograd.jacobian_fwd(*args),
               "fd": gk.autograd.jacobian_fd(*args, eps=1e-3), "exact": closed_form(r_np, theta_np),
               "gradcheck": gk.autograd.gradcheck(*args, eps=1e-3, raise_exception=False)}

        # One Jacobian row on a tape: seed dL/dx = e_k, read dx_k/dr and dx_k/dtheta from the gradients.
        k = size // 2
        tape = gk.Tape()
        with tape:
            gk.launch(polar_to_cartesian, size, inputs=[r, theta], outputs=[x, y])
        r.grad.zero_()
        theta.grad.zero_()
        seed_row = np.zeros(size, np.float32)
        seed_row[k] = 1.0
        tape.backward(grads={x: seed_row})
        out["row"], out["row_index"] = (r.grad.numpy(), theta.grad.numpy()), k
        out["tape"], out["inputs"] = tape, [r, theta]

        # A Python function in place of a kernel, only the theta -> lengths pair.
        out["function"] = gk.autograd.jacobian(segment_lengths, inputs=[r, theta],
                                               input_output_mask=[("theta", 0)])[(0, 1)]
        r64 = r_np.astype(np.float64)
        out["function_exact"] = central_differences(lambda t: segment_lengths_reference(r64, t),
                                                    theta_np.astype(np.float64))
        return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    parser.add_argument("--device", default=None, help="gradkit device (default: the current device)")
    parser.add_argument("--size", type=int, default=6)
    parser.add_argument("--plot", default=None, help="draw the Jacobians into this image (needs matplotlib)")
    args = parser.parse_args(argv)
    out = run(args.device, args.size)
    if args.image:
        args.plot = args.image
    if args.plot:
        gk.autograd.jacobian_plot(out["reverse"], polar_to_cartesian, inputs=out["inputs"], show_plot=False,
                                  title="polar_to_cartesian", filename=args.plot)
        print(f"Jacobians drawn in {args.plot}")
    names = {0: "x", 1: "y"}, {0: "r", 1: "theta"}
    worst = 0.0
    for key, exact in out["exact"].items():
        label = f"d{names[0][key[0]]}/d{names[1][key[1]]}"
        errs = {how: float(np.abs(out[how][key] - exact).max()) for how in ("reverse", "forward", "fd")}
        worst = max(worst, errs["reverse"], errs["forward"])
        print(f"{label:10s} max error: reverse {errs['reverse']:.1e}  forward {errs['forward']:.1e}  "
              f"finite differences {errs['fd']:.1e}")
    k = out["row_index"]
    print(f"row {k} of dx/d(r, theta) from a seeded tape: {out['row'][0][k]:.6f}, {out['row'][1][k]:.6f} "
          f"(exact {out['exact'][(0, 0)][k, k]:.6f}, {out['exact'][(0, 1)][k, k]:.6f})")
    function_error = float(np.abs(out["function"] - out["function_exact"]).max())
    print(f"d segment_lengths / d theta (a Python function) max error: {function_error:.1e}")
    print(f"gradcheck: {'passed' if out['gradcheck'] else 'FAILED'}")
    return 0 if out["gradcheck"] and worst < 1e-5 and function_error < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
