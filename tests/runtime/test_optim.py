"""`gk.optim.SGD` and `gk.optim.Adam` (warp.optim's classes, PyTorch's update rules) as kernels on every
device: several steps against a float64 NumPy reference of the rule for float32/float64 scalar and vector
parameters, a training loop through a gk.Tape that converges, and errors naming the argument."""

import numpy as np
import pytest

import gradkit as gk


def sgd_reference(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p, b = p.astype(np.float64).copy(), None
    for t, g in enumerate(grads):
        d = g + weight_decay * p
        if momentum:
            b = d.copy() if t == 0 else momentum * b + (1 - dampening) * d
            d = d + momentum * b if nesterov else b
        p = p - lr * d
    return p


def adam_reference(p, grads, lr, betas=(0.9, 0.999), eps=1e-8):
    p, m, v = p.astype(np.float64).copy(), np.zeros_like(p, np.float64), np.zeros_like(p, np.float64)
    for t, g in enumerate(grads, 1):
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        p = p - lr * (m / (1 - betas[0] ** t)) / (np.sqrt(v / (1 - betas[1] ** t)) + eps)
    return p


DTYPES = [(gk.float32, ()), (gk.float64, ()), (gk.vec3, (3,)), (gk.vec2d, (2,))]
SGD_OPTIONS = [dict(), dict(momentum=0.9), dict(momentum=0.8, dampening=0.3, weight_decay=0.01),
               dict(momentum=0.9, nesterov=True, weight_decay=0.05)]


def _data(rng, dtype, comp, steps):
    np_dt = np.float32 if dtype.scalar is gk.float32 else np.float64
    p0 = rng.normal(size=(5, *comp)).astype(np_dt)
    grads = [rng.normal(size=p0.shape).astype(np_dt) for _ in range(steps)]
    return p0, grads, (dict(rtol=2e-5, atol=2e-6) if np_dt is np.float32 else dict(rtol=1e-12, atol=1e-14))


@pytest.mark.parametrize("dtype,comp", DTYPES, ids=[d[0].name for d in DTYPES])
@pytest.mark.parametrize("options", SGD_OPTIONS, ids=["plain", "momentum", "dampening", "nesterov"])
def test_sgd_matches_the_rule(dtype, comp, options, device, rng):
    p0, grads, tol = _data(rng, dtype, comp, 4)
    p = gk.array(p0, dtype=dtype, device=device)
    opt = gk.optim.SGD([p], lr=0.1, **options)
    for g in grads:
        opt.step([gk.array(g, dtype=dtype, device=device)])
    np.testing.assert_allclose(p.numpy(), sgd_reference(p0, grads, 0.1, **options), **tol)


@pytest.mark.parametrize("dtype,comp", DTYPES, ids=[d[0].name for d in DTYPES])
def test_adam_matches_the_rule(dtype, comp, device, rng):
    p0, grads, tol = _data(rng, dtype, comp, 5)
    p, q = gk.array(p0, dtype=dtype, device=device), gk.array(p0 * 2, dtype=dtype, device=device)
    opt = gk.optim.Adam([p, q], lr=0.05, betas=(0.8, 0.99), eps=1e-6)
    for g in grads:
        opt.step([gk.array(g, dtype=dtype, device=device), gk.array(-g, dtype=dtype, device=device)])
    np.testing.assert_allclose(p.numpy(), adam_reference(p0, grads, 0.05, (0.8, 0.99), 1e-6), **tol)
    np.testing.assert_allclose(q.numpy(), adam_reference(p0 * 2, [-g for g in grads], 0.05, (0.8, 0.99), 1e-6),
                               **tol)
    opt.reset_internal_state()                     # a fresh start: the first step again
    before = p.numpy().copy()
    opt.step([gk.array(grads[0], dtype=dtype, device=device), gk.array(grads[0], dtype=dtype, device=device)])
    np.testing.assert_allclose(p.numpy(), adam_reference(before, grads[:1], 0.05, (0.8, 0.99), 1e-6), **tol)


@gk.kernel
def quadratic(x: gk.array(dtype=gk.vec2d), target: gk.array(dtype=gk.vec2d), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = x[i] - target[i]
    gk.atomic_add(loss, 0, gk.dot(d, d) * (1.0 + float(i)))


@pytest.mark.parametrize("make", [lambda ps: gk.optim.SGD(ps, lr=0.05, momentum=0.5),
                                  lambda ps: gk.optim.Adam(ps, lr=0.2)], ids=["sgd", "adam"])
def test_training_loop_converges(make, device, rng):
    target_np = rng.normal(size=(4, 2))
    x = gk.zeros(4, dtype=gk.vec2d, device=device, requires_grad=True)
    target = gk.array(target_np, dtype=gk.vec2d, device=device)
    opt = make([x])
    losses = []
    for _ in range(150):
        loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
        with gk.Tape() as tape:
            gk.launch(quadratic, 4, inputs=[x, target, loss], device=device)
        tape.backward(loss=loss)
        opt.step([x.grad])
        tape.zero()
        losses.append(float(loss.numpy()[0]))
    assert losses[-1] < 1e-4 * losses[0]
    np.testing.assert_allclose(x.numpy(), target_np, atol=1e-2)


def test_errors_name_the_argument(device):
    p = gk.zeros(3, dtype=gk.float32, device=device)
    with pytest.raises(TypeError, match=r"params\[0\] must hold float32 or float64 values, got int32"):
        gk.optim.SGD([gk.zeros(3, dtype=gk.int32, device=device)])
    with pytest.raises(TypeError, match=r"params\[1\] must be a gk.array, got ndarray"):
        gk.optim.Adam([p, np.zeros(3)])
    opt = gk.optim.Adam([p])
    with pytest.raises(ValueError, match=r"one gradient per parameter \(1\), got 2"):
        opt.step([p, p])
    with pytest.raises(ValueError, match=r"grad\[0\] must match params\[0\] \(float32\[3\]"):
        opt.step([gk.zeros(4, dtype=gk.float32, device=device)])
