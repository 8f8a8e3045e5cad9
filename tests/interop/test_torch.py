"""PyTorch interop on every device: gk.to_torch / gk.from_torch share memory with host-memory arrays (a
write through one side is read on the other) and copy otherwise, vector dtypes as trailing dimensions,
gradients carried; gk.torch_function passes torch.autograd.gradcheck in float64, composes with torch ops
and torch.no_grad; misuse is a clear error."""

import numpy as np
import pytest

import gradkit as gk

torch = pytest.importorskip("torch", reason="the PyTorch interop tests need torch (make test installs the CPU build)")


def _zero_copy(device) -> bool:
    """Whether the device's arrays can live in another library's memory (the cpu backend's can)."""
    return gk.get_device(device).backend == "cpu"


def test_to_torch_shares_or_copies(device, rng):
    x0 = rng.normal(size=(4, 3)).astype(np.float32)
    a = gk.array(x0, dtype=gk.vec3, device=device, requires_grad=True)
    a.grad.assign(np.ones((4, 3), np.float32))
    t = gk.to_torch(a)
    assert tuple(t.shape) == (4, 3) and t.dtype == torch.float32 and t.requires_grad
    np.testing.assert_array_equal(t.detach().numpy(), x0)
    np.testing.assert_array_equal(t.grad.numpy(), 1.0)
    with torch.no_grad():
        t[1, 2] = 42.0
    assert (a.numpy()[1, 2] == 42.0) == (a._host is not None)       # the same memory on host-memory devices
    assert not gk.to_torch(gk.zeros(2, device=device), requires_grad=False).requires_grad


def test_from_torch_shares_or_copies(device, rng):
    t = torch.from_numpy(rng.normal(size=(5, 3))).clone()             # float64, contiguous, torch-aligned
    a = gk.from_torch(t, dtype=gk.vec3d, device=device)
    assert a.shape == (5,) and a.dtype is gk.vec3d and a.device.name == device
    np.testing.assert_array_equal(a.numpy(), t.numpy())
    t[2, 1] = -7.0
    assert (a.numpy()[2, 1] == -7.0) == _zero_copy(device)
    odd = torch.arange(10, dtype=torch.float32)[1:]                   # misaligned: copied, still right
    b = gk.from_torch(odd, device=device)
    np.testing.assert_array_equal(b.numpy(), np.arange(1, 10, dtype=np.float32))
    g = torch.zeros(3, requires_grad=True)
    c = gk.from_torch(g, device=device)
    assert c.requires_grad and c.grad.shape == (3,)


@gk.kernel
def springs(p: gk.array(dtype=gk.vec3d), k: gk.array(dtype=gk.float64), e: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = p[i] - p[(i + 1) % p.shape[0]]
    e[i] = 0.5 * k[i] * (gk.length(d) - 1.0) ** 2 + gk.sin(k[i]) * d.x


def energy(p, k):
    e = gk.zeros(k.shape[0], dtype=gk.float64, device=k.device)
    gk.launch(springs, k.shape[0], inputs=[p, k], outputs=[e], device=k.device)
    return e


def test_torch_function_gradcheck(device, rng):
    f = gk.torch_function(energy, dtypes=[gk.vec3d, None], device=device)
    p = torch.from_numpy(rng.normal(size=(6, 3))).requires_grad_(True)
    k = torch.from_numpy(rng.uniform(0.5, 2.0, 6)).requires_grad_(True)
    assert torch.autograd.gradcheck(f, (p, k), eps=1e-6, atol=1e-7, rtol=1e-6)
    # composes with torch: a loss over the energies, gradients against float64 NumPy
    loss = (f(p, k) ** 2).sum()
    loss.backward()
    pn, kn = p.detach().numpy(), k.detach().numpy()
    d = pn - np.roll(pn, -1, 0)
    length = np.linalg.norm(d, axis=1)
    e = 0.5 * kn * (length - 1) ** 2 + np.sin(kn) * d[:, 0]
    np.testing.assert_allclose(k.grad.numpy(), 2 * e * (0.5 * (length - 1) ** 2 + np.cos(kn) * d[:, 0]), rtol=1e-10)
    with torch.no_grad():
        out = f(p, k)
    assert not out.requires_grad
    np.testing.assert_allclose(out.numpy(), e, rtol=1e-12)


def test_misuse_is_a_clear_error(device):
    with pytest.raises(TypeError, match=r"t: torch dtype torch.complex64 has no gradkit element type"):
        gk.from_torch(torch.zeros(3, dtype=torch.complex64), device=device)
    with pytest.raises(ValueError, match=r"t: an array of shape \(4, 2\) cannot hold vec3 elements"):
        gk.from_torch(torch.zeros(4, 2), dtype=gk.vec3, device=device)
    with pytest.raises(TypeError, match=r"a: gk.to_torch takes a gk.array"):
        gk.to_torch(np.zeros(3))
    f = gk.torch_function(lambda x: 3.0, device=device)
    with pytest.raises(TypeError, match=r"must return gk.arrays; its output 0 is float"):
        f(torch.zeros(2))


def test_torch_compile_breaks_the_graph_around_it(device, rng):
    """torch.compile cannot trace gradkit launches: the call is one graph break and runs eagerly; values
    and gradients stay right."""
    import torch._dynamo as dynamo
    f = gk.torch_function(energy, dtypes=[gk.vec3d, None], device=device)

    def loss(p, k):
        return (f(p * 1.5, k) ** 2).sum()

    p = torch.from_numpy(rng.normal(size=(5, 3))).requires_grad_(True)
    k = torch.from_numpy(rng.uniform(0.5, 2.0, 5)).requires_grad_(True)
    dynamo.reset()
    assert dynamo.explain(loss)(p, k).graph_break_count == 1
    compiled = torch.compile(loss)(p, k)
    compiled.backward()
    eager_p, eager_k = p.detach().clone().requires_grad_(True), k.detach().clone().requires_grad_(True)
    loss(eager_p, eager_k).backward()
    assert float(compiled) == pytest.approx(float(loss(p, k)), rel=1e-12)
    np.testing.assert_allclose(k.grad.numpy(), eager_k.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(p.grad.numpy(), eager_p.grad.numpy(), rtol=1e-12)
