"""Zero-copy array views (Warp's `a.reshape`, `a.flatten`, `a.view(dtype)`): memory shared both ways on
every device, kernels launched on views forward and under a tape (gradients landing in the base's
`.grad`, against NumPy float64), writes through a view caught by the tape like writes to the base,
`gk.copy` with offsets between views, and clear errors naming the argument."""

import numpy as np
import pytest

import gradkit as gk

F64 = gk.float64


@gk.kernel
def square_1d(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def row_sums(x: gk.array(dtype=F64, ndim=2), s: gk.array(dtype=F64)):
    i, j = gk.tid()
    s[i] += gk.sin(x[i, j])


@gk.kernel
def vec_len(v: gk.array(dtype=gk.vec3d), out: gk.array(dtype=F64)):
    i = gk.tid()
    out[i] = gk.length(v[i])


def test_memory_is_shared_both_ways(device, rng):
    data = rng.normal(size=(3, 4))
    a = gk.array(data, dtype=F64, device=device)
    flat, r = a.flatten(), a.reshape((2, -1))
    assert flat.shape == (12,) and r.shape == (2, 6) and flat.device is a.device
    np.testing.assert_array_equal(flat.numpy(), data.reshape(-1))
    flat[5] = 100.0                                  # through the view ...
    assert a.numpy()[1, 1] == 100.0 and r.numpy()[0, 5] == 100.0
    a.assign(np.zeros((3, 4)))                       # ... and through the base
    np.testing.assert_array_equal(r.numpy(), 0.0)
    gk.launch(square_1d, 12, inputs=[gk.array(np.arange(12.0), dtype=F64, device=device), flat], device=device)
    np.testing.assert_array_equal(a.numpy(), np.arange(12.0).reshape(3, 4) ** 2)


def test_view_dtype_reinterprets(device, rng):
    v = gk.array(rng.normal(size=(5, 3)), dtype=gk.vec3d, device=device)
    w = v.view(gk.vec3d)
    assert w.shape == (5,) and w.dtype is gk.vec3d
    f = gk.array(np.array([1.0, -2.0], np.float32), dtype=gk.float32, device=device)
    bits = f.view(gk.int32)
    np.testing.assert_array_equal(bits.numpy(), np.array([1.0, -2.0], np.float32).view(np.int32))
    u = f.view(gk.uint32)
    u[0] = np.float32(3.5).view(np.uint32)
    assert f.numpy()[0] == 3.5
    two = gk.zeros(4, dtype=gk.vec2, device=device).view(gk.float64)   # 8 bytes either way
    assert two.shape == (4,) and two.dtype is gk.float64
    with pytest.raises(ValueError, match="view\\(dtype\\): vec3d elements take 24 bytes but this array's float32"):
        f.view(gk.vec3d)
    with pytest.raises(TypeError, match="dtype"):
        f.view("not a dtype")


def test_reshape_errors_name_the_shape(device):
    a = gk.zeros((3, 4), dtype=F64, device=device)
    with pytest.raises(ValueError, match=r"cannot reshape an array of shape \(3, 4\) \(12 elements\) to \(5, 2\)"):
        a.reshape((5, 2))
    with pytest.raises(ValueError, match="at most one dimension may be -1"):
        a.reshape((-1, -1))
    with pytest.raises(ValueError, match=r"cannot reshape an array of 12 elements to \(5, -1\)"):
        a.reshape((5, -1))
    with pytest.raises(TypeError, match="shape must be an int or a tuple of ints"):
        a.reshape((2.0, 6))
    assert a.reshape(12).shape == (12,) and a.reshape((2, 2, 3)).ndim == 3


def test_gradients_through_views_land_in_the_base(device, rng):
    data = rng.normal(size=(4, 3))
    x = gk.array(data, dtype=F64, device=device, requires_grad=True)
    y = gk.zeros((4, 3), dtype=F64, device=device, requires_grad=True)
    s = gk.zeros(6, dtype=F64, device=device, requires_grad=True)
    xf, yf = x.flatten(), y.flatten()
    assert xf.grad is not None and xf.grad.shape == (12,)
    with gk.Tape() as tape:
        gk.launch(square_1d, 12, inputs=[xf, yf], device=device)                       # y = x² on flat views
        gk.launch(row_sums, (6, 2), inputs=[y.reshape((6, 2)), s], device=device)      # s = Σ sin(y) in pairs
    w = rng.normal(size=6)
    tape.backward(grads={s: gk.array(w, device=device)})
    np.testing.assert_allclose(s.numpy(), np.sin(data.reshape(6, 2) ** 2).sum(1), rtol=1e-12)
    want = (np.repeat(w, 2) * np.cos(data.reshape(-1) ** 2) * 2 * data.reshape(-1)).reshape(4, 3)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(xf.grad.numpy(), want.reshape(-1), rtol=1e-12)


def test_forward_mode_through_a_view(device, rng):
    data, dirs = rng.normal(size=(2, 6)), rng.normal(size=(2, 6))
    v = gk.array(data.reshape(4, 3), dtype=gk.vec3d, device=device)
    out = gk.zeros(4, dtype=F64, device=device)
    flat = gk.array(data.reshape(-1), dtype=F64, device=device)
    with gk.ForwardMode(seeds={v: gk.array(dirs.reshape(4, 3), dtype=gk.vec3d, device=device)}):
        gk.launch(vec_len, 4, inputs=[v.view(gk.vec3d), out], device=device)
        got = out.dual.numpy().copy()
    p = data.reshape(4, 3)
    np.testing.assert_allclose(got, (p * dirs.reshape(4, 3)).sum(1) / np.linalg.norm(p, axis=1), rtol=1e-12)
    assert flat.size == 12


def test_writes_through_a_view_are_caught_by_the_tape(device, rng):
    x = gk.array(rng.normal(size=(3, 4)), dtype=F64, device=device, requires_grad=True)
    y = gk.zeros(12, dtype=F64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(square_1d, 12, inputs=[x.flatten(), y], device=device)
    x.reshape(12)[0] = 5.0                 # the recorded input, overwritten through another view
    with pytest.raises(gk.GradientRuleError):
        tape.backward(grads={y: gk.array(np.ones(12), device=device)})


def test_copy_between_views_with_offsets(device, rng):
    data = rng.normal(size=(3, 4))
    src = gk.array(data, dtype=F64, device=device, requires_grad=True)
    dst = gk.zeros((2, 6), dtype=F64, device=device, requires_grad=True)
    out = gk.zeros(12, dtype=F64, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.copy(dst.flatten(), src.flatten(), dest_offset=2, src_offset=4, count=5)
        gk.launch(square_1d, 12, inputs=[dst.flatten(), out], device=device)
    want = np.zeros(12)
    want[2:7] = data.reshape(-1)[4:9]
    np.testing.assert_array_equal(dst.numpy().reshape(-1), want)
    w = rng.normal(size=12)
    tape.backward(grads={out: gk.array(w, device=device)})
    g = np.zeros(12)
    g[4:9] = 2 * want[2:7] * w[2:7]
    np.testing.assert_allclose(src.grad.numpy().reshape(-1), g, rtol=1e-12)
