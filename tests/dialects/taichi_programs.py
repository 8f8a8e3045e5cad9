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


# A spring robot in the style of DiffTaichi's mass_spring.py, written for these tests: its state in a
# @ti.data_oriented class, springs in a ti.Struct.field iterated by a struct-for, a @ti.func calling a
# @ti.func, ti.static loops over the dimensions, a ti.grouped(ti.ndrange(...)) loss over a 2-D field, a
# time-step argument and ti.ad.Tape(loss). FP, N_OBJ and STEPS are replaced by the test (or the benchmark).
SPRING_ROBOT = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=FP)

real = FP
n_objects = N_OBJ
n_springs = 2 * n_objects - 3
steps = STEPS
dt = 0.004
damping = 15.0
Spring = ti.types.struct(a=ti.i32, b=ti.i32, rest=real, stiff=real, act=real)


@ti.func
def clamp01(v):
    return ti.min(ti.max(v, 0.0), 1.0)


@ti.func
def tension(d, rest, stiff, act):
    length = d.norm(1e-9)
    target = rest * (1.0 + 0.1 * ti.sin(act))
    return stiff * (length / target - 1.0) * d / length * clamp01(length * 4.0)


@ti.data_oriented
class Robot:
    def __init__(self):
        self.x = ti.Vector.field(2, real, shape=(steps, n_objects), needs_grad=True)
        self.v = ti.Vector.field(2, real, shape=(steps, n_objects), needs_grad=True)
        self.f = ti.Vector.field(2, real, shape=(steps, n_objects), needs_grad=True)
        self.springs = ti.Struct.field({"a": ti.i32, "b": ti.i32, "rest": real, "stiff": real, "act": real},
                                       shape=n_springs)
        self.phase = ti.field(real, shape=(steps, n_springs), needs_grad=True)
        self.heat = ti.field(real, shape=(4, 4), needs_grad=True)
        self.loss = ti.field(real, shape=(), needs_grad=True)
        ti.root.lazy_grad()

    @ti.kernel
    def spring_forces(self, t: ti.i32):
        for s in self.springs:
            a, b = self.springs[s].a, self.springs[s].b
            act = self.springs[s].act * self.phase[t - 1, s]
            f = tension(self.x[t - 1, a] - self.x[t - 1, b], self.springs[s].rest, self.springs[s].stiff, act)
            self.f[t - 1, a] -= f
            self.f[t - 1, b] += f

    @ti.kernel
    def advance(self, t: ti.i32):
        for i in range(n_objects):
            v = ti.exp(-dt * damping) * self.v[t - 1, i] + dt * (self.f[t - 1, i] + ti.Vector([0.0, -1.0]))
            for d in ti.static(range(2)):
                if self.x[t - 1, i][d] + dt * v[d] < 0.0 and v[d] < 0:
                    v[d] = 0.0
            self.v[t, i] = v
            self.x[t, i] = self.x[t - 1, i] + dt * v

    @ti.kernel
    def compute_loss(self, t: ti.i32):
        for i in range(n_objects):
            d = self.x[t, i] - ti.Vector([0.5, 0.2])
            self.loss[None] += d.norm_sqr() * (i + 1) / n_objects
        for I in ti.grouped(ti.ndrange(4, 4)):
            self.loss[None] += 1e-3 * self.heat[I] ** 2 * (I[0] + 2 * I[1])


robot = Robot()


def setup(seed):
    rng = np.random.default_rng(seed)
    xs = np.zeros((steps, n_objects, 2))
    xs[0, :, 0] = 0.1 + 0.05 * np.arange(n_objects) + rng.uniform(-0.01, 0.01, n_objects)
    xs[0, :, 1] = 0.05 + 0.05 * (np.arange(n_objects) % 2) + rng.uniform(-0.01, 0.01, n_objects)
    robot.x.from_numpy(xs)
    robot.v.fill(0)
    a = np.concatenate([np.arange(n_objects - 1), np.arange(n_objects - 2)]).astype(np.int32)
    b = np.concatenate([np.arange(1, n_objects), np.arange(2, n_objects)]).astype(np.int32)
    robot.springs.from_numpy({"a": a, "b": b, "rest": np.linalg.norm(xs[0, a] - xs[0, b], axis=1),
                              "stiff": rng.uniform(20, 40, n_springs), "act": rng.uniform(0.2, 0.6, n_springs)})
    robot.phase.from_numpy(np.sin(np.arange(steps)[:, None] * 0.3 + rng.uniform(0, 6, n_springs)))
    robot.heat.from_numpy(rng.uniform(-1, 1, (4, 4)))


def forward():
    robot.f.fill(0)
    for t in range(1, steps):
        robot.spring_forces(t)
        robot.advance(t)
    robot.compute_loss(steps - 1)


def iterate():
    with ti.ad.Tape(loss=robot.loss):
        forward()
    return robot.loss[None]


def run(seed):
    setup(seed)
    losses = []
    for _ in range(2):                  # two iterations: the Tape clears every gradient again
        losses.append(iterate())
        grads = [robot.x.grad.to_numpy()[0], robot.phase.grad.to_numpy(), robot.heat.grad.to_numpy()]
        robot.phase.from_numpy(robot.phase.to_numpy() - 0.1 * grads[1])
    return [np.array(losses), *grads]
'''


# A 2-D MLS-MPM step in the style of DiffTaichi's diffmpm.py, written for these tests: particle-to-grid
# and grid-to-particle transfers over a 3x3 stencil (`for offset in ti.static(ti.grouped(ti.ndrange(3,
# 3)))`, `grid[base + offset]` vector indexing), a grid kernel over ti.ndrange, per-particle material in a
# struct field, and diffmpm's backward: no grid history, so each step's grid is recomputed and the kernels'
# `.grad()` called in reverse, after clearing the grid's gradients inside a kernel (`grid_v.grad[I] = ...`).
MPM = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=FP)

real = FP
n_particles = N_PART
n_grid = N_GRID
steps = STEPS
dx = 1.0 / n_grid
inv_dx = float(n_grid)
dt = 1e-3
p_vol = (dx * 0.5) ** 2
Material = ti.types.struct(mass=real, mu=real, la=real)

x = ti.Vector.field(2, real, shape=(steps, n_particles), needs_grad=True)
v = ti.Vector.field(2, real, shape=(steps, n_particles), needs_grad=True)
C = ti.Matrix.field(2, 2, real, shape=(steps, n_particles), needs_grad=True)
F = ti.Matrix.field(2, 2, real, shape=(steps, n_particles), needs_grad=True)
mat = Material.field(shape=n_particles, needs_grad=True)
grid_v = ti.Vector.field(2, real, shape=(n_grid, n_grid), needs_grad=True)
grid_m = ti.field(real, shape=(n_grid, n_grid), needs_grad=True)
grid_out = ti.Vector.field(2, real, shape=(n_grid, n_grid), needs_grad=True)
target = ti.Vector([0.6, 0.4])
loss = ti.field(real, shape=(), needs_grad=True)


@ti.func
def weights(fx):
    return [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]


@ti.kernel
def clear_grid():
    for i, j in grid_m:
        grid_v[i, j] = [0, 0]
        grid_m[i, j] = 0
        grid_v.grad[i, j] = [0, 0]
        grid_m.grad[i, j] = 0
        grid_out.grad[i, j] = [0, 0]


@ti.kernel
def p2g(f: ti.i32):
    for p in range(n_particles):
        base = ti.cast(x[f, p] * inv_dx - 0.5, ti.i32)
        fx = x[f, p] * inv_dx - ti.cast(base, real)
        w = weights(fx)
        new_F = (ti.Matrix.diag(dim=2, val=1) + dt * C[f, p]) @ F[f, p]
        F[f + 1, p] = new_F
        J = new_F.determinant()
        r, s = ti.polar_decompose(new_F)
        stress = -4 * inv_dx * inv_dx * dt * p_vol * (
            2 * mat[p].mu * (new_F - r) @ new_F.transpose() + ti.Matrix.diag(2, mat[p].la * (J - 1) * J))
        affine = stress + mat[p].mass * C[f, p]
        for offset in ti.static(ti.grouped(ti.ndrange(3, 3))):
            dpos = (ti.cast(offset, real) - fx) * dx
            weight = w[offset[0]][0] * w[offset[1]][1]
            grid_v[base + offset] += weight * (mat[p].mass * v[f, p] + affine @ dpos)
            grid_m[base + offset] += weight * mat[p].mass


@ti.kernel
def grid_op():
    for i, j in ti.ndrange(n_grid, n_grid):
        inv_m = 1 / (grid_m[i, j] + 1e-10)
        vel = inv_m * grid_v[i, j] + dt * ti.Vector([0.0, -9.8])
        if i < 2 and vel[0] < 0:
            vel[0] = 0
        if j < 2 and vel[1] < 0:
            vel[1] = 0
        grid_out[i, j] = vel


@ti.kernel
def g2p(f: ti.i32):
    for p in range(n_particles):
        base = ti.cast(x[f, p] * inv_dx - 0.5, ti.i32)
        fx = x[f, p] * inv_dx - ti.cast(base, real)
        w = weights(fx)
        new_v = ti.Vector([0.0, 0.0])
        new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
        for i, j in ti.static(ti.ndrange(3, 3)):
            dpos = ti.Vector([i, j]) - fx
            g_v = grid_out[base[0] + i, base[1] + j]
            weight = w[i][0] * w[j][1]
            new_v += weight * g_v
            new_C += 4 * weight * g_v.outer_product(dpos) * inv_dx
        v[f + 1, p] = new_v
        x[f + 1, p] = x[f, p] + dt * new_v
        C[f + 1, p] = new_C


@ti.kernel
def compute_loss():
    for p in range(n_particles):
        d = x[steps - 1, p] - target
        loss[None] += d.norm_sqr() / n_particles


def setup(seed):
    rng = np.random.default_rng(seed)
    x0 = np.zeros((steps, n_particles, 2))
    x0[0] = rng.uniform(0.3, 0.5, (n_particles, 2))
    x.from_numpy(x0)
    v0 = np.zeros((steps, n_particles, 2))
    v0[0] = rng.uniform(-0.5, 0.5, (n_particles, 2))
    v.from_numpy(v0)
    F0 = np.zeros((steps, n_particles, 2, 2))
    F0[0] = np.eye(2) + rng.uniform(-0.05, 0.05, (n_particles, 2, 2))
    F.from_numpy(F0)
    C.fill(0)
    mat.from_numpy({"mass": rng.uniform(0.5, 1.5, n_particles) * p_vol, "mu": rng.uniform(5, 10, n_particles),
                    "la": rng.uniform(5, 10, n_particles)})


def forward():
    for s in range(steps - 1):
        clear_grid()
        p2g(s)
        grid_op()
        g2p(s)
    loss[None] = 0
    compute_loss()


def backward():
    for f in (x, v, C, F):
        f.grad.fill(0)
    mat.mass.grad.fill(0)
    mat.mu.grad.fill(0)
    mat.la.grad.fill(0)
    loss.grad[None] = 1
    compute_loss.grad()
    for s in reversed(range(steps - 1)):
        clear_grid()                    # no grid history: recompute step s's grid, then its adjoints
        p2g(s)
        grid_op()
        g2p.grad(s)
        grid_op.grad()
        p2g.grad(s)


def iterate():
    forward()
    backward()
    return loss[None]


def run(seed):
    setup(seed)
    out = [iterate()]
    return out + [x.grad.to_numpy()[0], v.grad.to_numpy()[0], F.grad.to_numpy()[0], mat.mu.grad.to_numpy(),
                  mat.mass.grad.to_numpy(), x.to_numpy()[steps - 1]]
'''


def program(text: str, **values) -> str:
    """A program text with its placeholders (FP, STEPS, ...) replaced: `program(MPM, FP="ti.f64", ...)`."""
    for k, v in values.items():
        text = text.replace(k, str(v))
    return text
