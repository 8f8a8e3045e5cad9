"""gradkit.warp against Warp 1.19 on the two frontend rules Warp's examples rely on (written once, run by
both): a @wp.func without a return annotation returning from inside branches and loops (typed by its first
return: scalar, vec3, tuple), and locals first assigned inside `for` / `while` bodies read after the loop
(the last trip's value). Values agree; a later return of another type is an error in both."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit.warp as gwp
from gradkit.core.errors import CompileError

warp = pytest.importorskip("warp")
warp.config.quiet = True


def _program(wp):
    @wp.func
    def piecewise(x: float, n: int):
        if x < -1.0:
            return -x * x
        for i in range(n):
            if x > float(i):
                return x * x + float(i)
        return wp.sin(x)

    @wp.func
    def vec_or_zero(x: float):
        if x < 0.0:
            return wp.vec3()
        return wp.vec3(x, 2.0 * x, x * x)

    @wp.func
    def pair(x: float):
        if x > 0.5:
            return x, 2.0 * x
        return x * x, x

    @wp.kernel
    def k(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float), z: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        t = float(0.0)
        for j in range(n):
            d = x[i] * float(j + 1)
            t = t + wp.sin(d)
        m = int(0)
        while m < n:
            w = x[i] * x[i] + float(m)
            m += 1
        a, b = pair(x[i])
        y[i] = piecewise(x[i], n) + d * t + w + a * b
        z[i] = vec_or_zero(x[i]) + wp.vec3(d, w, t)

    return k


@pytest.mark.parametrize("n", [1, 3])
def test_first_return_types_and_loop_locals_match_warp(device, n):
    x = np.random.default_rng(n).uniform(-2.5, 3.5, 64).astype(np.float32)
    got, want = [], []
    for wp, dev, out in ((gwp, device, got), (warp, "cpu", want)):
        k = _program(wp)
        y = wp.zeros(len(x), dtype=float, device=dev)
        z = wp.zeros(len(x), dtype=wp.vec3, device=dev)
        wp.launch(k, len(x), inputs=[wp.array(x, dtype=float, device=dev), n, y, z], device=dev)
        out += [y.numpy(), z.numpy()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert np.abs(want[0]).max() > 0.1


def _mismatch(wp):
    @wp.func
    def f(x: float):
        if x < 0.0:
            return 1
        return x

    @wp.kernel
    def k(a: wp.array(dtype=float), b: wp.array(dtype=float)):
        i = wp.tid()
        b[i] = float(f(a[i]))

    return k


def test_a_return_of_another_type_is_an_error_in_both():
    a = warp.zeros(2, dtype=float, device="cpu")
    with pytest.raises(Exception, match="returned different types"):
        warp.launch(_mismatch(warp), 2, inputs=[a, a], device="cpu")
    g = gwp.zeros(2, dtype=float)
    with pytest.raises(CompileError, match="returns float32 here but int32 at its first return"):
        gwp.launch(_mismatch(gwp), 2, inputs=[g, g])
