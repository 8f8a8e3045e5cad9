"""Random numbers (Warp's rand_init / randf / randi / randn): the same stream, bit for bit, on every
device and on the host, against an independent pure-Python model of the PCG hash; uniformity and
normality with fixed seeds; distinct offsets and seeds give distinct streams; the state advances through
loops and branches; draws carry no gradient while the rest of a kernel differentiates (reverse and
forward mode); misuse is a CompileError."""

import math

import numpy as np
import pytest

import gradkit as gk
from gradkit.conformance.references import M, pcg
from tests.compile_errors import assert_compile_error



def model_stream(seed: int, offset: int, n: int):
    """(state after rand_init, then per iteration: randf, randn, randi(-3, 7)) as the kernel below draws."""
    s = pcg((seed + pcg(offset & M)) & M)
    first, out = s, []
    for _ in range(n):
        s = pcg(s)
        f = (s >> 8) / 16777216.0
        s1 = pcg(s)
        s2 = pcg(s1)
        u1 = np.float32(1.0) - np.float32((s1 >> 8) / 16777216.0)
        u2 = np.float32((s2 >> 8) / 16777216.0)
        z = math.sqrt(-2.0 * math.log(float(u1))) * math.cos(2 * math.pi * float(u2))
        s = pcg(s2)
        r = s % 10 - 3
        out.append((f, z, r))
    return first, out


@gk.kernel
def draws(seed: int, f: gk.array(dtype=gk.float32, ndim=2), z: gk.array(dtype=gk.float32, ndim=2),
          r: gk.array(dtype=gk.int32, ndim=2), first: gk.array(dtype=gk.uint32)):
    i = gk.tid()
    state = gk.rand_init(seed, i)
    first[i] = state
    for j in range(f.shape[1]):              # the state is carried through the loop
        f[i, j] = gk.randf(state)
        z[i, j] = gk.randn(state)
        r[i, j] = gk.randi(state, -3, 7)


def _run(device, seed, n, m):
    f, z = gk.zeros((n, m), dtype=gk.float32, device=device), gk.zeros((n, m), dtype=gk.float32, device=device)
    r, first = gk.zeros((n, m), dtype=gk.int32, device=device), gk.zeros(n, dtype=gk.uint32, device=device)
    gk.launch(draws, n, inputs=[seed, f, z, r, first], device=device)
    return f.numpy(), z.numpy(), r.numpy(), first.numpy()


def test_same_stream_on_every_device_as_the_model(device):
    f, z, r, first = _run(device, 1234, 6, 5)
    for i in range(6):
        s0, rows = model_stream(1234, i, 5)
        assert int(first[i]) == s0
        np.testing.assert_array_equal(f[i], np.array([x[0] for x in rows], np.float32))
        np.testing.assert_array_equal(r[i], [x[2] for x in rows])
        np.testing.assert_allclose(z[i], [x[1] for x in rows], rtol=2e-6, atol=2e-6)
    assert int(gk.rand_init(1234, 3)) == model_stream(1234, 3, 0)[0]          # the host agrees too
    assert gk.randf(gk.rand_init(1234, 0)) == np.float32(model_stream(1234, 0, 1)[1][0][0])


@gk.kernel
def bounded(lo: float, hi: float, seed: int, by_args: gk.array(dtype=gk.float32), by_literals: gk.array(dtype=gk.float32),
            unit: gk.array(dtype=gk.float32)):
    i = gk.tid()
    a = gk.rand_init(seed, i)
    by_args[i] = gk.randf(a, lo, hi)
    b = gk.rand_init(seed, i)
    by_literals[i] = gk.randf(b, -2.5, 4.0)
    c = gk.rand_init(seed, i)
    unit[i] = gk.randf(c)


def test_randf_bounds_from_parameters_or_literals(device):
    """randf(state, lo, hi) with the bounds a kernel's own float parameters (a TypeError before) or literals:
    lo + (hi - lo) * randf(state), the same draws either way."""
    n = 256
    outs = [gk.zeros(n, dtype=gk.float32, device=device) for _ in range(3)]
    gk.launch(bounded, n, inputs=[-2.5, 4.0, 99, *outs], device=device)
    by_args, by_literals, unit = (o.numpy() for o in outs)
    np.testing.assert_array_equal(by_args, by_literals)
    np.testing.assert_allclose(by_args, np.float32(-2.5) + np.float32(6.5) * unit, rtol=1e-6, atol=1e-6)
    assert by_args.min() >= -2.5 and by_args.max() < 4.0 and by_args.std() > 1.0


def test_distributions(device):
    f, z, r, _ = _run(device, 7, 2000, 25)
    f, z, r = f.ravel().astype(np.float64), z.ravel().astype(np.float64), r.ravel()
    assert 0.0 <= f.min() and f.max() < 1.0
    assert abs(f.mean() - 0.5) < 0.005 and abs(f.var() - 1 / 12) < 0.002
    ks = np.max(np.abs(np.sort(f) - (np.arange(1, f.size + 1) - 0.5) / f.size))
    assert ks < 0.01
    assert abs(z.mean()) < 0.02 and abs(z.var() - 1) < 0.03
    assert abs(np.mean(np.abs(z) < 1.0) - 0.6827) < 0.01
    counts = np.bincount(r + 3, minlength=10)
    assert r.min() == -3 and r.max() == 6 and counts.min() > 0.9 * counts.mean()


def test_streams_differ_by_offset_and_seed(device):
    f1, _, _, s1 = _run(device, 99, 64, 4)
    f2, _, _, s2 = _run(device, 100, 64, 4)
    assert len(set(s1.tolist())) == 64 and len(set(s2.tolist()) & set(s1.tolist())) == 0
    assert len({tuple(row) for row in f1}) == 64
    np.testing.assert_array_equal(_run(device, 99, 64, 4)[0], f1)                  # deterministic


@gk.kernel
def noisy(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64), noise: gk.array(dtype=gk.float64)):
    i = gk.tid()
    state = gk.rand_init(5, i)
    if x[i] > 0.0:                       # the state advances on one path only: merged after the branch
        gk.randf(state)
    e = gk.float64(gk.randn(state))
    noise[i] = e
    y[i] = x[i] * e + gk.sin(x[i]) * gk.float64(gk.randf(state, 0.5, 1.5))


def test_draws_have_no_gradient_but_the_kernel_does(device, rng):
    x0 = rng.uniform(-1, 1, 8)
    x = gk.array(x0, dtype=gk.float64, device=device, requires_grad=True)
    y, noise = gk.zeros(8, dtype=gk.float64, device=device, requires_grad=True), gk.zeros(8, dtype=gk.float64,
                                                                                         device=device)
    with gk.Tape() as tape:
        gk.launch(noisy, 8, inputs=[x, y, noise], device=device)
    e = noise.numpy()
    scale = (y.numpy() - x0 * e) / np.sin(x0)
    assert np.all((scale >= 0.5) & (scale < 1.5))
    tape.backward(grads={y: gk.array(np.ones(8), device=device)})
    np.testing.assert_allclose(x.grad.numpy(), e + np.cos(x0) * scale, rtol=1e-9)
    with gk.ForwardMode(seeds={x: gk.array(np.ones(8), device=device)}):
        gk.launch(noisy, 8, inputs=[x, y, noise], device=device)
        np.testing.assert_allclose(y.dual.numpy(), e + np.cos(x0) * scale, rtol=1e-9)


def state_not_local(y: gk.array(dtype=gk.float32)):
    y[0] = gk.randf(gk.rand_init(1))


def float_state(y: gk.array(dtype=gk.float32)):
    s = 1.0
    y[0] = gk.randf(s)


def half_range(y: gk.array(dtype=gk.float32)):
    s = gk.rand_init(1)
    y[0] = gk.randf(s, 0.5)


def float_seed(y: gk.array(dtype=gk.float32)):
    s = gk.rand_init(1.5)


ERRORS = [
    (state_not_local, "gk.randf(gk.rand_init(1))", r"randf\(state, \.\.\.\) needs a local variable"),
    (float_state, "gk.randf(s)", r"randf\(\): state must be a uint32 random state from gk.rand_init, got float32"),
    (half_range, "gk.randf(s, 0.5)", r"randf\(\): give both lo and hi, or neither"),
    (float_seed, "gk.rand_init(1.5)", r"rand_init\(\): seed must be an integer, got float32"),
]


@pytest.mark.parametrize("fn,snippet,message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_compile_errors(fn, snippet, message):
    assert_compile_error(fn, snippet, message)
