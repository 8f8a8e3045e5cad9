"""The frontend's `remainder` option: `%` written in a kernel or @gk.func means Python's floored remainder
by default and C's truncated one (`rem`: integer %, float fmod) under remainder="truncated", the option
Warp's dialect sets. Forward values on every device, both gradient modes, `%=`, constants, and the default
unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk

A = np.array([-7, 7, -7, 7, -6, 5, 0, -2**31, 9], dtype=np.int32)
B = np.array([2, -2, -2, 2, 3, 0, 4, -1, 0], dtype=np.int32)


def _kernels(remainder):
    @gk.func(remainder=remainder)
    def f_rem(a: int, b: int) -> int:
        return a % b

    @gk.kernel(remainder=remainder)
    def k(a: gk.array(dtype=int), b: gk.array(dtype=int), fa: gk.array(dtype=float),
          fb: gk.array(dtype=float), r: gk.array(dtype=int), rf: gk.array(dtype=int),
          ra: gk.array(dtype=int), fr: gk.array(dtype=float), c: gk.array(dtype=int)):
        i = gk.tid()
        r[i] = a[i] % b[i]
        rf[i] = f_rem(a[i], b[i])
        x = a[i]
        x %= b[i]
        ra[i] = x
        fr[i] = fa[i] % fb[i]
        c[i] = -7 % 2 + (a[i] // b[i]) * 0      # a folded constant; // is floored in both modes
    return k


def _run(k, device):
    fa = (A.astype(np.float32) + 0.5)
    fb = np.where(B == 0, 1.5, B).astype(np.float32)
    args = [gk.array(A, device=device), gk.array(B, device=device), gk.array(fa, device=device),
            gk.array(fb, device=device)]
    outs = [gk.zeros(len(A), dtype=gk.int32, device=device) for _ in range(3)]
    outs += [gk.zeros(len(A), dtype=gk.float32, device=device), gk.zeros(len(A), dtype=gk.int32, device=device)]
    gk.launch(k, len(A), inputs=args, outputs=outs, device=device)
    return fa, fb, [o.numpy() for o in outs]


def _c_int_rem(a, b):
    a, b = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.fmod(a, safe)).astype(np.int32)


def test_truncated_remainder_is_c_semantics(device):
    fa, fb, (r, rf, ra, fr, c) = _run(_kernels("truncated"), device)
    want = _c_int_rem(A, B)
    np.testing.assert_array_equal(r, want)
    np.testing.assert_array_equal(rf, want)
    np.testing.assert_array_equal(ra, want)
    np.testing.assert_array_equal(fr, np.fmod(fa, fb))
    np.testing.assert_array_equal(c, -1)


def test_default_remainder_stays_floored(device):
    fa, fb, (r, rf, ra, fr, c) = _run(_kernels("floored"), device)
    safe = np.where(B == 0, 1, B)
    want = np.where(B == 0, 0, np.mod(A.astype(np.int64), safe)).astype(np.int32)
    np.testing.assert_array_equal(r, want)
    np.testing.assert_array_equal(rf, want)
    np.testing.assert_array_equal(fr, (fa - fb * np.floor(fa / fb)).astype(np.float32))
    np.testing.assert_array_equal(c, 1)


def test_truncated_remainder_gradients():
    @gk.kernel(remainder="truncated")
    def k(a: gk.array(dtype=float), b: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = a[i] % b[i]

    a = gk.array(np.array([-6.5, 7.5, -3.25, 5.0], np.float32), requires_grad=True)
    b = gk.array(np.array([2.0, -2.0, 1.5, 3.0], np.float32), requires_grad=True)
    y = gk.zeros(4, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(k, 4, inputs=[a, b], outputs=[y])
    tape.backward(grads={y: np.ones(4, np.float32)})
    np.testing.assert_array_equal(a.grad.numpy(), 1.0)
    np.testing.assert_array_equal(b.grad.numpy(), -np.trunc(a.numpy() / b.numpy()))
    J = gk.autograd.jacobian_fwd(k, dim=4, inputs=[a, b], outputs=[y])
    jb = J[0, 1]                           # (output y, input b)
    np.testing.assert_allclose(np.diag(np.asarray(jb)), -np.trunc(a.numpy() / b.numpy()))


def test_unknown_remainder_mode_is_refused():
    @gk.kernel(remainder="euclid")
    def k(a: gk.array(dtype=int)):
        a[gk.tid()] = a[gk.tid()] % 3

    with pytest.raises(ValueError, match="remainder='euclid'"):
        gk.launch(k, 1, inputs=[gk.zeros(1, dtype=gk.int32)])
