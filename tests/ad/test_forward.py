"""Forward mode: tangent kernels, function transforms (gk.grad / gk.jvp, nested) and
forward-over-reverse Hessian-vector products, against analytic references."""

import numpy as np
import pytest

import gradkit as gk


@gk.func
def f(x: float) -> float:
    return x ** 3 + 2.0 * x ** 2 - 3.0 * x + 1.0


@gk.func
def g(x1: float, x2: float, x3: float) -> float:
    return x1 ** 3 + 2.0 * x2 ** 2 - 3.0 * x3 + 1.0


df = gk.grad(f)
d2f = gk.grad(gk.grad(f))
jf = gk.jvp(f)


@gk.kernel
def transforms(out: gk.array(dtype=float)):
    out[0] = df(1.0)
    out[1] = d2f(1.0)
    out[2] = gk.grad(g, argnum=0)(1.0, 2.0, 3.0)
    out[3] = gk.grad(g, argnum=1)(1.0, 2.0, 3.0)
    out[4] = gk.grad(g, argnum=2)(1.0, 2.0, 3.0)
    v, t = jf(2.0, 0.5)
    out[5] = v
    out[6] = t


def test_function_transforms_reference(device):
    out = gk.zeros(7, device=device)
    gk.launch(transforms, 1, outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), [4.0, 10.0, 3.0, 8.0, -3.0, 8 + 8 - 6 + 1, 0.5 * (12 + 8 - 3)])


def test_transforms_are_cached():
    assert gk.grad(f) is gk.grad(f)
    assert gk.jvp(f) is gk.jvp(f)


@gk.kernel
def carried(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), n: int):
    i = gk.tid()
    acc = x[i]
    for k in range(n):
        acc = gk.sin(acc) * x[i] + acc
    y[i] = acc


def test_tangent_through_loop_matches_fd(device, rng):
    x = rng.uniform(-1, 1, 9)
    v = rng.normal(size=9)

    def ref(x):
        acc = x.copy()
        for _ in range(5):
            acc = np.sin(acc) * x + acc
        return acc
    xa = gk.array(x, dtype=gk.float64, device=device)
    ya = gk.zeros(9, dtype=gk.float64, device=device)
    with gk.ForwardMode(seeds={xa: gk.array(v, dtype=gk.float64, device=device)}):
        gk.launch(carried, 9, inputs=[xa, ya, 5], device=device)
    eps = 1e-6
    np.testing.assert_allclose(ya.numpy(), ref(x), rtol=1e-12)
    np.testing.assert_allclose(ya.dual.numpy(), (ref(x + eps * v) - ref(x - eps * v)) / (2 * eps), rtol=1e-6)


@gk.kernel
def quadratic(A: gk.array(dtype=gk.float64, ndim=2), x: gk.array(dtype=gk.float64), e: gk.array(dtype=gk.float64)):
    i, j = gk.tid()
    gk.atomic_add(e, 0, 0.5 * x[i] * A[i, j] * x[j] + gk.sin(x[i]) * 0.1)


def test_hessian_vector_product_forward_over_reverse(device, rng):
    n = 6
    A = rng.normal(size=(n, n))
    x = rng.normal(size=n)
    v = rng.normal(size=n)
    Aa = gk.array(A, dtype=gk.float64, device=device)
    xa = gk.array(x, dtype=gk.float64, device=device, requires_grad=True)
    e = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.ForwardMode(seeds={xa: gk.array(v, dtype=gk.float64, device=device)}):
        tape = gk.Tape()
        with tape:
            gk.launch(quadratic, (n, n), inputs=[Aa, xa], outputs=[e], device=device)
        tape.backward(loss=e)
    H = 0.5 * (A + A.T) - np.diag(0.1 * n * np.sin(x))   # the sin term is added once per j
    np.testing.assert_allclose(xa.grad.numpy(), 0.5 * (A + A.T) @ x + 0.1 * n * np.cos(x), rtol=1e-10)
    np.testing.assert_allclose(xa.grad.dual.numpy(), H @ v, rtol=1e-10)


@gk.kernel
def nbody_energy(x: gk.array(dtype=gk.vec2d), U: gk.array(dtype=gk.float64)):
    i = gk.tid()
    acc = 0.0
    for j in range(x.shape[0]):
        d = x[i] - x[j]
        acc += -1.0 / gk.sqrt(gk.dot(d, d) + 1e-3)
    gk.atomic_add(U, 0, acc)


def test_nbody_hvp(device, rng):
    n = 5
    x = rng.normal(size=(n, 2))
    v = rng.normal(size=(n, 2))

    def grad(x):
        d = x[:, None, :] - x[None, :, :]
        r2 = np.sum(d * d, 2) + 1e-3
        return 2 * np.sum(d * r2[:, :, None] ** -1.5, axis=1)
    xa = gk.array(x, dtype=gk.vec2d, device=device, requires_grad=True)
    U = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.ForwardMode(seeds={xa: gk.array(v, dtype=gk.vec2d, device=device)}):
        tape = gk.Tape()
        with tape:
            gk.launch(nbody_energy, n, inputs=[xa], outputs=[U], device=device)
        tape.backward(loss=U)
    np.testing.assert_allclose(xa.grad.numpy(), grad(x), rtol=1e-9)
    eps = 1e-6
    np.testing.assert_allclose(xa.grad.dual.numpy(), (grad(x + eps * v) - grad(x - eps * v)) / (2 * eps),
                               rtol=1e-5, atol=1e-6)


@gk.kernel
def while_one_float(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = x[i]
    while s < 10.0:
        s = s * s + 1.0
    y[i] = s


@gk.kernel
def while_float_and_int(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = x[i]
    n = int(0)
    while s < 10.0:
        s = s * s + 1.0
        n += 1
    y[i] = s + float(n)


def _while_reference(v: float) -> tuple[float, float, int]:
    s, d, n = v, 1.0, 0
    while s < 10.0:
        s, d, n = s * s + 1.0, 2.0 * s * d, n + 1
    return s, d, n


def test_tangent_through_while_loops(device, rng):
    """A while loop carrying exactly one float had its condition region given a tangent yield (malformed IR,
    found by the golden tests); with an int beside it, the shapes differ. Both against float64."""
    xs = rng.uniform(0.5, 3.0, 64).astype(np.float32)
    v = rng.standard_normal(64).astype(np.float32)
    ref = [_while_reference(float(a)) for a in xs.astype(np.float64)]
    for kernel, extra in ((while_one_float, 0), (while_float_and_int, 1)):
        x, y = gk.array(xs, device=device), gk.zeros(64, device=device)
        with gk.ForwardMode(seeds={x: gk.array(v, device=device)}):
            gk.launch(kernel, 64, inputs=[x], outputs=[y], device=device)
            dy = y.dual.numpy()
        np.testing.assert_allclose(y.numpy(), [s + extra * n for s, _, n in ref], rtol=1e-5)
        np.testing.assert_allclose(dy, [d * t for (_, d, _), t in zip(ref, v.astype(np.float64))], rtol=1e-4)


@gk.kernel
def cubic_sum(x: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i] * x[i] + gk.sin(x[i]))


def test_taichi_fwdmode_spelling(device, rng):
    """Taichi's `ti.ad.FwdMode(loss=loss, param=x, seed=[...])`: the directional derivative lands in
    loss.dual; a one-element param defaults to seed [1.0]."""
    x0 = rng.normal(size=4)
    x = gk.array(x0, dtype=gk.float64, device=device)
    loss = gk.zeros(1, dtype=gk.float64, device=device)
    seed = rng.normal(size=4)
    with gk.ForwardMode(loss=loss, param=x, seed=list(seed)):
        gk.launch(cubic_sum, 4, inputs=[x], outputs=[loss], device=device)
    np.testing.assert_allclose(loss.dual.numpy(), [np.sum((3 * x0 ** 2 + np.cos(x0)) * seed)], rtol=1e-12)
    np.testing.assert_array_equal(x.dual.numpy(), 0.0)       # the seed is cleared on exit, as Taichi does
    one = gk.array([0.7], dtype=gk.float64, device=device)
    loss2 = gk.zeros(1, dtype=gk.float64, device=device)
    with gk.ForwardMode(loss=loss2, param=one):
        gk.launch(cubic_sum, 1, inputs=[one], outputs=[loss2], device=device)
    np.testing.assert_allclose(loss2.dual.numpy(), [3 * 0.49 + np.cos(0.7)], rtol=1e-12)
    with pytest.raises(ValueError, match=r"has 4 elements, so seed= must give the direction"):
        gk.ForwardMode(loss=loss, param=x)
    with pytest.raises(ValueError, match=r"seed has 3 numbers for an array of 4 elements"):
        gk.ForwardMode(param=x, seed=[1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"not both"):
        gk.ForwardMode(seeds={x: x}, param=x, seed=list(seed))
    with pytest.raises(TypeError, match=r"needs param="):
        gk.ForwardMode(seed=[1.0])
