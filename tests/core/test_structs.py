"""`@gk.struct` (Warp's `@wp.struct`): host instances, struct kernel parameters (scalar, vector, matrix,
array and nested struct fields), struct locals (constructed, field and component writes, copied, carried
through loops and merged across branches), @gk.func arguments and returns, and @gk.func_grad on struct
inputs — forward values against float64 NumPy references and gradients (reverse into the struct's array
fields, forward mode) against central finite differences, on every device; misuse is a clear error.
Arrays of structs: test_struct_arrays.py."""

import numpy as np
import pytest

import gradkit as gk
from tests.compile_errors import assert_compile_error

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


ERRORS = [
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
    assert_compile_error(fn, snippet, message, column=False)



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
