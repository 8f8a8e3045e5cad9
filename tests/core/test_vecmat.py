"""Vector and matrix types: construction, components, operators and linear-algebra builtins."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def vec_ops(a: gk.array(dtype=gk.vec3), b: gk.array(dtype=gk.vec3), s: gk.array(dtype=float),
            v_out: gk.array(dtype=gk.vec3), s_out: gk.array(dtype=float, ndim=2)):
    i = gk.tid()
    u = a[i]
    w = b[i]
    c = gk.cross(u, w)
    n = gk.normalize(u)
    v_out[i] = c + 2.0 * n - w * s[i] + u / 2.0
    s_out[i, 0] = gk.dot(u, w)
    s_out[i, 1] = gk.length(u)
    s_out[i, 2] = gk.length_sq(w)
    s_out[i, 3] = u.x + u.y * u[2]
    t = gk.vec3(1.0, 2.0, 3.0)
    t.y = s[i]
    t[2] = u.z
    s_out[i, 4] = t.x + t.y + t.z
    s_out[i, 5] = gk.max(u, w).x + gk.min(u, w).y


def test_vector_operations(device, rng):
    n = 50
    a = rng.normal(size=(n, 3)).astype(np.float32)
    b = rng.normal(size=(n, 3)).astype(np.float32)
    s = rng.normal(size=n).astype(np.float32)
    vo = gk.zeros(n, dtype=gk.vec3, device=device)
    so = gk.zeros((n, 6), dtype=gk.float32, device=device)
    gk.launch(vec_ops, n, inputs=[gk.array(a, dtype=gk.vec3, device=device), gk.array(b, dtype=gk.vec3, device=device),
                                  gk.array(s, device=device)], outputs=[vo, so], device=device)
    a64, b64, s64 = a.astype(np.float64), b.astype(np.float64), s.astype(np.float64)
    nrm = a64 / np.linalg.norm(a64, axis=1, keepdims=True)
    expect = np.cross(a64, b64) + 2 * nrm - b64 * s64[:, None] + a64 / 2
    np.testing.assert_allclose(vo.numpy(), expect, rtol=1e-5, atol=1e-5)
    got = so.numpy()
    np.testing.assert_allclose(got[:, 0], np.sum(a64 * b64, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], np.linalg.norm(a64, axis=1), rtol=1e-5)
    np.testing.assert_allclose(got[:, 2], np.sum(b64 * b64, 1), rtol=1e-5)
    np.testing.assert_allclose(got[:, 3], a64[:, 0] + a64[:, 1] * a64[:, 2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 4], 1 + s64 + a64[:, 2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 5], np.maximum(a64, b64)[:, 0] + np.minimum(a64, b64)[:, 1], rtol=1e-5)


@gk.kernel
def mat_ops(m: gk.array(dtype=gk.mat33d), v: gk.array(dtype=gk.vec3d), out_m: gk.array(dtype=gk.mat33d, ndim=2),
            out_v: gk.array(dtype=gk.vec3d), out_s: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    a = m[i]
    x = v[i]
    out_m[i, 0] = gk.inverse(a)
    out_m[i, 1] = gk.transpose(a) @ a
    out_m[i, 2] = gk.outer(x, x) + gk.identity(n=3, dtype=gk.float64) * 2.0
    out_v[i] = a @ x
    out_s[i, 0] = gk.determinant(a)
    out_s[i, 1] = gk.trace(a)
    out_s[i, 2] = a[1, 2]
    out_s[i, 3] = a[2].x


def test_matrix_operations(device, rng):
    n = 20
    m = rng.normal(size=(n, 3, 3)) + 3 * np.eye(3)
    v = rng.normal(size=(n, 3))
    om = gk.zeros((n, 3), dtype=gk.mat33d, device=device)
    ov = gk.zeros(n, dtype=gk.vec3d, device=device)
    os_ = gk.zeros((n, 4), dtype=gk.float64, device=device)
    gk.launch(mat_ops, n, inputs=[gk.array(m, dtype=gk.mat33d, device=device), gk.array(v, dtype=gk.vec3d, device=device)],
              outputs=[om, ov, os_], device=device)
    got = om.numpy()
    np.testing.assert_allclose(got[:, 0], np.linalg.inv(m), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[:, 1], np.swapaxes(m, 1, 2) @ m, rtol=1e-12)
    np.testing.assert_allclose(got[:, 2], np.einsum("ni,nj->nij", v, v) + 2 * np.eye(3), rtol=1e-12)
    np.testing.assert_allclose(ov.numpy(), np.einsum("nij,nj->ni", m, v), rtol=1e-12)
    s = os_.numpy()
    np.testing.assert_allclose(s[:, 0], np.linalg.det(m), rtol=1e-10)
    np.testing.assert_allclose(s[:, 1], np.trace(m, axis1=1, axis2=2), rtol=1e-12)
    np.testing.assert_allclose(s[:, 2], m[:, 1, 2])
    np.testing.assert_allclose(s[:, 3], m[:, 2, 0])


@pytest.mark.parametrize("n", [2, 4])
def test_inverse_and_determinant_sizes(device, rng, n):
    T = gk.matrix((n, n), gk.float64)

    @gk.kernel
    def k(m: gk.array(dtype=T), inv: gk.array(dtype=T), det: gk.array(dtype=gk.float64)):
        i = gk.tid()
        inv[i] = gk.inverse(m[i])
        det[i] = gk.determinant(m[i])

    m = rng.normal(size=(10, n, n)) + n * np.eye(n)
    inv = gk.zeros(10, dtype=T, device=device)
    det = gk.zeros(10, dtype=gk.float64, device=device)
    gk.launch(k, 10, inputs=[gk.array(m, dtype=T, device=device)], outputs=[inv, det], device=device)
    np.testing.assert_allclose(inv.numpy(), np.linalg.inv(m), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(det.numpy(), np.linalg.det(m), rtol=1e-10)


@gk.kernel
def dynamic_index(v: gk.array(dtype=gk.vec4), k: gk.array(dtype=int), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = v[i][k[i]]


def test_dynamic_component_index(device, rng):
    v = rng.normal(size=(40, 4)).astype(np.float32)
    k = rng.integers(0, 4, 40).astype(np.int32)
    out = gk.zeros(40, device=device)
    gk.launch(dynamic_index, 40, inputs=[gk.array(v, dtype=gk.vec4, device=device), gk.array(k, device=device)],
              outputs=[out], device=device)
    np.testing.assert_array_equal(out.numpy(), v[np.arange(40), k])


def test_host_vectors_read_components_by_name():
    """`gk.vec3(...)` on the host is a NumPy array whose components also read as .x .y .z (.w), as Warp's
    host vectors do; arithmetic keeps the names, the repr stays NumPy's, arrays take it as values."""
    v = gk.vec3(1.0, -2.5, 4.0)
    assert (v.x, v.y, v.z) == (1.0, -2.5, 4.0) and isinstance(v, np.ndarray)
    w = v * 2.0 + gk.vec3(1.0)
    assert (w.x, w.y, w.z) == (3.0, -4.0, 9.0)
    assert gk.quat(0.1, 0.2, 0.3, 0.9).w == np.float32(0.9)
    assert repr(v) == "array([ 1. , -2.5,  4. ], dtype=float32)"
    np.testing.assert_array_equal(gk.array([v, w], dtype=gk.vec3).numpy(), np.stack([v, w]))
