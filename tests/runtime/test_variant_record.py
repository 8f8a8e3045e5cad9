"""Kernel variants as values (issue 38 item 1): one interned VariantKey per set of traits, chosen in one
place (runtime/launch/variants.py), recorded on every launch record and backward record, and a debug bundle holds
the generated code and pass log of the variant that ran — the gathered stencil adjoint, the consuming
adjoint — not only the plain adjoint's."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.ad.variants import FORWARD, VariantKey, variant_key


@gk.kernel
def blur(u: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    n = u.shape[0]
    if i >= 1 and i < n - 1:
        out[i] = u[i - 1] + 2.0 * u[i] + u[i + 1]
    else:
        out[i] = 4.0 * u[i]


@gk.kernel
def square_sum(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


def _blur_grad(g):
    """d(sum(g * blur(u)))/du, by hand: interior rows spread 1, 2, 1; the two ends 4."""
    n = len(g)
    out = np.zeros(n)
    for i in range(n):
        if 1 <= i < n - 1:
            out[i - 1] += g[i]
            out[i] += 2 * g[i]
            out[i + 1] += g[i]
        else:
            out[i] += 4 * g[i]
    return out


@pytest.mark.parametrize("name", ["forward", "forward_tangent", "adjoint", "adjoint_gather", "adjoint_consume",
                                  "adjoint_consume_shared_tangent", "adjoint_shared@u3,4"])
def test_names_and_keys_are_one_to_one(name):
    key = VariantKey.parse(name)
    assert key.name == name and VariantKey.parse(key.name) is key
    assert variant_key(key.adjoint, key.tangent, key.gather, key.shared, key.consume, key.seeds) is key
    assert VariantKey(key.adjoint, key.tangent, key.gather, key.shared, key.consume, key.seeds).interned() is key


@pytest.mark.parametrize("name", ["backward", "adjoint_tangent_consume", "forward_gather", "adjoint_gather_shared",
                                  "adjoint_tangent@u1", "adjoint@ux", "adjoint_shared_shared"])
def test_names_outside_the_declared_ones_are_refused(name):
    with pytest.raises(ValueError, match="variant"):
        VariantKey.parse(name)


def test_a_gathered_adjoint_is_recorded_and_bundled(tmp_path, device, rng):
    """On a backend that prefers gathers the stencil's adjoint gathers: the backward record, the launch row
    and the bundle's code and passes say so, and the stored code is that variant's."""
    n = 24
    u_np = rng.standard_normal(n).astype(np.float32)
    g_np = rng.standard_normal(n)
    u = gk.array(u_np, device=device, requires_grad=True, label="u")
    out = gk.zeros(n, device=device, requires_grad=True, label="out")
    with gk.viz.Capture() as cap:
        with gk.Tape() as tape:
            gk.launch(blur, n, inputs=[u], outputs=[out], device=device)
        tape.backward(grads={out: gk.array(g_np.astype(np.float32), device=device)})
    np.testing.assert_allclose(u.grad.numpy(), _blur_grad(g_np), rtol=1e-5, atol=1e-5)
    dev = gk.get_device(device)
    want = "adjoint_gather" if dev.impl.prefers_gather else "adjoint"
    assert tape.launches[0].variant == "forward"
    assert tape.backward_records[0].variant == want
    bundle = gk.viz.load_bundle(cap.save(tmp_path / "blur"))
    assert bundle.manifest["launches"][0]["variant"] == "forward"
    assert bundle.manifest["backward"][0]["variant"] == want
    meta = bundle.manifest["kernels"]["blur"]
    assert meta["code"][dev.name][want] == blur.source(device, variant=want)
    assert want in meta["passes"]
    if want == "adjoint_gather":
        assert "gather" in [name.split(" ")[0] for name, _ in meta["passes"][want]]
    from gradkit.app import data
    rows = data.launch_rows(bundle)
    assert [r["variant"] for r in rows] == ["forward", want]


def test_a_consuming_adjoint_is_recorded(device, rng):
    """An array overwritten by a second launch: the first writer's adjoint consumes (ad/consume.py), and
    the record says which adjoint ran, with or without snapshots (the prepared fast path included)."""
    n = 16
    x_np = rng.standard_normal(n).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.zeros(n, device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(blur, n, inputs=[x], outputs=[y], device=device)      # y = blur(x)
        gk.launch(blur, n, inputs=[x], outputs=[y], device=device)      # overwritten with the same value
        gk.launch(square_sum, n, inputs=[y], outputs=[loss], device=device)
    tape.backward(loss=loss)
    y_np = np.array([4 * x_np[0], *(x_np[:-2] + 2 * x_np[1:-1] + x_np[2:]), 4 * x_np[-1]], np.float64)
    # the first write of y is overwritten before anything reads it: only the second one reaches the loss
    np.testing.assert_allclose(x.grad.numpy(), _blur_grad(2 * y_np), rtol=1e-4, atol=1e-4)
    variants = [rec.adjoint_variant for rec in tape.launches]
    # backward runs the records last to first: the second write consumes (the first one used that memory)
    assert variants[1] == "adjoint_consume" and variants[0] in ("adjoint", "adjoint_gather")
    assert variants[2] == "adjoint@u3"      # the loss's seed 1 folded into it (runtime/tape/seeds.py)


def test_the_hot_path_compares_keys_by_identity(device):
    """Kernel.specialization keys its last answer on the key object: a name or a copy finds the same one."""
    dev = gk.get_device(device)
    spec = blur.specialization(dev, FORWARD)
    assert blur.specialization(dev, "forward") is spec
    assert blur.specialization(dev, VariantKey()) is spec
    assert spec.variant is FORWARD
