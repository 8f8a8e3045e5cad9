"""PyTorch interop on every device: gk.to_torch / gk.from_torch share memory with host-memory arrays (a
write through one side is read on the other) and copy otherwise, vector dtypes as trailing dimensions,
gradients carried; gk.torch_function passes torch.autograd.gradcheck in float64, composes with torch ops
and torch.no_grad; misuse is a clear error."""

import numpy as np
import pytest

import gradkit as gk

torch = pytest.importorskip("torch", reason="the PyTorch interop tests need torch (make test installs the CPU build)")


def _zero_copy(device) -> bool:
    """Whether the device's arrays can live in another library's memory (its backend adopts host memory,
    as the cpu and c backends do)."""
    dev = gk.get_device(device)
    return dev.impl.adopt_host(dev.info, torch.zeros(16).numpy()) is not None


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


def test_from_torch_follows_gk_array_value_rules(device):
    """A value that does not fit the element type is a ValueError naming `t`, as in gk.array (issue 37): it
    stored 0 for 2**40 as int32 and inf for 1e40 as float32."""
    with pytest.raises(ValueError, match=r"t: 1099511627776 at index 1 does not fit int32"):
        gk.from_torch(torch.tensor([1, 2**40]), dtype=gk.int32, device=device)
    with pytest.raises(ValueError, match=r"t: 1e\+40 at index 0 does not fit float32"):
        gk.from_torch(torch.tensor([1e40, 1.0], dtype=torch.float64), dtype=gk.float32, device=device)
    with pytest.raises(ValueError, match=r"t: -1 at index 0 does not fit uint32"):
        gk.from_torch(torch.tensor([-1, 3]), dtype=gk.uint32, device=device)
    with pytest.raises(TypeError, match=r"t: a torch torch.bfloat16 tensor has no NumPy equivalent"):
        gk.from_torch(torch.ones(3, dtype=torch.bfloat16), dtype=gk.float32, device=device)
    ok = gk.from_torch(torch.tensor([1.5, -2.0], dtype=torch.float64), dtype=gk.float32, device=device)
    assert ok.dtype is gk.float32 and list(ok.numpy()) == [1.5, -2.0]


def test_from_torch_ranks_follow_gk_array(device):
    """1 to 4 dimensions besides a vector/matrix dtype's; a 0-d tensor is a one-element array (as gk.array
    makes of a scalar), the same memory on cpu. A 0-d or 6-d tensor became a 0-d/6-d gk.array that failed
    later."""
    with pytest.raises(ValueError, match=r"t: gk.array supports 1 to 4 dimensions, t has 6"):
        gk.from_torch(torch.zeros((1,) * 6), device=device)
    with pytest.raises(ValueError, match=r"t: gk.array supports 1 to 4 dimensions, t has 5 besides the vec3"):
        gk.from_torch(torch.zeros((1,) * 5 + (3,)), dtype=gk.vec3, device=device)
    t = torch.tensor(2.5)
    a = gk.from_torch(t, device=device)
    assert a.shape == (1,) and a.numpy()[0] == 2.5
    t.fill_(4.0)
    assert (a.numpy()[0] == 4.0) == _zero_copy(device)
    v = gk.from_torch(torch.tensor([1.0, 2.0, 3.0]), dtype=gk.vec3, device=device)
    assert v.shape == (1,) and list(v.numpy()[0]) == [1.0, 2.0, 3.0]


def test_uint32_both_ways(device):
    """torch.uint32 tensors become uint32 arrays (refused before); a uint32 array comes back as an int64
    copy with its values (torch's uint32 lacks +, comparisons and max on CPU), as documented."""
    t = torch.tensor([0, 7, 2**32 - 1], dtype=torch.uint32)
    a = gk.from_torch(t, device=device)
    assert a.dtype is gk.uint32 and list(a.numpy()) == [0, 7, 2**32 - 1]
    back = gk.to_torch(a)
    assert back.dtype == torch.int64 and back.tolist() == [0, 7, 2**32 - 1]
    back[0] = 5
    assert a.numpy()[0] == 0                                  # a copy, as to_torch's docstring says


def test_torch_function_takes_0d_tensors(device):
    """A 0-d tensor argument (a scalar parameter) is a one-element array inside, its gradient 0-d again."""
    def scale(x, s):
        y = gk.zeros(x.shape[0], dtype=gk.float64, device=x.device)
        gk.launch(scale_kernel, x.shape[0], inputs=[x, s], outputs=[y], device=x.device)
        return y

    f = gk.torch_function(scale, device=device)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    f(x, s).sum().backward()
    assert s.grad.shape == () and float(s.grad) == pytest.approx(6.0)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


@gk.kernel
def scale_kernel(x: gk.array(dtype=gk.float64), s: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * s[0]
