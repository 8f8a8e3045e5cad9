"""A training run that converges is not a vanishing-gradient alarm (issue 41: no false alarm on a shipped
example): a gradient below the vanishing threshold at the last pass, after it was above it earlier while
the loss was higher, is 'converging'; the same small gradient in a run that never had a larger one stays
'vanishing'."""

from __future__ import annotations

import numpy as np

import gradkit as gk
from gradkit.app import data, flow_data, overview_data


@gk.kernel
def squared_distance(x: gk.array(dtype=gk.float64), target: gk.array(dtype=gk.float64),
                     scale: float, loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = x[i] - target[i]
    gk.atomic_add(loss, 0, gk.float64(scale) * d * d)


def _train(tmp_path, device, rng, scale: float, iters: int, lr: float):
    """Gradient descent on scale * |x - target|^2 under a Capture; each pass's gradient is checked against
    the float64 reference 2 * scale * (x - target)."""
    target_np = rng.normal(size=5)
    x = gk.array(rng.normal(size=5), dtype=gk.float64, device=device, requires_grad=True, label="x")
    target = gk.array(target_np, dtype=gk.float64, device=device, label="target")
    with gk.viz.Capture() as cap:
        for _ in range(iters):
            loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True, label="loss")
            tape = gk.Tape(params=[x])
            with tape:
                gk.launch(squared_distance, 5, inputs=[x, target, scale], outputs=[loss], device=device)
            tape.backward(loss=loss)
            before = x.numpy().copy()
            ref = 2.0 * float(np.float32(scale)) * (before - target_np)        # the scalar is a float32
            np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-10, atol=1e-300)
            x.assign(before - lr * x.grad.numpy())
            tape.zero()
    return data.open_bundle(cap.save(tmp_path / "run"))


def test_a_converged_training_is_converging_not_vanishing(tmp_path, device, rng):
    b = _train(tmp_path, device, rng, scale=1.0, iters=11, lr=0.45)        # |x - t| shrinks 10x a step
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(b)}
    assert flags["x"] == "converging"
    assert overview_data.bundle_status(b)["status"] == "ok"


def test_a_gradient_small_from_the_start_is_still_vanishing(tmp_path, device, rng):
    b = _train(tmp_path, device, rng, scale=1e-12, iters=3, lr=0.4)        # tiny and never larger
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(b)}
    assert flags["x"] == "vanishing"
    assert overview_data.bundle_status(b)["status"] == "alarms"
