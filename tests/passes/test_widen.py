"""core/passes/widen.py: a kernel widened to float64 computes in float64 (values match a NumPy float64
reference to float64 precision, far beyond what float32 could) and its gradients match central differences
at float64 tolerances, forward, reverse and forward mode, on every device; kernels it cannot widen are
refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.passes.widen import WidenError, widen_type


@gk.kernel
def mixed(x: gk.array(dtype=gk.vec3), m: gk.array(dtype=float), s: float, y: gk.array(dtype=float)):
    i = gk.tid()
    q = gk.quat_from_axis_angle(gk.vec3(0.0, 0.0, 1.0), 0.5)
    M = gk.mat33(1.0, 0.25, 0.0, 0.0, 2.0, 0.0, 0.5, 0.0, 3.0)
    r = gk.quat_rotate(q, M @ (x[i] * m[i]))
    acc = float(0.0)
    for k in range(3):
        acc = acc + gk.sin(r[k]) * float(k + 1)
    y[i] = gk.sqrt(gk.dot(r, r) + s) + acc


def _reference(x, m, s):
    """`mixed` in NumPy float64."""
    half = 0.25
    q = np.array([0.0, 0.0, np.sin(half), np.cos(half)])
    M = np.array([[1.0, 0.25, 0.0], [0.0, 2.0, 0.0], [0.5, 0.0, 3.0]])
    v = (x * m[:, None]) @ M.T
    u, w = q[:3], q[3]
    r = v * (2 * w * w - 1) + np.cross(u, v) * 2 * w + u * (v @ u)[:, None] * 2
    return np.sqrt((r * r).sum(1) + s) + (np.sin(r) * np.array([1.0, 2.0, 3.0])).sum(1)


def _args(rng, n, device):
    x = gk.array(rng.standard_normal((n, 3)), dtype=gk.vec3d, device=device, requires_grad=True)
    m = gk.array(rng.uniform(0.5, 2.0, n), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    return x, m, 0.7, y


def test_types_widen():
    assert widen_type(gk.float32) is gk.float64 and widen_type(gk.vec3) is gk.vec3d
    assert widen_type(gk.mat33) is gk.mat33d and widen_type(gk.quat) is gk.quatd
    assert widen_type(gk.int32) is gk.int32 and widen_type(gk.vec3i) is gk.vec3i
    from gradkit.core.types import array_type
    assert widen_type(array_type(gk.vec2, 2)) is array_type(gk.vec2d, 2)
    assert widen_type(array_type(gk.int32, 1)) is array_type(gk.int32, 1)


def test_widened_kernel_computes_in_float64(device, rng):
    wide = mixed.widened()
    assert dict(wide.params) == {"x": gk.array(dtype=gk.vec3d), "m": gk.array(dtype=gk.float64),
                                 "s": gk.float64, "y": gk.array(dtype=gk.float64)}
    x, m, s, y = _args(rng, 64, device)
    gk.launch(wide, 64, [x, m, s], [y], device=device)
    ref = _reference(x.numpy(), m.numpy(), s)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)     # float32 would be ~1e-7 off
    with pytest.raises(Exception, match="float64|dtype|vec3d"):          # the original still wants float32
        gk.launch(mixed, 64, [x, m, s], [gk.zeros(64, device=device)], device=device)


def test_widened_gradients_match_central_differences(device, rng):
    wide = mixed.widened()
    x, m, s, y = _args(rng, 8, device)
    assert gk.autograd.gradcheck(wide, 8, [x, m, s], [y], eps=1e-6, atol=1e-7, rtol=1e-6, device=device)
    fwd = gk.autograd.jacobian_fwd(wide, 8, [x, m, s], [y], device=device)
    rev = gk.autograd.jacobian(wide, 8, [x, m, s], [y], device=device)
    for key in rev:
        np.testing.assert_allclose(fwd[key], rev[key], rtol=1e-12, atol=1e-12)


@gk.func
def helper(a: float) -> float:
    return a * 2.0


@gk.kernel
def calls_helper(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = helper(x[i])


def test_kernel_calling_a_func_is_refused_by_name():
    with pytest.raises(WidenError, match=r"'calls_helper' calls a @gk.func at .*test_widen.py:\d+:\d+"):
        calls_helper.widened()
