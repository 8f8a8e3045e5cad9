"""Two frontend rules Warp programs rely on. A @gk.func without a return annotation that returns from inside
a branch or loop is typed by its first `return` (Warp's rule); other returns must give the same types.
Under `loop_locals="last"` (the option the Warp dialect sets) a local first assigned inside a loop body and
read after the loop holds its last trip's value, zero when the loop never ran; the default stays scoped.
Forward values against NumPy float64, reverse and forward-mode gradients against central differences, on
every device."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.errors import CompileError

F64 = gk.float64


@gk.func(default_fp=F64)
def _piecewise(x: F64, n: int):
    if x < -1.0:
        return -x * x
    for i in range(n):
        if x > float(i):
            return x * x * x + float(i)
    return gk.sin(x)


@gk.func(default_fp=F64)
def _vec_or_zero(x: F64):
    if x < 0.0:
        return gk.vec3d()
    return gk.vec3d(x, 2.0 * x, x * x)


@gk.func(default_fp=F64)
def _pair(x: F64):
    if x > 0.5:
        return x, 2.0 * x
    return x * x, x


@gk.func(default_fp=F64)
def _clamp_into(out: gk.array(dtype=F64), i: int, x: F64):
    if x > 1.0:
        out[i] = 1.0
        return
    out[i] = x


@gk.kernel(default_fp=F64)
def _returns(x: gk.array(dtype=F64), n: int, y: gk.array(dtype=F64), c: gk.array(dtype=F64)):
    i = gk.tid()
    v = _vec_or_zero(x[i])
    a, b = _pair(x[i])
    y[i] = _piecewise(x[i], n) + v[0] + v[1] * v[2] + a * b
    _clamp_into(c, i, x[i])


def _returns_ref(x, n):
    out = np.empty_like(x)
    for k, xv in enumerate(x):
        if xv < -1.0:
            p = -xv * xv
        else:
            p = next((xv ** 3 + i for i in range(n) if xv > i), np.sin(xv))
        vec = (0.0, 0.0, 0.0) if xv < 0 else (xv, 2 * xv, xv * xv)
        a, b = (xv, 2 * xv) if xv > 0.5 else (xv * xv, xv)
        out[k] = p + vec[0] + vec[1] * vec[2] + a * b
    return out


def _inputs(rng, n=12):
    x = rng.uniform(-2.5, 3.5, n)
    # keep every input away from the branch points, where the function jumps
    return np.where(np.abs(x - np.round(x)) < 0.05, x + 0.2, x)


def _launch_y(kernel, x, n, device, outs=1):
    xa = gk.array(x, dtype=F64, device=device, requires_grad=True)
    ys = [gk.zeros(len(x), dtype=F64, device=device, requires_grad=True) for _ in range(outs + 1)]
    gk.launch(kernel, len(x), inputs=[xa, n], outputs=ys, device=device)
    return xa, ys


def _central(kernel, x, n, device, h=1e-6):
    g = np.empty_like(x)
    for k in range(len(x)):
        e = np.zeros_like(x)
        e[k] = h
        hi = _launch_y(kernel, x + e, n, device)[1][0].numpy().sum()
        lo = _launch_y(kernel, x - e, n, device)[1][0].numpy().sum()
        g[k] = (hi - lo) / (2 * h)
    return g


@pytest.mark.parametrize("n", [0, 1, 3])
def test_first_return_types_forward_and_gradients(device, n):
    x = _inputs(np.random.default_rng(n))
    xa, (y, c) = _launch_y(_returns, x, n, device)
    np.testing.assert_allclose(y.numpy(), _returns_ref(x, n), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(c.numpy(), np.minimum(x, 1.0))
    fd = _central(_returns, x, n, device)
    tape = gk.Tape()
    with tape:
        xa, (y, c) = _launch_y(_returns, x, n, device)
    tape.backward(grads={y: gk.array(np.ones(len(x)), dtype=F64, device=device)})
    np.testing.assert_allclose(xa.grad.numpy(), fd, rtol=1e-6, atol=1e-6)
    y2 = gk.zeros(len(x), dtype=F64, device=device)
    xd = gk.array(x, dtype=F64, device=device)
    with gk.ForwardMode(seeds={xd: gk.array(np.ones(len(x)), dtype=F64, device=device)}):
        gk.launch(_returns, len(x), inputs=[xd, n], outputs=[y2, gk.zeros(len(x), dtype=F64, device=device)],
                  device=device)
    np.testing.assert_allclose(y2.dual.numpy(), fd, rtol=1e-6, atol=1e-6)


def _compile(kernel, device="cpu"):
    a = gk.zeros(2, dtype=float, device=device)
    gk.launch(kernel, 2, inputs=[a, a], device=device)


def test_a_later_return_of_another_type_names_both_lines():
    @gk.func
    def f(x: float):
        if x < 0.0:
            return 1
        return x

    @gk.kernel
    def k(a: gk.array(dtype=float), b: gk.array(dtype=float)):
        i = gk.tid()
        b[i] = float(f(a[i]))

    with pytest.raises(CompileError) as err:
        _compile(k)
    line = f.pyfunc.__code__.co_firstlineno
    assert f"returns float32 here but int32 at its first return (line {line + 3})" in str(err.value)
    assert f":{line + 4}:" in str(err.value)


def test_a_later_return_of_another_count_is_an_error():
    @gk.func
    def f(x: float):
        for i in range(3):
            if x > float(i):
                return x, x
        return x

    @gk.kernel
    def k(a: gk.array(dtype=float), b: gk.array(dtype=float)):
        i = gk.tid()
        b[i] = f(a[i])

    with pytest.raises(CompileError, match="returns 1 value here but 2 at its first return"):
        _compile(k)


def test_literals_adopt_the_first_returns_type(device):
    @gk.func
    def f(x: float):
        if x > 1.0:
            return x
        return 0

    @gk.kernel
    def k(a: gk.array(dtype=float), b: gk.array(dtype=float)):
        i = gk.tid()
        b[i] = f(a[i])

    x = np.array([0.5, 1.5, 3.0], np.float32)
    b = gk.zeros(3, dtype=float, device=device)
    gk.launch(k, 3, inputs=[gk.array(x, device=device), b], device=device)
    np.testing.assert_array_equal(b.numpy(), np.where(x > 1, x, 0))


@gk.kernel(default_fp=F64, loop_locals="last")
def _loop_locals(x: gk.array(dtype=F64), n: int, y: gk.array(dtype=F64), z: gk.array(dtype=F64)):
    i = gk.tid()
    t = float(0.0)
    for j in range(n):
        d = x[i] * float(j + 1)
        v = gk.vec3d(d, t, 1.0)
        t = t + gk.sin(d)
    k = int(0)
    while k < n:
        w = x[i] * x[i] + float(k)
        k += 1
        if w > 100.0:
            break
    for j in range(2):
        for m in range(n):
            u = x[i] + float(m + j)
        s = u * 2.0
    y[i] = d * t + v[0] * v[1] + w + s
    z[i] = float(k)


def _loop_locals_ref(x, n):
    out = np.empty_like(x)
    for q, xv in enumerate(x):
        t, d, v, w, u = 0.0, 0.0, (0.0, 0.0, 0.0), 0.0, 0.0
        for j in range(n):
            d = xv * (j + 1)
            v = (d, t, 1.0)
            t += np.sin(d)
        for k in range(n):
            w = xv * xv + k
            if w > 100:
                break
        for j in range(2):
            for m in range(n):
                u = xv + m + j
            s = u * 2
        out[q] = d * t + v[0] * v[1] + w + s
    return out


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loop_locals_last_forward_and_gradients(device, n):
    x = np.random.default_rng(10 + n).uniform(-2.0, 2.0, 9)
    xa, (y, z) = _launch_y(_loop_locals, x, n, device)
    np.testing.assert_allclose(y.numpy(), _loop_locals_ref(x, n), rtol=1e-12, atol=1e-12)
    fd = _central(_loop_locals, x, n, device)
    tape = gk.Tape()
    with tape:
        xa, (y, z) = _launch_y(_loop_locals, x, n, device)
    tape.backward(grads={y: gk.array(np.ones(len(x)), dtype=F64, device=device)})
    np.testing.assert_allclose(xa.grad.numpy(), fd, rtol=1e-6, atol=1e-6)
    xd = gk.array(x, dtype=F64, device=device)
    y2 = gk.zeros(len(x), dtype=F64, device=device)
    with gk.ForwardMode(seeds={xd: gk.array(np.ones(len(x)), dtype=F64, device=device)}):
        gk.launch(_loop_locals, len(x), inputs=[xd, n], outputs=[y2, gk.zeros(len(x), dtype=F64, device=device)],
                  device=device)
    np.testing.assert_allclose(y2.dual.numpy(), fd, rtol=1e-6, atol=1e-6)


def test_loop_locals_stay_scoped_by_default():
    @gk.kernel
    def k(a: gk.array(dtype=float), b: gk.array(dtype=float)):
        i = gk.tid()
        for j in range(3):
            d = a[i]
        b[i] = d

    with pytest.raises(CompileError, match="local 'd' may be undefined here"):
        _compile(k)


def test_loop_locals_option_is_checked():
    def body(a: gk.array(dtype=float)):
        pass
    with pytest.raises(ValueError, match="loop_locals='python'"):
        gk.kernel(body, loop_locals="python").typed_ir
