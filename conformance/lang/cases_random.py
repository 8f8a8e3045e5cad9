"""Integer bitwise operators and random numbers in the language: `& | ^ << >> ~` on int32 (forward
only: integers), and a kernel whose noise comes from rand_init / randn / randf — its derivative with
respect to the other input is checked in every mode (the draws themselves carry no gradient). The
noise reference is tests/runtime/test_random.py's independent model of the PCG stream."""

import math

import numpy as np

import gradkit as gk
from ..references import pcg

from .harness import Case, Const, In, Out, collect

I32 = gk.array(dtype=gk.int32)
F64 = gk.array(dtype=gk.float64)


@gk.kernel
def bit_ops(a: I32, b: I32, out: gk.array(dtype=gk.int32, ndim=2)):
    i = gk.tid()
    out[i, 0] = (a[i] & b[i]) | (a[i] ^ 85)
    out[i, 1] = (a[i] << (b[i] & 7)) >> 2
    out[i, 2] = ~a[i] ^ b[i]


def _bits_ref(a, b, out):
    return np.stack([(a & b) | (a ^ 85), np.right_shift(np.left_shift(a, b & 7), 2), ~a ^ b], 1)


@gk.kernel
def noise(x: F64, y: F64):
    i = gk.tid()
    state = gk.rand_init(11, i)
    y[i] = x[i] * gk.float64(gk.randn(state)) + gk.sin(x[i]) * gk.float64(gk.randf(state))


def _draws(i):
    s1 = pcg(pcg((11 + pcg(i)) & 0xFFFFFFFF))
    s2 = pcg(s1)
    u1 = np.float32(1.0) - np.float32((s1 >> 8) / 16777216.0)
    z = math.sqrt(-2.0 * math.log(float(u1))) * math.cos(2 * math.pi * float(np.float32((s2 >> 8) / 16777216.0)))
    return z, (pcg(s2) >> 8) / 16777216.0


def _noise_ref(x, y):
    z, f = np.array([_draws(i) for i in range(len(x))]).T
    return x * z + np.sin(x) * f


CASES = collect("bits and random", [
    Case("bitwise_ops", "`& | ^ << >> ~` on int32 (shift counts modulo 32)", bit_ops, 6,
         [Const(lambda r: r.integers(-2**31, 2**31 - 1, 6)), Const(lambda r: r.integers(0, 64, 6)),
          Out((6, 3), gk.int32)], _bits_ref, diff=False),
    Case("random_draws", "`gk.rand_init(seed, tid)`, `gk.randn`, `gk.randf` as noise: gradients of the rest",
         noise, 6, [In((6,)), Out((6,))], _noise_ref, tol=dict(rtol=1e-5, atol=1e-6),
         gtol=dict(rtol=1e-5, atol=1e-6)),     # the draws are float32 math on the device
])
