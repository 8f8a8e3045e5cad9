"""`@gk.struct` (Warp's `@wp.struct`): host instances, struct kernel parameters (scalar, vector, matrix,
array and nested struct fields), struct locals (constructed, field and component writes, copied, carried
through loops and merged across branches), @gk.func arguments and returns, and @gk.func_grad on struct
inputs — forward values against float64 NumPy references and gradients (reverse into the struct's array
fields, forward mode) against central finite differences, on every device; misuse is a clear error."""

import re
import warnings

import numpy as np
import pytest

import gradkit as gk

F64 = gk.float64
A1 = gk.array(dtype=F64)
V3 = gk.array(dtype=gk.vec3d)
EPS = 1e-6


@gk.struct
class Spring:
    k: F64
    rest: gk.vec3d


@gk.struct
class Body:
    pos: gk.vec3d
    mass: F64
    frame: gk.mat33d
    spring: Spring
    forces: V3
    impulse: V3


# --------------------------------------------------------------------------- host side

def test_host_instances():
    b = Body(mass=2.0)
    assert b.mass == 2.0 and b.mass.dtype == np.float64
    np.testing.assert_array_equal(b.pos, np.zeros(3))
    assert b.forces is None and isinstance(b.spring, Spring) and b.spring.k == 0.0
    b.pos = (1, 2, 3)
    b.frame = 1.0                                     # a scalar fills a matrix, as NumPy broadcasting
    np.testing.assert_array_equal(b.frame, np.ones((3, 3)))
    s = Spring(3.0, gk.vec3d(0, 0, 1))
    assert s.k == 3.0 and "Spring(k=3.0" in repr(s)
    with pytest.raises(AttributeError, match="Body has no field 'vel'"):
        b.vel = 1.0
    with pytest.raises(ValueError, match=r"Body.pos must have shape \(3,\)"):
        b.pos = (1, 2)
    with pytest.raises(TypeError, match=r"Body.forces must be a gk.array"):
        b.forces = np.zeros((3, 3))
    with pytest.raises(TypeError, match="Body.spring must be a Spring instance"):
        b.spring = 1.0
    with pytest.raises(TypeError, match="Body has no field 'nope'"):
        Body(nope=1)
    with pytest.raises(TypeError, match="field name 'grad' is reserved"):
        gk.struct(type("Bad", (), {"__annotations__": {"grad": float}}))
    with pytest.raises(TypeError, match="declares no annotated fields"):
        gk.struct(type("Empty", (), {}))
    with pytest.raises(TypeError, match="arrays of @gk.struct 'Body': a struct with array fields cannot be"):
        gk.array(dtype=Body, shape=3)


def test_grad_struct_holds_the_array_gradients(device):
    b = Body(forces=gk.zeros(4, dtype=gk.vec3d, device=device, requires_grad=True))
    assert b.grad.forces is b.forces.grad
    assert b.grad.mass == 0.0 and isinstance(b.grad.spring, Spring)


# --------------------------------------------------------------------------- kernel parameters

@gk.kernel
def body_energy(b: Body, x: V3, e: A1):
    i = gk.tid()
    d = x[i] - b.pos
    stretch = gk.length(d - b.spring.rest)
    e[i] = 0.5 * b.spring.k * stretch * stretch + b.mass * gk.dot(b.frame @ x[i], b.forces[i])
    b.impulse[i] = d * b.mass                     # arrays in a struct are written like any array


def _energy_ref(pos, mass, frame, k, rest, x, forces):
    d = x - pos
    stretch = np.linalg.norm(d - rest, axis=1)
    e = 0.5 * k * stretch ** 2 + mass * np.einsum("ij,nj,ni->n", frame, x, forces)
    return e, d * mass


def _body(rng, device, n, grad=False):
    b = Body(pos=rng.normal(size=3), mass=rng.uniform(0.5, 2), frame=rng.normal(size=(3, 3)),
             spring=Spring(k=rng.uniform(1, 2), rest=rng.normal(size=3)))
    b.forces = gk.array(rng.normal(size=(n, 3)), dtype=gk.vec3d, device=device, requires_grad=grad)
    b.impulse = gk.zeros(n, dtype=gk.vec3d, device=device, requires_grad=grad)
    return b


def test_struct_parameter_forward_and_reverse(device, rng):
    n = 5
    b = _body(rng, device, n, grad=True)
    f0 = b.forces.numpy().copy()
    x0 = rng.normal(size=(n, 3))
    x = gk.array(x0, dtype=gk.vec3d, device=device, requires_grad=True)
    e = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(body_energy, n, inputs=[b, x, e], device=device)
    args = (b.pos, b.mass, b.frame, b.spring.k, b.spring.rest)
    want_e, want_f = _energy_ref(*args, x0, f0)
    np.testing.assert_allclose(e.numpy(), want_e, rtol=1e-12)
    np.testing.assert_allclose(b.impulse.numpy(), want_f, rtol=1e-12)
    we, wf = rng.normal(size=n), rng.normal(size=(n, 3))
    tape.backward(grads={e: gk.array(we, device=device), b.impulse: gk.array(wf, dtype=gk.vec3d, device=device)})

    def loss(x_, f_):
        out_e, out_f = _energy_ref(*args, x_, f_)
        return float(np.sum(we * out_e) + np.sum(wf * out_f))

    for arr, got in ((x0, x.grad.numpy()), (f0, b.grad.forces.numpy())):
        fd = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += EPS
            lo[idx] -= EPS
            fd[idx] = ((loss(hi, f0) - loss(lo, f0)) if arr is x0 else (loss(x0, hi) - loss(x0, lo))) / (2 * EPS)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)


def test_struct_parameter_forward_mode(device, rng):
    n = 4
    b = _body(rng, device, n)
    x0, v = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    x = gk.array(x0, dtype=gk.vec3d, device=device)
    e = gk.zeros(n, dtype=F64, device=device)
    f0 = b.forces.numpy().copy()
    args = (b.pos, b.mass, b.frame, b.spring.k, b.spring.rest)
    with gk.ForwardMode(seeds={x: gk.array(v, dtype=gk.vec3d, device=device)}):
        gk.launch(body_energy, n, inputs=[b, x, e], device=device)
        de = e.dual.numpy().copy()
    fd = (_energy_ref(*args, x0 + EPS * v, f0)[0] - _energy_ref(*args, x0 - EPS * v, f0)[0]) / (2 * EPS)
    np.testing.assert_allclose(de, fd, rtol=1e-6, atol=1e-7)


@gk.struct
class Params32:
    scale: gk.float32
    offset: gk.vec2
    data: gk.array(dtype=gk.float32)


@gk.kernel
def scaled32(p: Params32, y: gk.array(dtype=gk.vec2)):
    i = gk.tid()
    y[i] = p.offset + p.scale * p.data[i] * p.data[i] * gk.vec2(1.0, 2.0)


def test_float32_struct(device, rng):
    d0 = rng.normal(size=6).astype(np.float32)
    p = Params32(scale=1.5, offset=(0.25, -1.0), data=gk.array(d0, dtype=gk.float32, device=device,
                                                                  requires_grad=True))
    y = gk.zeros(6, dtype=gk.vec2, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(scaled32, 6, inputs=[p, y], device=device)
    want = np.array([0.25, -1.0]) + 1.5 * d0.astype(np.float64)[:, None] ** 2 * np.array([1.0, 2.0])
    np.testing.assert_allclose(y.numpy(), want, rtol=2e-6)
    tape.backward(grads={y: gk.array(np.ones((6, 2), np.float32), dtype=gk.vec2, device=device)})
    np.testing.assert_allclose(p.grad.data.numpy(), 1.5 * 2 * d0 * 3.0, rtol=2e-6)


# --------------------------------------------------------------------------- locals and @gk.func

@gk.func
def relax(s: Spring, amount: F64) -> Spring:
    out = s                           # a copy: s itself is unchanged
    out.k = s.k * amount
    out.rest.z += amount
    return out


@gk.func
def spring_energy(s: Spring, d: gk.vec3d) -> F64:
    e = gk.length(d - s.rest)
    return 0.5 * s.k * e * e


@gk.func
def with_mass(b: Body, m: F64) -> Body:
    c = b
    c.mass = m
    return c                          # its array field is the caller's array


@gk.kernel
def locals_and_funcs(b: Body, x: V3, n_steps: int, e: A1):
    i = gk.tid()
    s = Spring(2.0, gk.vec3d(0.0, 0.0, 1.0))
    orig = s
    for t in range(n_steps):          # a struct local carried through a loop
        s = relax(s, 0.5)
        s.rest.x += x[i].x
    if x[i].y > 0.0:                  # and merged across a run-time branch
        s.k = s.k * 3.0
    else:
        s.rest = gk.vec3d(1.0, 1.0, 1.0)
    heavy = with_mass(b, 10.0)
    e[i] = spring_energy(s, x[i]) + orig.k + heavy.mass * heavy.forces[i].x + b.mass


def _locals_ref(x, forces, mass, n_steps):
    out = np.zeros(len(x))
    for i in range(len(x)):
        k, rest = 2.0, np.array([0.0, 0.0, 1.0])
        for _ in range(n_steps):
            k *= 0.5
            rest = rest + np.array([x[i, 0], 0.0, 0.5])
        if x[i, 1] > 0:
            k *= 3.0
        else:
            rest = np.ones(3)
        d = np.linalg.norm(x[i] - rest)
        out[i] = 0.5 * k * d * d + 2.0 + 10.0 * forces[i, 0] + mass
    return out


def test_struct_locals_loops_branches_and_funcs(device, rng):
    n = 6
    b = _body(rng, device, n)
    x0 = rng.normal(size=(n, 3))
    x0[:, 1] = np.where(np.arange(n) % 2, 1, -1) * (0.2 + np.abs(x0[:, 1]))   # both branches, off the kink
    x = gk.array(x0, dtype=gk.vec3d, device=device, requires_grad=True)
    e = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(locals_and_funcs, n, inputs=[b, x, 3, e], device=device)
    f0 = b.forces.numpy()
    np.testing.assert_allclose(e.numpy(), _locals_ref(x0, f0, b.mass, 3), rtol=1e-12)
    tape.backward(grads={e: gk.array(np.ones(n), device=device)})
    fd = np.zeros_like(x0)
    for idx in np.ndindex(x0.shape):
        hi, lo = x0.copy(), x0.copy()
        hi[idx] += EPS
        lo[idx] -= EPS
        fd[idx] = (_locals_ref(hi, f0, b.mass, 3).sum() - _locals_ref(lo, f0, b.mass, 3).sum()) / (2 * EPS)
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-7)


@gk.func
def spring_force(s: Spring, d: F64) -> F64:
    return s.k * d * d


@gk.func_grad(spring_force)
def spring_force_grad(s: Spring, d: F64, adj: F64):
    gk.adjoint[s.k] += d * d * adj
    gk.adjoint[d] += 3.0 * s.k * d * adj          # deliberately 1.5x the true derivative: seen if used


@gk.kernel
def custom_grad_struct(x: A1, y: A1):
    i = gk.tid()
    s = Spring(x[i] * x[i], gk.vec3d(0.0, 0.0, 0.0))
    y[i] = spring_force(s, x[i])


def test_func_grad_with_struct_input(device, rng):
    """y = s.k·x² with s.k = x²: dy/dx = 2x·x² (through s.k) + the custom 3·s.k·x (instead of 2·s.k·x)."""
    x0 = rng.uniform(0.5, 1.5, 5)
    x = gk.array(x0, dtype=F64, device=device, requires_grad=True)
    y = gk.zeros(5, dtype=F64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(custom_grad_struct, 5, inputs=[x, y], device=device)
    np.testing.assert_allclose(y.numpy(), x0 ** 4, rtol=1e-12)
    tape.backward(grads={y: gk.array(np.ones(5), device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 2 * x0 ** 3 + 3 * x0 ** 3, rtol=1e-12)


# --------------------------------------------------------------------------- arrays of structs

@gk.struct
class Particle:
    pos: gk.vec3d
    m: F64
    spring: Spring


@gk.func
def kinetic(p: Particle) -> F64:
    return 0.5 * p.m * gk.dot(p.pos, p.pos) + p.spring.k * p.pos.z


@gk.kernel
def particles_step(ps: gk.array(dtype=Particle), out: gk.array(dtype=Particle), e: A1, total: A1):
    i = gk.tid()
    p = ps[i]                                  # a whole element
    e[i] = kinetic(p) + ps[i].m * ps.spring.k[i] + float(len(ps))
    q = p
    q.pos = p.pos * p.m
    q.pos.x = p.pos.x * 3.0
    out[i] = q                                 # a whole element stored
    total[0] += ps[i].m * ps[i].spring.k
    out[i].m += ps[i].m                        # one field, atomically, as a[i] += v


def _particles_ref(pos, m, k, rest, out_m):
    e = 0.5 * m * (pos * pos).sum(1) + k * pos[:, 2] + m * k + len(m)
    opos = pos * m[:, None]
    opos[:, 0] = pos[:, 0] * 3.0
    return e, opos, m + m, rest, (m * k).sum()


@gk.kernel
def element_field_writes(ps: gk.array(dtype=Particle), out: gk.array(dtype=Particle)):
    i = gk.tid()
    out[i].spring = ps[i].spring               # a nested struct field
    out[i].pos = ps[i].pos * 2.0               # a field
    out[i].pos.y = ps[i].m                     # a component of a field


def test_struct_array_field_writes(device, rng):
    ps = _particles(rng, device, 3, False)
    out = gk.array(dtype=Particle, shape=3, device=device)
    with warnings.catch_warnings():            # the component write reads the field it writes: a rule warning
        warnings.simplefilter("ignore", gk.GradientRuleWarning)
        gk.launch(element_field_writes, 3, inputs=[ps, out], device=device)
    want = ps.pos.numpy() * 2
    want[:, 1] = ps.m.numpy()
    np.testing.assert_array_equal(out.pos.numpy(), want)
    np.testing.assert_array_equal(out.spring.rest.numpy(), ps.spring.rest.numpy())
    np.testing.assert_array_equal(out.spring.k.numpy(), ps.spring.k.numpy())
    np.testing.assert_array_equal(out.m.numpy(), 0.0)


def _particles(rng, device, n, grad):
    ps = gk.array([Particle(pos=rng.normal(size=3), m=rng.uniform(0.5, 2),
                            spring=Spring(k=rng.uniform(1, 2), rest=rng.normal(size=3))) for _ in range(n)],
                  dtype=Particle, device=device, requires_grad=grad)
    return ps


def test_struct_array_host_side(device, rng):
    ps = _particles(rng, device, 4, True)
    assert ps.shape == (4,) and len(ps) == 4 and ps.dtype is Particle._gk_struct and ps.device.name == device
    assert isinstance(ps[2], Particle) and ps[2].m == ps.m.numpy()[2]
    np.testing.assert_array_equal(ps.numpy()["spring"]["rest"], ps.spring.rest.numpy())
    assert ps.grad.pos is ps.pos.grad and ps.grad.spring.k is ps.spring.k.grad
    z = gk.array(dtype=Particle, shape=3, device=device)
    assert z.grad is None and float(np.abs(z.numpy()["m"]).sum()) == 0.0
    with pytest.raises(ValueError, match="assign needs 3 Particle instances"):
        z.assign([Particle()])
    with pytest.raises(TypeError, match="element 1 must be a Particle instance, got Spring"):
        z.assign([Particle(), Spring(), Particle()])
    with pytest.raises(AttributeError, match="array of Particle has no field 'vel'"):
        z.vel


def test_struct_arrays_in_kernels(device, rng):
    n = 5
    ps = _particles(rng, device, n, True)
    out = gk.array(dtype=Particle, shape=n, device=device, requires_grad=True)
    e, total = gk.zeros(n, dtype=F64, device=device, requires_grad=True), gk.zeros(1, dtype=F64, device=device,
                                                                                  requires_grad=True)
    pos, m, k, rest = (a.numpy().copy() for a in (ps.pos, ps.m, ps.spring.k, ps.spring.rest))
    with gk.Tape() as tape:
        gk.launch(particles_step, n, inputs=[ps, out, e, total], device=device)
    want = _particles_ref(pos, m, k, rest, None)
    got = (e.numpy(), out.pos.numpy(), out.m.numpy(), out.spring.rest.numpy(), total.numpy()[0])
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    ws = [rng.normal(size=np.shape(w)) for w in want]
    tape.backward(grads={e: gk.array(ws[0], device=device), out.pos: gk.array(ws[1], dtype=gk.vec3d, device=device),
                         out.m: gk.array(ws[2], device=device),
                         out.spring.rest: gk.array(ws[3], dtype=gk.vec3d, device=device),
                         total: gk.array([ws[4]], device=device)})

    def loss(*args):
        return sum(float(np.sum(w * r)) for w, r in zip(ws, _particles_ref(*args, None)))

    inputs = [pos, m, k, rest]
    for j, got in enumerate((ps.grad.pos, ps.grad.m, ps.grad.spring.k, ps.grad.spring.rest)):
        fd = np.zeros_like(inputs[j])
        for idx in np.ndindex(inputs[j].shape):
            hi, lo = [a.copy() for a in inputs], [a.copy() for a in inputs]
            hi[j][idx] += EPS
            lo[j][idx] -= EPS
            fd[idx] = (loss(*hi) - loss(*lo)) / (2 * EPS)
        np.testing.assert_allclose(got.numpy(), fd, rtol=1e-6, atol=1e-7, err_msg=f"input {j}")
    # forward mode: the tangent of e along a direction in pos
    v = rng.normal(size=(n, 3))
    e2 = gk.zeros(n, dtype=F64, device=device)
    ps2 = _particles(rng, device, n, False)
    pos2, m2, k2, rest2 = (a.numpy().copy() for a in (ps2.pos, ps2.m, ps2.spring.k, ps2.spring.rest))
    out2 = gk.array(dtype=Particle, shape=n, device=device)
    with gk.ForwardMode(seeds={ps2.pos: gk.array(v, dtype=gk.vec3d, device=device)}):
        gk.launch(particles_step, n, inputs=[ps2, out2, e2, gk.zeros(1, dtype=F64, device=device)], device=device)
        de = e2.dual.numpy().copy()
    fd = (_particles_ref(pos2 + EPS * v, m2, k2, rest2, None)[0]
          - _particles_ref(pos2 - EPS * v, m2, k2, rest2, None)[0]) / (2 * EPS)
    np.testing.assert_allclose(de, fd, rtol=1e-6, atol=1e-7)


def test_struct_array_launch_errors(device):
    e = gk.zeros(2, dtype=F64, device=device)
    with pytest.raises(TypeError, match=r"parameter 'ps' must be a 1-D gk.array\(dtype=Particle\), got a 1-D "
                                        r"array of Spring"):
        gk.launch(particles_step, 2, inputs=[gk.array(dtype=Spring, shape=2, device=device),
                                             gk.array(dtype=Particle, shape=2, device=device), e, e], device=device)


# --------------------------------------------------------------------------- errors

def test_launch_errors_name_the_parameter(device):
    with pytest.raises(TypeError, match="parameter 'b' must be a Body instance, got Spring"):
        gk.launch(body_energy, 1, inputs=[Spring(), gk.zeros(1, dtype=gk.vec3d, device=device),
                                          gk.zeros(1, dtype=F64, device=device)], device=device)
    with pytest.raises((TypeError, ValueError), match=r"b\.forces"):
        gk.launch(body_energy, 1, inputs=[Body(), gk.zeros(1, dtype=gk.vec3d, device=device),
                                          gk.zeros(1, dtype=F64, device=device)], device=device)


def struct_as_value(b: Body, y: A1):
    y[0] = b


def no_such_field(b: Body, y: A1):
    y[0] = b.velocity


def write_no_such_field(b: Body, y: A1):
    c = b
    c.velocity = 1.0


def rebind_array_field(b: Body, y: V3):
    c = b
    c.forces = y


def missing_array_field(y: A1):
    c = Body(mass=1.0)


def wrong_struct_to_func(b: Body, y: A1):
    y[0] = spring_energy(b, b.pos)


def wrong_field_type(y: A1):
    s = Spring(k=gk.vec3d(1.0, 2.0, 3.0))


def struct_array_view(ps: gk.array(dtype=Particle, ndim=2), y: A1):
    y[0] = ps[0].m


def struct_element_as_value(ps: gk.array(dtype=Particle), y: A1):
    y[0] = ps[0] * 2.0


ERRORS = [
    (struct_array_view, "ps[0].m", r"'ps', an array of Particle has 2 dimensions but is indexed with 1"),
    (struct_element_as_value, "ps[0] * 2.0", r"cannot apply 'mul' to an element of 'ps', an array of Particle"),
    (struct_as_value, "y[0] = b", r"a Body struct is not a value here; use one of its fields \(pos, mass"),
    (no_such_field, "b.velocity", r"a Body struct has no field 'velocity' \(fields: pos, mass, frame, spring, "
                                  r"forces, impulse\)"),
    (write_no_such_field, "c.velocity", r"a Body struct has no field 'velocity'"),
    (rebind_array_field, "c.forces", r"cannot re-bind array field 'c.forces' inside a kernel"),
    (missing_array_field, "Body(mass=1.0)", r"Body\(\) needs its array field 'forces'"),
    (wrong_struct_to_func, "spring_energy(b", r"spring_energy\(\): parameter 's' is a Spring struct, got a Body "
                                              r"struct"),
    (wrong_field_type, "Spring(k=", r"Spring field 'k': expected float64, got vec3d"),
]


@pytest.mark.parametrize("fn,snippet,message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_compile_errors(fn, snippet, message):
    import inspect
    with pytest.raises(gk.CompileError) as info:
        gk.kernel(fn).ir()
    text = str(info.value)
    assert re.search(message, text), text
    lines, first = inspect.getsourcelines(fn)
    row = next(k for k, line in enumerate(lines) if snippet in line)
    assert f"{inspect.getsourcefile(fn)}:{first + row}:" in text, text


def test_string_annotations_are_evaluated_where_the_class_is_defined():
    """`from __future__ import annotations` makes every annotation a string: local names resolve too."""
    local_vec = gk.vec2d

    @gk.struct
    class Local:
        a: "local_vec"
        b: "gk.float64"

    s = Local(a=(1, 2), b=3)
    assert s.a.dtype == np.float64 and s.b == 3.0
    with pytest.raises(TypeError, match="field 'c': name 'nowhere' is not defined"):
        gk.struct(type("Bad", (), {"__annotations__": {"c": "nowhere"}}))


def test_kernel_grad_with_struct_arguments(device, rng):
    """Taichi's kernel.grad(): the adjoint launch takes the same struct arguments; gradients land in
    the struct's array fields (here e = Σ ½k|d - rest|² + m·(F x)·f, seeded by e.grad)."""
    n = 4
    b = _body(rng, device, n, grad=True)
    x0 = rng.normal(size=(n, 3))
    x = gk.array(x0, dtype=gk.vec3d, device=device, requires_grad=True)
    e = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    gk.launch(body_energy, n, inputs=[b, x, e], device=device)
    e.grad.assign(np.ones(n))
    body_energy.grad(n, inputs=[b, x, e], device=device)
    want = b.mass * (x0 @ b.frame.T)                     # d e_i / d forces_i
    np.testing.assert_allclose(b.grad.forces.numpy(), want, rtol=1e-12)
