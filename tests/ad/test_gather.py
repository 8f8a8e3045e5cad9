"""Stencil adjoints as gathers (ad/gather.py): the gradient of shifted reads is gathered by each thread instead
of scattered with atomic adds. Checked against NumPy float64 transposes of the stencils and central
differences, on every device, through gk.launch(adjoint=True) and Tape.backward; kernels out of its scope
(loops, grids smaller than the array, atomics whose old value is read) keep the scatter adjoint."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.ops import Op
from gradkit.runtime.launch.variants import choose_variant


@gk.kernel
def smooth1d(u: gk.array(dtype=float), w: float, out: gk.array(dtype=float)):
    i = gk.tid()
    n = u.shape[0]
    if i >= 2 and i < n - 2:
        out[i] = u[i] + w * (u[i - 1] + u[i + 1]) + 0.5 * w * (u[i - 2] - u[i + 2]) * u[i]
    else:
        out[i] = 2.0 * u[i]


def _smooth1d_grad(u, w, g):
    """d(sum g * out)/du for smooth1d, in float64."""
    n = len(u)
    r = np.zeros(n)
    inner = np.arange(n)
    inner = (inner >= 2) & (inner < n - 2)
    gi = np.where(inner, g, 0.0)
    r += np.where(inner, 0.0, 2.0 * g)
    r += gi * (1.0 + 0.5 * w * (np.roll(u, 2) - np.roll(u, -2)))
    r[:-1] += w * gi[1:]                      # u[i - 1] read by thread i: adds to element i - 1
    r[1:] += w * gi[:-1]
    r[:-2] += 0.5 * w * (gi * u)[2:]          # u[i - 2]
    r[2:] -= 0.5 * w * (gi * u)[:-2]          # u[i + 2]
    return r


@gk.kernel
def heat(u: gk.array(dtype=float, ndim=2), out: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i == 0 or j == 0 or i == n - 1 or j == m - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = u[i, j] + 0.2 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


def _heat_grad(g):
    n, m = g.shape
    inner = np.zeros((n, m), bool)
    inner[1:-1, 1:-1] = True
    gi = np.where(inner, g, 0.0)
    r = np.where(inner, 0.2 * g, g)
    r[:-1, :] += 0.2 * gi[1:, :]
    r[1:, :] += 0.2 * gi[:-1, :]
    r[:, :-1] += 0.2 * gi[:, 1:]
    r[:, 1:] += 0.2 * gi[:, :-1]
    return r


@pytest.fixture(params=[True, False], ids=["gather", "scatter"])
def gather(request, device, monkeypatch) -> bool:
    """Both adjoints on every device: the device's backend told to prefer gathers, or scatters."""
    monkeypatch.setattr(gk.get_device(device).impl, "prefers_gather", request.param)
    return request.param


def _atomics(kernel, variant):
    return [i for i in kernel.lowered(variant).walk() if i.op == Op.ATOMIC]


def test_the_gathered_adjoint_has_no_shared_atomics():
    assert heat.gather_sources() == (0,) and smooth1d.gather_sources() == (0,)
    for k in (heat, smooth1d):
        assert any(not a.attrs["exclusive"] for a in _atomics(k, "adjoint"))
        assert all(a.attrs["exclusive"] for a in _atomics(k, "adjoint_gather"))
        assert len(_atomics(k, "adjoint_gather")) == 1          # summed in registers, added once
    assert len(_atomics(vec_stencil, "adjoint_gather")) == 3     # p's two components and q


def test_1d_stencil_gradient(device, gather, rng):
    n, w = 257, 0.3
    u_np = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    u = gk.array(u_np, device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    gk.launch(smooth1d, n, [u, w], [out], device=device)
    out.grad.assign(gk.array(g, device=device))
    gk.launch(smooth1d, n, [u, w], [out], device=device, adjoint=True)
    np.testing.assert_allclose(u.grad.numpy(), _smooth1d_grad(u_np.astype(np.float64), w, g.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)
    small = gk.array(u_np[:12], device=device, requires_grad=True)
    assert gk.autograd.gradcheck(smooth1d, 12, [small, w], [gk.zeros(12, device=device, requires_grad=True)],
                                 eps=1e-3, atol=1e-2, rtol=1e-2, device=device)


def test_2d_heat_gradient_on_a_tape(device, gather, rng):
    """Tape.backward's prepared adjoints take the gathered variant too; three steps chained."""
    n, m = 33, 20
    u0_np = rng.random((n, m)).astype(np.float32)
    states = [gk.array(u0_np, device=device, requires_grad=True)]
    tape = gk.Tape()
    with tape:
        for _ in range(3):
            states.append(gk.zeros((n, m), device=device, requires_grad=True))
            gk.launch(heat, (n, m), [states[-2]], [states[-1]], device=device)
    g = rng.standard_normal((n, m))
    for _ in range(2):                                    # a second pass replays the prepared adjoints
        tape.zero()
        tape.backward(grads={states[-1]: gk.array(g.astype(np.float32), device=device)})
        ref = _heat_grad(_heat_grad(_heat_grad(g)))
        np.testing.assert_allclose(states[0].grad.numpy(), ref, rtol=1e-5, atol=1e-5)
    prepared = [rec.prepared for rec in tape.launches]
    assert all(p is not None and ("gather_sources" in p.spec.fn.attrs) == gather for p in prepared)


def test_a_grid_smaller_than_the_array_keeps_the_scatter(device, gather, rng):
    """Launched over the first half of a longer array, thread i - 1 may not exist where element i does: the
    gather would miss adds, so the launch takes the scatter adjoint (and its gradient is right)."""
    n, w = 40, 0.5
    u_np = rng.standard_normal(n).astype(np.float32)
    u = gk.array(u_np, device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    dev = gk.get_device(device)
    bound = smooth1d.binder()([u, w, out], dev)
    assert choose_variant(smooth1d, bound, (20,), dev, adjoint=True).name == "adjoint"
    assert choose_variant(smooth1d, bound, (40,), dev, adjoint=True).name == ("adjoint_gather" if gather else "adjoint")
    g = rng.standard_normal(n).astype(np.float32)
    out.grad.assign(gk.array(g, device=device))
    gk.launch(smooth1d, 20, [u, w], [out], device=device, adjoint=True)
    # thread i < 20 with n = 40: inner when 2 <= i < 38, so every thread below 20 but 0 and 1 is inner
    ref = np.zeros(n)
    u64, g64 = u_np.astype(np.float64), g.astype(np.float64)
    for i in range(20):
        if 2 <= i < n - 2:
            ref[i] += g64[i] * (1 + 0.5 * w * (u64[i - 2] - u64[i + 2]))
            ref[i - 1] += w * g64[i]
            ref[i + 1] += w * g64[i]
            ref[i - 2] += 0.5 * w * g64[i] * u64[i]
            ref[i + 2] -= 0.5 * w * g64[i] * u64[i]
        else:
            ref[i] += 2 * g64[i]
    np.testing.assert_allclose(u.grad.numpy(), ref, rtol=1e-5, atol=1e-5)


@gk.kernel
def vec_stencil(p: gk.array(dtype=gk.vec2), q: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    n = p.shape[0]
    if i > 0 and i < n - 1:
        d = p[i + 1] - p[i - 1]
        out[i] = gk.dot(d, d) * q[i - 1]
    else:
        out[i] = q[i]


def test_vector_stencil_and_two_gathered_arrays(device, gather, rng):
    n = 24
    p = gk.array(rng.standard_normal((n, 2)).astype(np.float32), dtype=gk.vec2, device=device, requires_grad=True)
    q = gk.array(rng.standard_normal(n).astype(np.float32), device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    assert vec_stencil.gather_sources() == (0, 1)
    assert gk.autograd.gradcheck(vec_stencil, n, [p, q], [out], eps=1e-3, atol=2e-2, rtol=2e-2, device=device)
    fwd = gk.autograd.jacobian_fwd(vec_stencil, n, [p, q], [out], device=device)
    rev = gk.autograd.jacobian(vec_stencil, n, [p, q], [out], device=device)
    for key in rev:
        np.testing.assert_allclose(rev[key], fwd[key], rtol=1e-5, atol=1e-5)


@gk.kernel
def with_loop(u: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    s = float(0.0)
    for k in range(2):
        s += u[gk.max(i - k, 0)]
    out[i] = s


@gk.kernel
def own_only(u: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.sin(u[i])


def test_out_of_scope_kernels_keep_the_scatter():
    assert with_loop.gather_sources() == ()          # loops: not gathered
    assert own_only.gather_sources() == ()           # no shifted read: nothing to gather


@pytest.mark.parametrize("shape", [(700, 300), (8, 40000)], ids=["chunks-with-middles", "margins-cover-chunks"])
def test_large_stencil_adjoints_split_across_workers(device, gather, rng, shape):
    """Past the inline size the cpu backend runs chunks on several workers: threads near a chunk's ends add
    with atomics, the middle without (backends/analysis.py local_scatters); where the margins cover whole
    chunks (rows of 40000) every thread takes the atomic entry. Either way the gradient is the transpose."""
    u = gk.array(rng.random(shape).astype(np.float32), device=device, requires_grad=True)
    out = gk.zeros(shape, device=device, requires_grad=True)
    gk.launch(heat, shape, [u], [out], device=device)
    g = rng.standard_normal(shape)
    out.grad.assign(gk.array(g.astype(np.float32), device=device))
    gk.launch(heat, shape, [u], [out], device=device, adjoint=True)
    np.testing.assert_allclose(u.grad.numpy(), _heat_grad(g), rtol=1e-5, atol=1e-5)
    if device == "cpu" and not gather:
        spec = heat.specialization(gk.get_device(device), "adjoint")
        assert spec.compiled.entry_local is not None and spec.compiled.private == []


def test_local_margin():
    from gradkit.backends.analysis import local_margin
    assert local_margin([(1, 0), (-1, 0), (0, 1), (0, -1), (0, 0)], (1024, 1024)) == 2 * 1024
    assert local_margin([(2,), (-1,)], (100,)) == 4
    assert local_margin([(0, 0, 1), (1, -1, 0)], (4, 5, 6)) == 2 * (30 - 6)


@gk.kernel
def spread(x: gk.array(dtype=float), a: gk.array(dtype=float)):
    i = gk.tid()
    n = x.shape[0]
    if i + 3 < n and i >= 2:
        gk.atomic_add(a, i + 3, x[i])
        gk.atomic_sub(a, i - 2, 0.5 * x[i])
    gk.atomic_add(a, i, x[i] * x[i])


@pytest.mark.parametrize("n", [1000, 300_001])
def test_forward_shifted_scatter(device, rng, n):
    """A forward kernel's own shifted atomic adds take the same split (and the inline path) on cpu."""
    x_np = rng.standard_normal(n).astype(np.float32)
    x = gk.array(x_np, device=device)
    a = gk.zeros(n, device=device)
    gk.launch(spread, n, [x], [a], device=device)
    x64 = x_np.astype(np.float64)
    ref = x64 * x64
    i = np.arange(2, n - 3)
    np.add.at(ref, i + 3, x64[i])
    np.add.at(ref, i - 2, -0.5 * x64[i])
    np.testing.assert_allclose(a.numpy(), ref, rtol=1e-5, atol=1e-5)


@gk.kernel
def vshift(u: gk.array(dtype=gk.vec3), out: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    if i > 0:
        out[i][0] = u[i].x + 0.5 * u[i - 1].y
        out[i][2] = u[i].z * u[i - 1].x
    else:
        out[i][0] = u[i].x


def test_a_replay_never_reads_what_the_kernel_writes(device, gather, rng):
    """Writes of parts of out's elements make the adjoint read out.grad and zero what it read: a replay of
    thread i - 1 by thread i could read it zeroed (the numpy device, running threads in order, always did:
    the gradient came out 0), so this adjoint is not gathered."""
    assert vshift.gather_sources() == ()
    n = 16
    u = gk.array(rng.standard_normal((n, 3)).astype(np.float32), dtype=gk.vec3, device=device, requires_grad=True)
    out = gk.zeros(n, dtype=gk.vec3, device=device, requires_grad=True)
    assert gk.autograd.gradcheck(vshift, n, [u], [out], eps=1e-3, atol=1e-2, rtol=1e-2, device=device)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 31, 1025])
def test_1d_gather_at_every_size_around_its_margins(device, gather, rng, n):
    """smooth1d replays threads up to 2 away: grids shorter than, equal to and just past both margins
    (the CPU backend runs the interior threads in a loop of their own) match the float64 transpose."""
    w = 0.7
    u_np = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    u = gk.array(u_np, device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    gk.launch(smooth1d, n, [u, w], [out], device=device, adjoint=True, adj_outputs=[gk.array(g, device=device)])
    np.testing.assert_allclose(u.grad.numpy(), _smooth1d_grad(u_np.astype(np.float64), w, g.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (2, 2), (3, 3), (5, 2), (2, 40), (67, 129)])
def test_2d_gather_on_narrow_and_odd_grids(device, gather, rng, shape):
    """heat's gathered adjoint on grids narrower than its margins on either axis, and odd sizes whose rows
    the workers' chunks split mid-row."""
    g = rng.standard_normal(shape)
    u = gk.array(rng.random(shape).astype(np.float32), device=device, requires_grad=True)
    out = gk.zeros(shape, device=device, requires_grad=True)
    gk.launch(heat, shape, [u], [out], device=device, adjoint=True,
              adj_outputs=[gk.array(g.astype(np.float32), device=device)])
    np.testing.assert_allclose(u.grad.numpy(), _heat_grad(g), rtol=1e-5, atol=1e-5)


@gk.kernel
def shifted_and_max(v: gk.array(dtype=gk.vec3), top: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.sin(v[i - 1][0] if i >= 1 else v[i][0])
    gk.atomic_max(top, 0, v[i][1])


def test_a_replay_leaves_out_writes_whose_results_the_kernel_uses(device, gather, rng):
    """The adjoint of atomic_max exchanges top's gradient and adds what it took to v's; a replay performs
    neither, yet its copy of the code around them must stay well formed (it was not: the gathered variant
    failed to build, found by the fuzzer's stencil reads)."""
    n = 40
    v_np = rng.uniform(0.5, 1.0, (n, 3)).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    v = gk.array(v_np, dtype=gk.vec3, device=device, requires_grad=True)
    top = gk.zeros(1, device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(shifted_and_max, n, [v, top], [out], device=device)
    tape.backward(grads={out: gk.array(g, device=device), top: gk.array([2.0], device=device)})
    assert ("gather_sources" in tape.launches[0].prepared.spec.fn.attrs) == gather
    x = v_np.astype(np.float64)
    ref = np.zeros((n, 3))
    ref[:-1, 0] += g[1:] * np.cos(x[:-1, 0])
    ref[0, 0] += g[0] * np.cos(x[0, 0])
    ref[np.argmax(x[:, 1]), 1] = 2.0
    np.testing.assert_allclose(v.grad.numpy(), ref, rtol=1e-5, atol=1e-6)
