"""Thread-owned adjoint adds (ad/owned.py) in the Taichi dialect's time-stepping idiom: `x[f + 1, p] = g(x[f, p])`
with `f` a kernel argument and `p` the parallel loop's index. The adjoint adds into `x.grad[f, p]` and resets
`x.grad[f + 1, p]` without atomics (and so without per-worker copies of the whole trajectory's gradient on
the CPU pool); a struct-for over a 2-D field owns its (i, j). Gradients against float64 NumPy, every
device."""

from __future__ import annotations

import runpy

import numpy as np

PROGRAM = '''
import numpy as np
import gradkit.taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64, device=DEVICE)

steps, n = 6, 40000
x = ti.field(ti.f64, shape=(steps, n), needs_grad=True)
w = ti.field(ti.f64, shape=n)
g = ti.field(ti.f64, shape=(steps, 64, 48), needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def step(f: ti.i32):
    for p in range(n):
        a = x[f, p]
        x[f + 1, p] = ti.sin(a) + 0.5 * a * a


@ti.kernel
def relax(f: ti.i32):
    for i, j in ti.ndrange(64, 48):
        g[f + 1, i, j] = ti.tanh(g[f, i, j]) * (1.0 + 0.01 * i)


@ti.kernel
def total():
    for p in range(n):
        loss[None] += w[p] * x[steps - 1, p]
    for i, j in ti.ndrange(64, 48):
        loss[None] += g[steps - 1, i, j] ** 2


def run(seed):
    rng = np.random.default_rng(seed)
    x0 = np.zeros((steps, n))
    x0[0] = rng.uniform(-1.0, 1.0, n)
    g0 = np.zeros((steps, 64, 48))
    g0[0] = rng.uniform(-1.0, 1.0, (64, 48))
    wv = rng.standard_normal(n)
    x.from_numpy(x0)
    g.from_numpy(g0)
    w.from_numpy(wv)
    with ti.ad.Tape(loss):
        for f in range(steps - 1):
            step(f)
            relax(f)
        total()
    return x0[0], g0[0], wv, x.grad.to_numpy()[0], g.grad.to_numpy()[0]
'''


def _run(tmp_path, device):
    path = tmp_path / "owned_steps.py"
    path.write_text(PROGRAM.replace("DEVICE", repr(device)))
    return runpy.run_path(str(path), run_name="ti_owned_steps")


def _exclusive(kernel) -> list[bool]:
    """The `exclusive` flags of the adjoint atomics into the gradient of the kernel's first field."""
    from gradkit.ad.reverse import adjoint_function
    fwd = kernel.lowered("forward")
    fn = adjoint_function(fwd)
    adj = next(p.value.id for p in fn.params if p.name == f"adj_{fwd.params[0].name}")
    return [bool(ins.attrs.get("exclusive")) for ins in fn.walk() if ins.op == "atomic" and ins.args[0].id == adj]


def test_time_step_adjoints_add_without_atomics(tmp_path):
    mod = _run(tmp_path, "cpu")
    for name in ("step", "relax"):
        (launch,) = mod[name]._plan((0,)).launches
        flags = _exclusive(launch[1])
        assert flags and all(flags), name


def test_time_step_gradients(tmp_path, device):
    mod = _run(tmp_path, device)
    x0, g0, wv, gx, gg = mod["run"](11)
    steps = mod["steps"]
    a, dx = x0.copy(), np.ones_like(x0)
    b, dg = g0.copy(), np.ones_like(g0)
    scale = 1.0 + 0.01 * np.arange(64)[:, None]
    for _ in range(steps - 1):
        dx *= np.cos(a) + a
        a = np.sin(a) + 0.5 * a * a
        dg *= (1.0 - np.tanh(b) ** 2) * scale
        b = np.tanh(b) * scale
    np.testing.assert_allclose(gx, wv * dx, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gg, 2.0 * b * dg, rtol=1e-10, atol=1e-14)
