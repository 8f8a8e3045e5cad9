"""Atomic adds onto a work-group-uniform element (backends/opencl/uniform.py, aggregate.py): summed across
the work-group before one global atomic where the IR proves every work-item adds there together (W3's
adjoint), plain atomics elsewhere (divergent control flow, per-thread indices, arrays also read).

Values and gradients are compared against float64 NumPy on random inputs, on every device; launch sizes
are not multiples of any work-group size, so the partial last group (plain atomics) is covered too.
Whether a site was aggregated is read from the OpenCL source on the OpenCL devices. Float tolerances:
the rigorous bound of a recursive float32 sum, (terms + 10) * eps32 * sum|term| per element, which a
lost or doubled contribution exceeds.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from nbody_helpers import pair_sum as pair_energy     # W3's kernel

OPENCL = [d.name for d in gk.get_devices() if d.backend == "opencl"]
MARK = "work-group-uniform element"      # the comment aggregate.py writes above each aggregated run
EPS32 = float(np.finfo(np.float32).eps)


@gk.kernel
def project(x: gk.array(dtype=float), w: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    acc = 0.0
    for j in range(w.shape[0]):
        acc += gk.sin(w[j] * x[i])
    y[i] = acc


@gk.kernel
def project_mixed(x: gk.array(dtype=gk.float64), w: gk.array(dtype=float), v: gk.array(dtype=float),
                  w64: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    """float64 and float32 adds onto uniform elements in one kernel (a queue per element type), the float32
    queue serving two arrays."""
    i = gk.tid()
    acc = gk.float64(0.0)
    for j in range(w.shape[0]):
        acc += gk.sin(gk.float64(w[j]) * x[i]) + w64[j] * x[i] + gk.float64(v[j] * v[j])
    y[i] = acc


@gk.kernel
def project_masked(x: gk.array(dtype=float), w: gk.array(dtype=float), y: gk.array(dtype=float)):
    """Divergent: only threads with x[i] > 0 run the loop."""
    i = gk.tid()
    acc = 0.0
    if x[i] > 0.0:
        for j in range(w.shape[0]):
            acc += gk.sin(w[j] * x[i])
    y[i] = acc


@gk.kernel
def project_short(x: gk.array(dtype=float), w: gk.array(dtype=float), y: gk.array(dtype=float)):
    """Divergent: each thread's trip count depends on its id."""
    i = gk.tid()
    acc = 0.0
    for j in range(i % w.shape[0]):
        acc += gk.sin(w[j] * x[i])
    y[i] = acc


@gk.kernel
def project_rotated(x: gk.array(dtype=float), w: gk.array(dtype=float), y: gk.array(dtype=float)):
    """Per-thread index: thread i reads w[(i + j) % m]."""
    i = gk.tid()
    m = w.shape[0]
    acc = 0.0
    for j in range(m):
        acc += gk.sin(w[(i + j) % m] * x[i])
    y[i] = acc


@gk.kernel
def add_to_slot(x: gk.array(dtype=float), k: int, out: gk.array(dtype=float)):
    """Forward atomics at a scalar argument's index, one under a uniform condition, one subtracting."""
    i = gk.tid()
    gk.atomic_add(out, k, x[i])
    if k > 0:
        gk.atomic_sub(out, k - 1, 2.0 * x[i] * x[i])


@gk.kernel
def add_and_read(x: gk.array(dtype=float), k: int, out: gk.array(dtype=float), seen: gk.array(dtype=float)):
    """The target array is also read: its adds must stay plain atomics."""
    i = gk.tid()
    gk.atomic_add(out, k, x[i])
    seen[i] = out[k + 1]


def aggregated_runs(kernel, device: str, adjoint: bool) -> int:
    return kernel.source(device, adjoint=adjoint).count(MARK)


def within_sum_bound(got: np.ndarray, ref: np.ndarray, sum_abs: np.ndarray, terms: int) -> None:
    bound = (terms + 10) * EPS32 * sum_abs + 1e-30
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= bound), f"worst error {np.max(err / bound):.2f}x the float32 sum bound"


# --------------------------------------------------------------------------- references (float64)

def pair_energy_grad(x: np.ndarray, seed: float):
    """dU/dx and the per-element sum of |terms| for U = sum_ij -1/sqrt(|xi - xj|^2 + 1e-3)."""
    x = x.astype(np.float64)
    d = x[:, None, :] - x[None, :, :]
    r2 = (d * d).sum(-1) + 1.0e-3
    t = seed * (r2 ** -1.5)[..., None] * d            # d/dxi of term (i, j); d/dxj is its negative
    grad = t.sum(1) - t.sum(0)
    return grad, np.abs(t).sum(1) + np.abs(t).sum(0)


def project_grads(x, w, gy, active):
    """Gradients of y[i] = sum over active (i, j) of sin(w[j] x[i]); `active` is an (n, m) mask."""
    x, w, gy = (a.astype(np.float64) for a in (x, w, gy))
    c = np.cos(w[None, :] * x[:, None]) * active
    tw = gy[:, None] * c * x[:, None]
    tx = gy[:, None] * c * w[None, :]
    return tx.sum(1), np.abs(tx).sum(1), tw.sum(0), np.abs(tw).sum(0)


# --------------------------------------------------------------------------- gradients on every device

@pytest.mark.parametrize("n", [64 * 3, 203])
def test_pair_energy_gradient(device, rng, n):
    xs = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    x = gk.array(xs, dtype=gk.vec2, device=device)
    U = gk.zeros(1, device=device)
    gx = gk.zeros(n, dtype=gk.vec2, device=device)
    seed = 0.75
    gU = gk.array(np.array([seed], np.float32), device=device)
    gk.launch(pair_energy, n, inputs=[x], outputs=[U], adjoint=True, adj_inputs=[gx], adj_outputs=[gU])
    ref, sum_abs = pair_energy_grad(xs, seed)
    within_sum_bound(gx.numpy(), ref, sum_abs, 2 * n)


KERNELS = {"uniform": (project, lambda n, m: np.ones((n, m))),
           "masked": (project_masked, None),
           "short": (project_short, lambda n, m: np.arange(m)[None, :] < (np.arange(n) % m)[:, None])}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_project_gradients(device, rng, name):
    kernel, mask = KERNELS[name]
    n, m = 1000, 37
    xs = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    ws = rng.uniform(-2.0, 2.0, m).astype(np.float32)
    gys = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    active = mask(n, m) if mask is not None else np.broadcast_to((xs > 0)[:, None], (n, m))
    x, w = gk.array(xs, device=device), gk.array(ws, device=device)
    y, gy = gk.zeros(n, device=device), gk.array(gys, device=device)
    gx, gw = gk.zeros(n, device=device), gk.zeros(m, device=device)
    gk.launch(kernel, n, inputs=[x, w], outputs=[y], adjoint=True, adj_inputs=[gx, gw], adj_outputs=[gy])
    rx, ax, rw, aw = project_grads(xs, ws, gys, active)
    within_sum_bound(gx.numpy(), rx, ax, m)
    within_sum_bound(gw.numpy(), rw, aw, n)


def test_chunked_launch_gradient(device, rng):
    """A launch the OpenCL backend enqueues in chunks at growing global offsets (over 2^14 threads with a
    loop): each chunk's groups are full except the very last one."""
    n, m = (1 << 15) + 101, 5
    xs = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    ws = rng.uniform(-2.0, 2.0, m).astype(np.float32)
    gys = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    x, w = gk.array(xs, device=device), gk.array(ws, device=device)
    y, gy = gk.zeros(n, device=device), gk.array(gys, device=device)
    gx, gw = gk.zeros(n, device=device), gk.zeros(m, device=device)
    gk.launch(project, n, inputs=[x, w], outputs=[y], adjoint=True, adj_inputs=[gx, gw], adj_outputs=[gy])
    rx, ax, rw, aw = project_grads(xs, ws, gys, np.ones((n, m)))
    within_sum_bound(gx.numpy(), rx, ax, m)
    within_sum_bound(gw.numpy(), rw, aw, n)


def test_rotated_index_gradient(device, rng):
    n, m = 777, 19
    xs = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    ws = rng.uniform(-2.0, 2.0, m).astype(np.float32)
    gys = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    x, w = gk.array(xs, device=device), gk.array(ws, device=device)
    y, gy = gk.zeros(n, device=device), gk.array(gys, device=device)
    gx, gw = gk.zeros(n, device=device), gk.zeros(m, device=device)
    gk.launch(project_rotated, n, inputs=[x, w], outputs=[y], adjoint=True, adj_inputs=[gx, gw],
              adj_outputs=[gy])
    idx = (np.arange(n)[:, None] + np.arange(m)[None, :]) % m
    wr = ws.astype(np.float64)[idx]
    c = np.cos(wr * xs.astype(np.float64)[:, None]) * gys.astype(np.float64)[:, None]
    tw = c * xs.astype(np.float64)[:, None]
    rw, aw = np.zeros(m), np.zeros(m)
    np.add.at(rw, idx, tw)
    np.add.at(aw, idx, np.abs(tw))
    within_sum_bound(gw.numpy(), rw, aw, n)
    within_sum_bound(gx.numpy(), (c * wr).sum(1), np.abs(c * wr).sum(1), m)


@pytest.mark.parametrize("k", [0, 3])
def test_scalar_index_forward(device, rng, k):
    n = 3001
    xs = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    base = rng.uniform(-1.0, 1.0, 5).astype(np.float32)
    out = gk.array(base.copy(), device=device)
    gk.launch(add_to_slot, n, inputs=[gk.array(xs, device=device), k], outputs=[out])
    x64 = xs.astype(np.float64)
    ref, sum_abs = base.astype(np.float64), np.abs(base).astype(np.float64)
    ref[k] += x64.sum()
    sum_abs[k] += np.abs(x64).sum()
    if k > 0:
        ref[k - 1] -= (2 * x64 * x64).sum()
        sum_abs[k - 1] += (2 * x64 * x64).sum()
    within_sum_bound(out.numpy(), ref, sum_abs, n + 1)


def test_read_target_keeps_atomics(device, rng):
    n = 515
    xs = rng.uniform(0.5, 1.0, n).astype(np.float32)
    out, seen = gk.zeros(3, device=device), gk.zeros(n, device=device)
    gk.launch(add_and_read, n, inputs=[gk.array(xs, device=device), 1], outputs=[out, seen])
    within_sum_bound(out.numpy(), np.array([0.0, xs.astype(np.float64).sum(), 0.0]),
                     np.array([0.0, xs.astype(np.float64).sum(), 0.0]), n)
    np.testing.assert_array_equal(seen.numpy(), 0.0)     # out[2]: nobody adds there


def test_mixed_float64_float32_gradients(device, rng):
    n, m = 531, 23
    xs = rng.uniform(-2.0, 2.0, n)
    ws = rng.uniform(-2.0, 2.0, m).astype(np.float32)
    w64s = rng.uniform(-2.0, 2.0, m)
    gys = rng.uniform(-1.0, 1.0, n)
    vs = rng.uniform(-2.0, 2.0, m).astype(np.float32)
    x, w, w64 = gk.array(xs, device=device), gk.array(ws, device=device), gk.array(w64s, device=device)
    v = gk.array(vs, device=device)
    y, gy = gk.zeros(n, dtype=gk.float64, device=device), gk.array(gys, device=device)
    gx, gw, gv, gw64 = (gk.zeros(n, dtype=gk.float64, device=device), gk.zeros(m, device=device),
                        gk.zeros(m, device=device), gk.zeros(m, dtype=gk.float64, device=device))
    gk.launch(project_mixed, n, inputs=[x, w, v, w64], outputs=[y], adjoint=True,
              adj_inputs=[gx, gw, gv, gw64], adj_outputs=[gy])
    c = np.cos(ws.astype(np.float64)[None, :] * xs[:, None]) * gys[:, None]
    tw, tw64 = c * xs[:, None], gys[:, None] * xs[:, None] * np.ones((1, m))
    within_sum_bound(gw.numpy(), tw.sum(0), np.abs(tw).sum(0), n)
    tv = gys[:, None] * 2.0 * vs.astype(np.float64)[None, :]
    within_sum_bound(gv.numpy(), tv.sum(0), np.abs(tv).sum(0), n)
    eps64 = float(np.finfo(np.float64).eps)
    assert np.all(np.abs(gw64.numpy() - tw64.sum(0)) <= (n + 10) * eps64 * np.abs(tw64).sum(0))


def test_queue_length_within_local_memory():
    from gradkit.backends.opencl.aggregate import queue_length
    assert queue_length(256, 4, 48 << 10, 1) == 16          # a GPU's float32 queue: 16 rows of 257
    assert queue_length(256, 8, 48 << 10, 1) == 8
    assert queue_length(256, 8, 48 << 10, 2) == 4           # two types share half the local memory
    assert queue_length(16, 4, 48 << 10, 1) == 16
    assert queue_length(1024, 8, 16 << 10, 2) == 0          # not one row fits: plain atomics
    for wg in (16, 64, 256, 1024):
        for size in (4, 8):
            q = queue_length(wg, size, 32 << 10, 2)
            assert q == 0 or (wg % q == 0 and q & (q - 1) == 0 and q * ((wg + 1) * size + 8) <= 8 << 10)


# --------------------------------------------------------------------------- which sites aggregate (OpenCL)

@pytest.mark.parametrize("cl_device", OPENCL)
def test_uniform_sites_aggregate(cl_device):
    assert aggregated_runs(pair_energy, cl_device, adjoint=True) == 1     # adj_x[j]: both components, one run
    assert aggregated_runs(project, cl_device, adjoint=True) == 1         # adj_w[j]
    assert aggregated_runs(add_to_slot, cl_device, adjoint=False) == 2    # out[k], and out[k - 1] under k > 0
    src = project_mixed.source(cl_device, adjoint=True)
    assert src.count(MARK) == 3 and "gk_agg_float[" in src and "gk_agg_double[" in src
    assert "switch (gk_agg_float_of[gk_lid])" in src           # one float32 queue for adj_w and adj_v
    src = pair_energy.source(cl_device, adjoint=True)
    assert "gk_full" in src and "barrier(CLK_LOCAL_MEM_FENCE)" in src


@pytest.mark.parametrize("cl_device", OPENCL)
def test_divergent_and_per_thread_sites_keep_atomics(cl_device):
    for kernel in (project_masked, project_short, project_rotated):
        assert aggregated_runs(kernel, cl_device, adjoint=True) == 0, kernel.pyfunc.__name__
    assert aggregated_runs(add_and_read, cl_device, adjoint=False) == 0
    # the forward reduction onto a constant element keeps its epilogue, not a per-site aggregation
    assert aggregated_runs(pair_energy, cl_device, adjoint=False) == 0


@pytest.mark.parametrize("cl_device", OPENCL)
def test_no_room_for_a_queue_keeps_atomics(cl_device, rng, monkeypatch):
    from gradkit.backends.opencl import aggregate
    monkeypatch.setattr(aggregate, "queue_length", lambda *a: 0)
    monkeypatch.setattr(gk.config, "cache", False)
    kernel = gk.kernel(pair_energy.pyfunc)
    n = 150
    xs = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    gx = gk.zeros(n, dtype=gk.vec2, device=cl_device)
    gk.launch(kernel, n, inputs=[gk.array(xs, dtype=gk.vec2, device=cl_device)],
              outputs=[gk.zeros(1, device=cl_device)], adjoint=True, adj_inputs=[gx],
              adj_outputs=[gk.array(np.ones(1, np.float32), device=cl_device)])
    assert MARK not in kernel.source(cl_device, adjoint=True)
    ref, sum_abs = pair_energy_grad(xs, 1.0)
    within_sum_bound(gx.numpy(), ref, sum_abs, 2 * n)


@pytest.mark.parametrize("wg", [16, 256])
@pytest.mark.parametrize("cl_device", OPENCL)
def test_queue_shapes(cl_device, wg, rng, monkeypatch):
    """The queue at other work-group sizes: 16 (one column block per row, as many rows as work-items) and
    256 (a GPU's: sixteen column blocks per row), with a launch size that leaves a partial last group."""
    from gradkit.backends.registry import get_backend
    backend = get_backend("opencl")
    info = next(d for d in backend.devices() if d.name == cl_device)
    monkeypatch.setattr(backend._state(info), "workgroup", wg)
    monkeypatch.setattr(gk.config, "cache", False)
    kernel = gk.kernel(pair_energy.pyfunc)           # fresh: compiled at the patched work-group size
    n = 3 * wg + 45
    xs = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    x = gk.array(xs, dtype=gk.vec2, device=cl_device)
    gx = gk.zeros(n, dtype=gk.vec2, device=cl_device)
    gk.launch(kernel, n, inputs=[x], outputs=[gk.zeros(1, device=cl_device)], adjoint=True,
              adj_inputs=[gx], adj_outputs=[gk.array(np.ones(1, np.float32), device=cl_device)])
    assert f"reqd_work_group_size({wg}, 1, 1)" in kernel.source(cl_device, adjoint=True)
    ref, sum_abs = pair_energy_grad(xs, 1.0)
    within_sum_bound(gx.numpy(), ref, sum_abs, 2 * n)
