"""wp.transform and its builtins (dialects/warp/transforms.py) and wp.intersect_tri_tri (intersect.py) against
Warp 1.19, run in the same test on the same random inputs: values and reverse-mode gradients on every device,
the host-side transform (`.p`, `.q`, arrays of transforms), and intersection answers over many random pairs."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit.warp as gwp

warp = pytest.importorskip("warp")
warp.config.quiet = True

N = 64
_KERNELS: dict = {}


def _kernels(wp):
    if wp.__name__ not in _KERNELS:
        @wp.kernel
        def apply(xf: wp.array(dtype=wp.transform), p: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3),
                  composed: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
            i = wp.tid()
            t = xf[i]
            inv = wp.transform_inverse(t)
            a = wp.transform_point(inv, p[i]) + 2.0 * wp.transform_vector(t, p[i])
            b = wp.transform_multiply(t, wp.transform(p[i], wp.transform_get_rotation(inv)))
            out[i] = a + wp.transform_get_translation(b)
            composed[i] = b
            wp.atomic_add(loss, 0, wp.dot(a, a) + wp.sin(wp.transform_get_translation(b)[1]))

        @wp.kernel
        def tri_tri(v: wp.array(dtype=wp.vec3), u: wp.array(dtype=wp.vec3), hit: wp.array(dtype=int)):
            i = wp.tid()
            hit[i] = wp.intersect_tri_tri(v[3 * i], v[3 * i + 1], v[3 * i + 2], u[3 * i], u[3 * i + 1], u[3 * i + 2])

        _KERNELS[wp.__name__] = (apply, tri_tri)
    return _KERNELS[wp.__name__]


def _inputs(seed):
    rng = np.random.default_rng(seed)
    axes = rng.normal(size=(N, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    return rng.normal(size=(N, 3)) * 0.8, axes, rng.uniform(0, 2 * np.pi, N), rng.normal(size=(N, 3)).astype(np.float32)


def _run_apply(wp, device, seed=3):
    pos, axes, angles, pts = _inputs(seed)
    xfs = [wp.transform(wp.vec3(p), wp.quat_from_axis_angle(wp.vec3(a), float(t))) for p, a, t in zip(pos, axes, angles)]
    xf = wp.array(xfs, dtype=wp.transform, device=device, requires_grad=True)
    p = wp.array(pts, dtype=wp.vec3, device=device, requires_grad=True)
    out = wp.zeros(N, dtype=wp.vec3, device=device, requires_grad=True)
    composed = wp.zeros(N, dtype=wp.transform, device=device, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(_kernels(wp)[0], N, inputs=[xf, p, out, composed, loss], device=device)
    tape.backward(loss=loss)
    return [a.numpy().copy() for a in (xf, out, composed, loss, xf.grad, p.grad)], xfs[0]


@pytest.fixture(scope="module")
def warp_apply():
    return _run_apply(warp, "cpu")


def test_transform_builtins_match_warp(device, warp_apply):
    (got, first), (want, wfirst) = _run_apply(gwp, device), warp_apply
    for name, g, w in zip(("transforms", "out", "composed", "loss", "d loss/d xf", "d loss/d p"), got, want):
        scale = max(np.abs(w).max(), 1e-30)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * scale, err_msg=name)
    np.testing.assert_allclose(first.p, np.asarray(wfirst.p), rtol=1e-6)
    np.testing.assert_allclose(first.q, np.asarray(wfirst.q), rtol=1e-6)
    assert np.asarray(gwp.transform_identity()).tolist() == [0, 0, 0, 0, 0, 0, 1]


def test_transform_point_on_host_matches_numpy():
    pos, axes, angles, pts = _inputs(5)
    for k in range(4):
        t = gwp.transform(gwp.vec3(pos[k]), gwp.quat_from_axis_angle(gwp.vec3(axes[k]), float(angles[k])))
        a, c, s = axes[k], np.cos(angles[k]), np.sin(angles[k])
        r = c * np.eye(3) + s * np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]]) + \
            (1 - c) * np.outer(a, a)                                   # Rodrigues, float64
        np.testing.assert_allclose(gwp.transform_point(t, pts[k]), r @ pts[k] + pos[k], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gwp.transform_point(gwp.transform_inverse(t), r @ pts[k] + pos[k]), pts[k],
                                   rtol=1e-4, atol=1e-4)


def _triangles(seed, m=4000):
    """Random pairs in general position, then pairs in one plane (the coplanar branch): half in z = 0,
    half in a tilted plane."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(m, 3, 3)).astype(np.float32)
    u = (rng.normal(size=(m, 3, 3)) * 0.8 + rng.normal(size=(m, 1, 3)) * 0.6).astype(np.float32)
    v[m // 2:, :, 2] = 0.0
    u[m // 2:, :, 2] = 0.0
    tilt = 3 * m // 4
    v[tilt:, :, 2] = v[tilt:, :, 0] * 0.5
    u[tilt:, :, 2] = u[tilt:, :, 0] * 0.5
    return v.reshape(-1, 3), u.reshape(-1, 3), m


def _run_tri_tri(wp, device, seed=9):
    v, u, m = _triangles(seed)
    hit = wp.zeros(m, dtype=int, device=device)
    wp.launch(_kernels(wp)[1], m, inputs=[wp.array(v, dtype=wp.vec3, device=device),
                                          wp.array(u, dtype=wp.vec3, device=device), hit], device=device)
    return hit.numpy()


def test_intersect_tri_tri_matches_warp(device):
    want = _run_tri_tri(warp, "cpu")
    half = len(want) // 2
    assert 0.1 < want[:half].mean() < 0.9 and 0.1 < want[half:].mean() < 0.9
    np.testing.assert_array_equal(_run_tri_tri(gwp, device), want)


def test_transform_type_and_the_product_warp_defines_differently():
    """wp.transform is a type (annotations, dtypes, host constructor); `a * b` of two transforms, Warp's
    transform_multiply, is refused rather than multiplied componentwise, also inside a @wp.func."""
    assert gwp.types.vector(7, gwp.float32) is not gwp.transform and gwp.transform.ncomp == 7
    assert np.asarray(gwp.transform()).tolist() == [0, 0, 0, 0, 0, 0, 1]

    @gwp.func
    def squared(t: gwp.transform) -> gwp.transform:
        return t * t

    @gwp.kernel
    def k(a: gwp.array(dtype=gwp.transform), out: gwp.array(dtype=gwp.transform)):
        out[0] = squared(a[0])

    a = gwp.array([gwp.transform(gwp.vec3(1.0, 2.0, 3.0), gwp.quat_identity())], dtype=gwp.transform)
    with pytest.raises(gwp.WarpFeatureMissing, match="transform_multiply"):
        gwp.launch(k, 1, inputs=[a, gwp.zeros(1, dtype=gwp.transform)])

