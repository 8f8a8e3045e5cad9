"""Each builtin's derivative: reverse (VJP) and forward (JVP) against analytic derivatives and
central finite differences in float64, and the two modes against each other (<Jv, w> = <v, J^T w>)."""

import numpy as np
import pytest

import gradkit as gk
from tests.builtin_table import BINARY, OPERATORS, UNARY, operator_kernel

F64 = gk.float64
SMOOTH = [n for n in sorted(UNARY) if n not in ("floor", "ceil", "round", "sign", "abs")]


def _unary(fn):
    @gk.kernel
    def k(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
        i = gk.tid()
        y[i] = fn(x[i])
    return k


def _binary(fn):
    @gk.kernel
    def k(a: gk.array(dtype=F64), b: gk.array(dtype=F64), y: gk.array(dtype=F64)):
        i = gk.tid()
        y[i] = fn(a[i], b[i])
    return k


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_vjp_and_jvp(name, device, rng):
    fn, ref, deriv, (lo, hi) = UNARY[name]
    x = rng.uniform(lo, hi, 33)
    if name in ("floor", "ceil", "round", "sign", "abs"):
        x = x[np.abs(x - np.round(x)) > 0.05]      # stay away from kinks
    n = len(x)
    k = _unary(fn)
    xa = gk.array(x, dtype=F64, device=device, requires_grad=True)
    ya = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    w = rng.normal(size=n)
    tape = gk.Tape()
    with tape:
        gk.launch(k, n, inputs=[xa], outputs=[ya], device=device)
    tape.backward(grads={ya: gk.array(w, dtype=F64, device=device)})
    analytic = deriv(x)
    np.testing.assert_allclose(xa.grad.numpy(), w * analytic, rtol=1e-9, atol=1e-12)
    if name in SMOOTH:
        np.testing.assert_allclose(xa.grad.numpy(), w * _fd(ref, x), rtol=1e-5, atol=1e-7)
    # Forward mode: J v, and the adjoint identity <J v, w> = <v, J^T w>.
    v = rng.normal(size=n)
    with gk.ForwardMode(seeds={xa: gk.array(v, dtype=F64, device=device)}):
        gk.launch(k, n, inputs=[xa], outputs=[ya], device=device)
    np.testing.assert_allclose(ya.dual.numpy(), analytic * v, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.dot(ya.dual.numpy(), w), np.dot(v, xa.grad.numpy()), rtol=1e-9)


@pytest.mark.parametrize("name", sorted(BINARY) + sorted(OPERATORS))
def test_binary_vjp_and_jvp(name, device, rng):
    if name in BINARY:
        fn, ref, (da, db), (ra, rb) = BINARY[name]
    else:
        fn, (da, db) = OPERATORS[name]
        ref, ra, rb = fn, (-2, 2), (0.5, 2)
    a = rng.uniform(*ra, 31)
    b = rng.uniform(*rb, 31)
    if name in ("min", "max"):
        keep = np.abs(a - b) > 0.05
        a, b = a[keep], b[keep]
    n = len(a)
    k = _binary(fn) if name in BINARY else operator_kernel(name, F64)
    aa = gk.array(a, dtype=F64, device=device, requires_grad=True)
    ba = gk.array(b, dtype=F64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    w = rng.normal(size=n)
    tape = gk.Tape()
    with tape:
        gk.launch(k, n, inputs=[aa, ba], outputs=[y], device=device)
    tape.backward(grads={y: gk.array(w, dtype=F64, device=device)})
    np.testing.assert_allclose(aa.grad.numpy(), w * da(a, b), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ba.grad.numpy(), w * db(a, b), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(aa.grad.numpy(), w * _fd(lambda t: ref(t, b), a), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ba.grad.numpy(), w * _fd(lambda t: ref(a, t), b), rtol=1e-5, atol=1e-7)
    va, vb = rng.normal(size=n), rng.normal(size=n)
    with gk.ForwardMode(seeds={aa: gk.array(va, dtype=F64, device=device), ba: gk.array(vb, dtype=F64, device=device)}):
        gk.launch(k, n, inputs=[aa, ba], outputs=[y], device=device)
    np.testing.assert_allclose(y.dual.numpy(), da(a, b) * va + db(a, b) * vb, rtol=1e-9, atol=1e-12)
    lhs = np.dot(y.dual.numpy(), w)
    rhs = np.dot(va, aa.grad.numpy()) + np.dot(vb, ba.grad.numpy())
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9)


@gk.kernel
def vec_energy(p: gk.array(dtype=gk.vec3d), m: gk.array(dtype=gk.mat33d), out: gk.array(dtype=F64)):
    i = gk.tid()
    x = p[i]
    a = m[i]
    y = a @ x
    e = gk.dot(y, gk.cross(x, y)) + gk.length(x) + gk.dot(gk.normalize(y), x) + gk.determinant(a) \
        + gk.trace(gk.inverse(a)) + gk.length_sq(gk.transpose(a) @ x) + gk.outer(x, y)[1, 2]
    gk.atomic_add(out, 0, e)


def test_vector_matrix_gradients(device, rng):
    n = 6
    p = rng.normal(size=(n, 3))
    m = rng.normal(size=(n, 3, 3)) + 3 * np.eye(3)

    def energy(p, m):
        y = np.einsum("nij,nj->ni", m, p)
        yn = y / np.linalg.norm(y, axis=1, keepdims=True)
        e = (np.sum(y * np.cross(p, y), 1) + np.linalg.norm(p, axis=1) + np.sum(yn * p, 1) + np.linalg.det(m)
             + np.trace(np.linalg.inv(m), axis1=1, axis2=2)
             + np.sum(np.einsum("nji,nj->ni", m, p) ** 2, 1) + p[:, 1] * y[:, 2])
        return e.sum()

    pa = gk.array(p, dtype=gk.vec3d, device=device, requires_grad=True)
    ma = gk.array(m, dtype=gk.mat33d, device=device, requires_grad=True)
    out = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(vec_energy, n, inputs=[pa, ma], outputs=[out], device=device)
    tape.backward(loss=out)
    np.testing.assert_allclose(out.numpy()[0], energy(p, m), rtol=1e-10)
    eps = 1e-6
    for arr, grad, shape in ((p, pa.grad.numpy(), p.shape), (m, ma.grad.numpy(), m.shape)):
        fd = np.zeros(shape)
        for idx in np.ndindex(shape):
            d = np.zeros(shape)
            d[idx] = eps
            if arr is p:
                fd[idx] = (energy(p + d, m) - energy(p - d, m)) / (2 * eps)
            else:
                fd[idx] = (energy(p, m + d) - energy(p, m - d)) / (2 * eps)
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)
