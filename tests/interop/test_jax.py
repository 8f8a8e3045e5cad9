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
