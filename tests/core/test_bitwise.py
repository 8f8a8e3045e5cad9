"""Integer bitwise operators `& | ^ << >> ~` (and their augmented forms) on int32, int64 and uint32
values and int vectors, on every device, against NumPy at the edges: negative numbers, MIN/MAX, uint32
wrap-around, shift counts 0, 31, 32, 33 and 63 (taken modulo the bit width everywhere), arithmetic `>>`
for signed and logical for uint32; on floats a CompileError at the operator."""


import numpy as np
import pytest

import gradkit as gk
from tests.compile_errors import assert_compile_error


def _kernel(dtype):
    A, A2 = gk.array(dtype=dtype), gk.array(dtype=dtype, ndim=2)

    @gk.kernel
    def bits(a: A, b: A, out: A2):
        i = gk.tid()
        x, y = a[i], b[i]
        out[i, 0] = x & y
        out[i, 1] = x | y
        out[i, 2] = x ^ y
        out[i, 3] = x << y
        out[i, 4] = x >> y
        out[i, 5] = ~x
        z = x
        z ^= y
        z <<= 3
        out[i, 6] = z
        out[i, 7] = (x >> 1) & 255 | 7
    return bits


def _reference(a, b):
    bits = a.dtype.itemsize * 8
    n = (b & (bits - 1)).astype(a.dtype)
    z = np.left_shift(a ^ b, a.dtype.type(3))
    return np.stack([a & b, a | b, a ^ b, np.left_shift(a, n), np.right_shift(a, n), ~a, z,
                     (np.right_shift(a, a.dtype.type(1)) & a.dtype.type(255)) | a.dtype.type(7)], 1)


CASES = {
    gk.int32: (np.array([-7, 5, -2**31, 2**31 - 1, 123456, -1, 0], np.int32),
               np.array([0, 31, 32, 33, 1, 63, 5], np.int32)),
    gk.int64: (np.array([-7, 5, -2**63, 2**63 - 1, 123456789012, -1, 0], np.int64),
               np.array([0, 63, 64, 65, 1, 31, 5], np.int64)),
    gk.uint32: (np.array([2**32 - 1, 1, 2**31, 12345, 7, 0, 3], np.uint32),
                np.array([0, 31, 32, 33, 1, 63, 2**32 - 1], np.uint32)),
}


@pytest.mark.parametrize("dtype", list(CASES), ids=lambda t: t.name)
def test_operators_at_the_edges(dtype, device):
    a, b = CASES[dtype]
    out = gk.zeros((len(a), 8), dtype=dtype, device=device)
    gk.launch(_kernel(dtype), len(a), inputs=[gk.array(a, dtype=dtype, device=device),
                                             gk.array(b, dtype=dtype, device=device), out], device=device)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out.numpy(), _reference(a, b))


@gk.kernel
def vec_bits(a: gk.array(dtype=gk.vec3i), b: gk.array(dtype=gk.vec3i), out: gk.array(dtype=gk.vec3i)):
    i = gk.tid()
    out[i] = (a[i] ^ b[i]) | (a[i] << 2)


def test_int_vectors(device, rng):
    a, b = rng.integers(-1000, 1000, (5, 3)).astype(np.int32), rng.integers(0, 40, (5, 3)).astype(np.int32)
    out = gk.zeros(5, dtype=gk.vec3i, device=device)
    gk.launch(vec_bits, 5, inputs=[gk.array(a, dtype=gk.vec3i, device=device), gk.array(b, dtype=gk.vec3i,
                                                                                          device=device), out],
              device=device)
    np.testing.assert_array_equal(out.numpy(), (a ^ b) | np.left_shift(a, 2))


@gk.kernel
def mixed_shift(u: gk.array(dtype=gk.uint32), k: gk.array(dtype=gk.int32), out: gk.array(dtype=gk.uint32)):
    i = gk.tid()
    out[i] = (u[i] >> k[i]) ^ (u[i] << gk.int64(3))


def test_shift_count_of_another_integer_type(device):
    u, k = np.array([2**32 - 1, 5, 2**31], np.uint32), np.array([4, -1, 33], np.int32)
    out = gk.zeros(3, dtype=gk.uint32, device=device)
    gk.launch(mixed_shift, 3, inputs=[gk.array(u, device=device), gk.array(k, device=device), out], device=device)
    n = k.astype(np.uint32) & np.uint32(31)
    np.testing.assert_array_equal(out.numpy(), np.right_shift(u, n) ^ np.left_shift(u, np.uint32(3)))


def mixed_xor(x: gk.array(dtype=gk.uint32), y: gk.array(dtype=gk.int32)):
    x[0] = x[0] ^ y[0]


def on_floats(x: gk.array(dtype=gk.float32)):
    x[0] = x[0] ^ x[1]


def invert_float(x: gk.array(dtype=gk.float32)):
    x[0] = ~x[0]


def test_constant_folding():
    @gk.kernel
    def folded(out: gk.array(dtype=gk.int32)):
        out[0] = (6 & 3) | (1 << 4) ^ ~2
    out = gk.zeros(1, dtype=gk.int32)
    gk.launch(folded, 1, inputs=[out])
    assert out.numpy()[0] == (6 & 3) | (1 << 4) ^ ~2


@pytest.mark.parametrize("fn,snippet,message", [
    (on_floats, "x[0] ^ x[1]", r"'\^' needs integer operands \(int32, int64, uint32\), got float32, float32"),
    (invert_float, "~x[0]", r"'~' needs integer operands"),
    (mixed_xor, "x[0] ^ y[0]", r"'\^' needs one integer type, got uint32 and int32; cast one, e.g. gk.uint32"),
], ids=["xor_floats", "invert_float", "mixed_types"])
def test_compile_errors(fn, snippet, message):
    assert_compile_error(fn, snippet, message)
