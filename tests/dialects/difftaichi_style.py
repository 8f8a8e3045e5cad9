"""DiffTaichi-style programs written for these tests and for benchmarks/dialect_programs.py (module texts
starting with `import taichi as ti`, run by taichi_programs.run_program): SPRING_ROBOT and MPM, with their
sizes and precision as placeholders that `program(text, FP=..., ...)` fills in."""

from __future__ import annotations


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
