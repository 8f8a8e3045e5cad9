"""Compare, before: a spring's length written as sqrt(dot(d, d)) gets a NaN gradient when its two ends meet.

A weight hangs on a spring from an anchor; the training loop moves the anchor's height by gradient descent
so that the spring's energy is as low as possible. At one step the weight sits exactly on the anchor: d = 0,
and the chain rule multiplies the infinite derivative of sqrt at 0 by 2*d = 0, a NaN. The fixed script
(`spring_length_after.py`) writes the length as gk.length(d), whose gradient at the zero vector is 0; the
debugger's Compare view puts the two bundles side by side (`gradkit examples`, then Compare).

Run: python examples/spring_length_before.py [--device cpu|opencl|...]
Debug: gradkit debug examples/spring_length_before.py   (the NaN check stops it at the step where d = 0)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import gradkit as gk

REST = 0.5


@gk.kernel
def spring_energy(anchor: gk.array(dtype=gk.vec3), weight: gk.array(dtype=gk.vec3),
                  energy: gk.array(dtype=float)):
    d = weight[0] - anchor[0]
    stretch = gk.sqrt(gk.dot(d, d)) - REST        # the length, written out: NaN gradient at d = 0
    gk.atomic_add(energy, 0, stretch * stretch)


def train(device: str, steps: int = 4) -> list[np.ndarray]:
    """Anchor heights 2, 1, 0 (on the weight), -1: the gradient of the energy with respect to the anchor
    at each; returns the gradients (the third one is NaN here)."""
    weight = gk.array(np.zeros((1, 3), np.float32), dtype=gk.vec3, device=device, label="weight")
    grads = []
    for step in range(steps):
        anchor = gk.array(np.array([[0.0, 2.0 - step, 0.0]], np.float32), dtype=gk.vec3, device=device,
                          requires_grad=True, label="anchor")
        energy = gk.zeros(1, device=device, requires_grad=True, label="energy")
        with gk.Tape(params=[anchor]) as tape:
            gk.launch(spring_energy, 1, inputs=[anchor, weight], outputs=[energy], device=device)
        tape.backward(loss=energy)
        grads.append(anchor.grad.numpy()[0].astype(np.float64))
    return grads


def reference(height: float) -> np.ndarray:
    """d/d anchor of (|w - a| - REST)^2 in float64: -2 (|d| - REST) d / |d| with d = w - a (NaN at d = 0)."""
    d = np.array([0.0, -height, 0.0])
    n = np.linalg.norm(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        return -2.0 * (n - REST) * d / n


def render(out: dict, path: str) -> None:
    """The anchor's gradient at each height (NaN marked in red) (matplotlib, headless: the docs gallery's picture)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, a = plt.subplots(figsize=(6, 3.4))
    heights = [2.0 - step for step in range(len(out["grads"]))]
    g = np.array([gr[1] for gr in out["grads"]])
    a.bar(heights, np.where(np.isfinite(g), g, 0.0), 0.6)
    for h, v in zip(heights, g):
        if not np.isfinite(v):
            a.annotate("NaN", (h, 0), ha="center", va="bottom", color="red", fontsize=14)
    a.set(title="d energy / d anchor height", xlabel="anchor height (the weight sits at 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default=None, help="draw the result into this PNG (needs matplotlib)")
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)
    grads = train(args.device)
    if args.image:
        render({"grads": grads}, args.image)
    for step, g in enumerate(grads):
        want = reference(2.0 - step)
        ok = np.allclose(g, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        print(f"step {step}: anchor gradient {g} (float64 reference {want}){'' if ok else '  MISMATCH'}")
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
