"""JAX interop on every device: gk.to_jax hands a host-memory array over through DLPack (the same memory)
and copies otherwise; gk.from_jax copies (JAX arrays are immutable); vector dtypes as trailing dimensions;
a 64-bit array without JAX's 64-bit mode is refused instead of rounded; misuse is a clear error."""

import numpy as np
import pytest

import gradkit as gk

jax = pytest.importorskip("jax", reason="the JAX interop tests need jax (make test installs jax[cpu])")


@pytest.fixture
def x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def test_round_trips(device, rng, x64):
    x0 = rng.normal(size=(5, 3))
    a = gk.array(x0, dtype=gk.vec3d, device=device)
    j = gk.to_jax(a)
    assert j.shape == (5, 3) and j.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(j), x0)
    b = gk.from_jax(j * 2.0, dtype=gk.vec3d, device=device)
    assert b.shape == (5,) and b.dtype is gk.vec3d and b.device.name == device
    np.testing.assert_array_equal(b.numpy(), 2 * x0)
    c = gk.from_jax(jax.numpy.arange(4, dtype=jax.numpy.int32), device=device)
    assert c.dtype is gk.int32 and list(c.numpy()) == [0, 1, 2, 3]
    b.numpy()                                         # from_jax copied: the JAX array is untouched by writes
    b.assign(np.zeros((5, 3)))
    assert float(np.abs(np.asarray(j)).sum()) > 0


def test_float32_without_x64_and_refusals(device, rng):
    a = gk.array(rng.normal(size=4).astype(np.float32), device=device)
    np.testing.assert_array_equal(np.asarray(gk.to_jax(a)), a.numpy())
    if not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match=r"a: a float64 array needs JAX's 64-bit mode"):
            gk.to_jax(gk.zeros(3, dtype=gk.float64, device=device))
    with pytest.raises(TypeError, match=r"x: gk.from_jax takes a jax.Array"):
        gk.from_jax(np.zeros(3), device=device)
    with pytest.raises(ValueError, match=r"x: an array of shape \(4, 2\) cannot hold vec3 elements"):
        gk.from_jax(jax.numpy.zeros((4, 2)), dtype=gk.vec3, device=device)


@gk.kernel
def springs(p: gk.array(dtype=gk.vec3d), k: gk.array(dtype=gk.float64), e: gk.array(dtype=gk.float64)):
    i = gk.tid()
    d = p[i] - p[(i + 1) % p.shape[0]]
    e[i] = 0.5 * k[i] * (gk.length(d) - 1.0) ** 2 + gk.sin(k[i]) * d.x


def _energy_on(device):
    def energy(p, k):
        e = gk.zeros(k.shape[0], dtype=gk.float64, device=device)
        gk.launch(springs, k.shape[0], inputs=[p, k], outputs=[e], device=device)
        return e
    return energy


def _reference(p, k):
    d = p - np.roll(p, -1, 0)
    return 0.5 * k * (np.linalg.norm(d, axis=1) - 1) ** 2 + np.sin(k) * d[:, 0]


def test_jax_function_under_jit_grad_and_vmap(device, rng, x64):
    from jax.test_util import check_grads
    jnp = jax.numpy
    f = gk.jax_function(_energy_on(device), dtypes=[gk.vec3d, None], device=device)
    p, k = jnp.asarray(rng.normal(size=(6, 3))), jnp.asarray(rng.uniform(0.5, 2.0, 6))
    np.testing.assert_allclose(np.asarray(jax.jit(f)(p, k)), _reference(np.asarray(p), np.asarray(k)), rtol=1e-12)
    check_grads(f, (p, k), order=1, modes=["rev"], eps=1e-6, atol=1e-6, rtol=1e-6)
    g = jax.jit(jax.grad(lambda p, k: jnp.sum(f(p, k) ** 2), argnums=1))(p, k)
    pn, kn = np.asarray(p), np.asarray(k)
    d = pn - np.roll(pn, -1, 0)
    length = np.linalg.norm(d, axis=1)
    e = _reference(pn, kn)
    np.testing.assert_allclose(np.asarray(g), 2 * e * (0.5 * (length - 1) ** 2 + np.cos(kn) * d[:, 0]), rtol=1e-10)
    batch = jax.vmap(f)(jnp.stack([p, 2 * p]), jnp.stack([k, k]))            # one launch per batch element
    np.testing.assert_allclose(np.asarray(batch[1]), _reference(2 * pn, kn), rtol=1e-12)


def test_from_jax_and_jax_function_follow_gk_array_value_rules(device, x64):
    """A value that does not fit the element type is a ValueError naming the argument, as in gk.array (issue
    37): from_jax and jax_function wrapped 2**40 to 0 as int32 and gave inf for 1e40 as float32."""
    jnp = jax.numpy
    with pytest.raises(ValueError, match=r"x: 1099511627776 at index 1 does not fit int32"):
        gk.from_jax(jnp.array([1, 2**40], dtype=jnp.int64), dtype=gk.int32, device=device)
    with pytest.raises(ValueError, match=r"x: 1e\+40 at index 0 does not fit float32"):
        gk.from_jax(jnp.array([1e40]), dtype=gk.float32, device=device)
    with pytest.raises(ValueError, match=r"x: gk.array supports 1 to 4 dimensions, x has 6"):
        gk.from_jax(jnp.zeros((1,) * 6), device=device)
    u = gk.from_jax(jnp.array([1, 2**32 - 1], dtype=jnp.uint32), device=device)
    assert u.dtype is gk.uint32 and list(u.numpy()) == [1, 2**32 - 1]

    def twice(x):
        y = gk.zeros(x.shape[0], dtype=gk.float32, device=device)
        gk.launch(to_float, x.shape[0], inputs=[x], outputs=[y], device=device)
        return y

    f = gk.jax_function(twice, dtypes=[gk.int32], device=device)
    np.testing.assert_array_equal(np.asarray(f(jnp.array([1, 2], dtype=jnp.int64))), [2.0, 4.0])
    with pytest.raises(ValueError, match=r"argument 0: 1099511627776 at index 1 does not fit int32"):
        f(jnp.array([1, 2**40], dtype=jnp.int64))


@gk.kernel
def to_float(x: gk.array(dtype=gk.int32), y: gk.array(dtype=gk.float32)):
    i = gk.tid()
    y[i] = 2.0 * gk.float32(x[i])
