"""Arrays of `@gk.struct` elements (stored field by field): host side (creation, assign, element reads,
NumPy structured view, gradients), whole elements and single fields read and written in kernels, atomic
`+=` into a field — values against float64 NumPy, reverse and forward mode against central differences,
on every device; launch and compile errors name the array."""

import warnings

import numpy as np
import pytest

import gradkit as gk
from tests.compile_errors import assert_compile_error
from tests.core.test_structs import A1, EPS, F64, Spring


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

def struct_array_view(ps: gk.array(dtype=Particle, ndim=2), y: A1):
    y[0] = ps[0].m


def struct_element_as_value(ps: gk.array(dtype=Particle), y: A1):
    y[0] = ps[0] * 2.0


ERRORS = [
    (struct_array_view, "ps[0].m", r"'ps', an array of Particle has 2 dimensions but is indexed with 1"),
    (struct_element_as_value, "ps[0] * 2.0", r"cannot apply 'mul' to an element of 'ps', an array of Particle"),
]


@pytest.mark.parametrize("fn,snippet,message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_compile_errors(fn, snippet, message):
    assert_compile_error(fn, snippet, message)
