"""Taichi programs the dialect tests run twice: under the real Taichi and under gradkit.taichi.

Each program is a module text starting with `import taichi as ti`; `run_program(text, module, tmp_path)`
writes it to a file (kernels are read from their source file, in both implementations), replaces that line
by `import <module> as ti` and runs it with runpy, returning its globals.
"""

from __future__ import annotations

import pathlib
import runpy

import numpy as np


def run_program(text: str, module: str, folder: pathlib.Path, name: str, **inject) -> dict:
    src = text.replace("import taichi as ti", f"import {module} as ti", 1)
    path = folder / f"{name}_{module.replace('.', '_')}.py"
    path.write_text(src)
    return runpy.run_path(str(path), init_globals=inject, run_name=f"ti_program_{name}")


def rel_err(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# A DiffTaichi-style mass-spring system (written for these tests): springs between particles, semi-implicit
# Euler steps, a loss on the final centre of mass; gradients with respect to the initial positions, the
# spring stiffness and actuation parameters. Uses Vector fields, ti.func, ti.static, struct-for, range-for,
# vector methods, atomics with `+=`, a kernel called with a time-step argument, ti.ad.Tape.
MASS_SPRING = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=FP)

n_objects = 6
n_springs = 7
steps = 12
dt = 0.01
real = FP

x = ti.Vector.field(2, dtype=real, shape=(steps, n_objects), needs_grad=True)
v = ti.Vector.field(2, dtype=real, shape=(steps, n_objects), needs_grad=True)
force = ti.Vector.field(2, dtype=real, shape=(steps, n_objects), needs_grad=True)
spring_a = ti.field(ti.i32, shape=n_springs)
spring_b = ti.field(ti.i32, shape=n_springs)
rest = ti.field(real, shape=n_springs)
stiff = ti.field(real, shape=n_springs, needs_grad=True)
act = ti.field(real, shape=(steps, n_springs), needs_grad=True)
loss = ti.field(real, shape=(), needs_grad=True)
goal = ti.Vector([0.7, 0.2])


@ti.func
def spring_force(pa, pb, r, k, a):
    d = pa - pb
    length = d.norm() + 1e-4
    target = r * (1.0 + 0.2 * ti.tanh(a))
    return k * (length - target) * d / length


@ti.kernel
def apply_spring_force(t: ti.i32):
    for i in range(n_springs):
        a = spring_a[i]
        b = spring_b[i]
        f = spring_force(x[t - 1, a], x[t - 1, b], rest[i], stiff[i], act[t - 1, i])
        force[t - 1, a] += -f
        force[t - 1, b] += f


@ti.kernel
def advance(t: ti.i32):
    for i in range(n_objects):
        g = ti.Vector([0.0, -9.8])
        damping = ti.exp(-dt * 0.5)
        new_v = damping * v[t - 1, i] + dt * (force[t - 1, i] + g)
        v[t, i] = new_v
        x[t, i] = x[t - 1, i] + dt * new_v


@ti.kernel
def compute_loss(t: ti.i32):
    for i in range(n_objects):
        d = x[t, i] - goal
        s = 0.0
        for k in ti.static(range(2)):
            s += d[k] * d[k]
        loss[None] += 0.5 * (d.dot(d) + s) / n_objects


def setup(rng):
    pos = rng.uniform(0.2, 0.8, size=(n_objects, 2))
    xs = np.zeros((steps, n_objects, 2))
    xs[0] = pos
    x.from_numpy(xs)
    v.fill(0)
    force.fill(0)
    sa = np.array([0, 1, 2, 3, 4, 5, 0], dtype=np.int32)
    sb = np.array([1, 2, 3, 4, 5, 0, 3], dtype=np.int32)
    spring_a.from_numpy(sa)
    spring_b.from_numpy(sb)
    rest.from_numpy(np.linalg.norm(pos[sa] - pos[sb], axis=1) * 0.9)
    stiff.from_numpy(rng.uniform(20, 40, size=n_springs))
    act.from_numpy(rng.uniform(-1, 1, size=(steps, n_springs)))


def forward():
    for t in range(1, steps):
        apply_spring_force(t)
        advance(t)
    compute_loss(steps - 1)


def run(seed):
    setup(np.random.default_rng(seed))
    with ti.ad.Tape(loss=loss):
        forward()
    return (loss[None], x.grad.to_numpy()[0], stiff.grad.to_numpy(), act.grad.to_numpy())
'''


# Language features in one program (written for these tests), float64, with gradients through each:
# ti.ndrange with start/stop bounds, ti.grouped over a 2-D field, struct-for over a 2-D field, a vector index
# (grid[base + offset]), serial code before and after loops, a @ti.data_oriented class with a kernel method
# and a ti.func method, ti.template() arguments, ti.static conditions, matrices (outer_product, transpose,
# determinant, diag, identity), ti.cast, ti.atomic_add, top-level locals used by a loop.
FEATURES = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)

N = 5
a = ti.field(ti.f64, shape=(N, N), needs_grad=True)
b = ti.Vector.field(2, ti.f64, shape=N, needs_grad=True)
m = ti.Matrix.field(2, 2, ti.f64, shape=N, needs_grad=True)
grid = ti.field(ti.f64, shape=(N + 2, N + 2), needs_grad=True)
out = ti.field(ti.f64, shape=(), needs_grad=True)
c = ti.field(ti.f64)
ti.root.dense(ti.i, 2).dense(ti.j, 3).place(c)
ti.root.lazy_grad()


@ti.func
def soft(v):
    return ti.log(1.0 + ti.exp(v))


@ti.kernel
def scatter(scale: ti.f64):
    for i, j in ti.ndrange((1, N), (0, N - 1)):
        base = ti.Vector([i, j])
        for off in ti.static(ti.grouped(ti.ndrange(2, 2))):
            grid[base + off] += scale * soft(a[i, j]) * (1 + off[0] + 2 * off[1])


@ti.kernel
def mats():
    for i in b:
        u = b[i]
        w = ti.Vector([u[1], ti.cast(i, ti.f64) + 0.5])
        M = u.outer_product(w) + ti.Matrix.diag(2, 0.25) + ti.Matrix.identity(ti.f64, 2)
        m[i] = M.transpose() @ M
        out[None] += M.determinant() * 0.01 + (M @ u).norm() + u.normalized().sum()


@ti.kernel
def total(f: ti.template(), w: ti.template()):
    for I in ti.grouped(f):
        n = f.shape[0]
        if ti.static(w > 1):
            ti.atomic_add(out[None], w * f[I] ** 2 / n)
        else:
            out[None] += f[I] ** 2 / n


@ti.kernel
def mat_loss():
    for i in m:
        out[None] += m[i].sum() * 0.1 + m[i][0, 1] ** 2


@ti.data_oriented
class Cloth:
    def __init__(self):
        self.p = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.func
    def energy(self, i):
        return ti.sin(self.p[i]) * ti.max(self.p[i], 0.1, -2.0)

    @ti.kernel
    def add_energy(self, k: ti.f64):
        for i in self.p:
            out[None] += k * self.energy(i)


cloth = Cloth()
ti.root.lazy_grad()


def run(seed):
    rng = np.random.default_rng(seed)
    a.from_numpy(rng.uniform(-1, 1, (N, N)))
    b.from_numpy(rng.uniform(-1, 1, (N, 2)))
    cloth.p.from_numpy(rng.uniform(-1, 1, N))
    grid.fill(0)
    with ti.ad.Tape(loss=out):
        scatter(0.7)
        mats()
        total(grid, 3)
        total(a, 1)
        mat_loss()
        cloth.add_energy(1.5)
    c[1, 2] = 4.0
    return (out[None], a.grad.to_numpy(), b.grad.to_numpy(), cloth.p.grad.to_numpy(), grid.to_numpy(),
            m.to_numpy(), c.to_numpy())
'''


# DiffTaichi-style programs (the benchmark's too) are difftaichi_style.py's; importable from here as before
from difftaichi_style import MPM, SPRING_ROBOT, program  # noqa: E402,F401
