"""CPU backend: outputs a 1-D kernel writes once per thread at [tid] are stored around the cache (non-temporal)
on grids larger than STREAM_MIN_BYTES, in an aligned middle between a head and a tail per worker
(backends/cpu/thread_loops.py streaming_loops). Every split of the range must give the same numbers as
NumPy, aligned or not, whatever the chunking; kernels that read an output back or write it elsewhere keep
plain stores. The numbers are checked on every device (the same kernels, whatever their stores)."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.cpu.thread_loops import STREAM_MIN_BYTES

BIG = STREAM_MIN_BYTES // 4 + 37          # float32 threads: just past the threshold, not a multiple of 16


@gk.kernel
def affine_sin(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = gk.sin(v) * v + 0.5 * v * v


@gk.kernel
def two_outputs(x: gk.array(dtype=float), a: gk.array(dtype=float), b: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    v = x[i]
    if v > 0.0:
        a[i] = v * 2.0
    else:
        a[i] = -v
    b[i] = gk.vec3(v, v * v, 1.0)


@gk.kernel
def reads_back(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] += x[i] * 3.0           # reads the old value: the line must be read anyway


def _ref_affine_sin(x):
    x = x.astype(np.float64)
    return np.sin(x) * x + 0.5 * x * x


def test_a_streamed_kernel_has_non_temporal_vector_stores():
    src = affine_sin.source("cpu")
    assert "!nontemporal" in src and "gk.stream" in src
    assert "!nontemporal" not in reads_back.source("cpu")      # reads its output back: plain stores


@pytest.mark.parametrize("n", [BIG, BIG - 40, 1000, 16 * 4096 + 3])
def test_streamed_outputs_match_numpy_above_and_below_the_threshold(device, n):
    rng = np.random.default_rng(n)
    x_np = rng.uniform(-3, 3, n).astype(np.float32)
    x, y = gk.array(x_np, device=device), gk.full(n, 7.0, device=device)
    gk.launch(affine_sin, n, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), _ref_affine_sin(x_np), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("offset", [0, 1, 4, 15])
def test_outputs_off_a_64_byte_line_take_the_plain_loop_with_the_same_numbers(offset):
    """cpu only: elsewhere from_numpy copies, so there is no misaligned output to take."""
    n = BIG
    rng = np.random.default_rng(offset)
    x_np = rng.uniform(-3, 3, n).astype(np.float32)
    backing = np.zeros(n + 16, np.float32)
    out_np = backing[offset:offset + n]                 # shares NumPy's memory (no copy), any alignment
    y = gk.from_numpy(out_np)
    gk.launch(affine_sin, n, inputs=[gk.array(x_np)], outputs=[y])
    np.testing.assert_allclose(y.numpy(), _ref_affine_sin(x_np), rtol=2e-6, atol=2e-6)
    assert backing[:offset].sum() == 0 and backing[offset + n:].sum() == 0     # nothing written outside


def test_several_streamed_outputs_with_branches_and_vector_elements(device):
    n = BIG
    x_np = np.random.default_rng(1).uniform(-1, 1, n).astype(np.float32)
    a, b = gk.zeros(n, device=device), gk.zeros(n, dtype=gk.vec3, device=device)
    gk.launch(two_outputs, n, inputs=[gk.array(x_np, device=device)], outputs=[a, b], device=device)
    np.testing.assert_array_equal(a.numpy(), np.where(x_np > 0, x_np * 2, -x_np))
    np.testing.assert_array_equal(b.numpy(), np.stack([x_np, x_np * x_np, np.ones_like(x_np)], axis=1))


def test_streamed_kernel_gradients_are_unchanged(device):
    n = BIG
    x_np = np.random.default_rng(2).uniform(-2, 2, n).astype(np.float32)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(affine_sin, n, inputs=[x], outputs=[y], device=device)
    tape.backward(grads={y: gk.ones(n, device=device)})
    x64 = x_np.astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x64) * x64 + np.sin(x64) + x64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y.numpy(), _ref_affine_sin(x_np), rtol=2e-6, atol=2e-6)


def test_the_alignment_placeholder_becomes_one_assume_declared_once():
    """thread_loops.assume_bundles turns the placeholder call into an llvm.assume "align" bundle; a module
    that already declares llvm.assume (a native snippet's) must not get a second declaration (LLVM rejects
    the module)."""
    from gradkit.backends.cpu.thread_loops import ASSUME, assume_bundles
    body = f'define void @k(i8* %p) {{\n  call void @"{ASSUME}"(i8* %".5")\n  ret void\n}}\n'
    own = assume_bundles(f'declare void @"{ASSUME}"(i8* %".1")\n' + body)
    shared = assume_bundles(f'declare void @"{ASSUME}"(i8* %".1")\ndeclare void @llvm.assume(i1)\n' + body)
    for text in (own, shared):
        assert 'call void @llvm.assume(i1 true) [ "align"(i8* %".5", i64 64) ]' in text
        assert text.count("declare void @llvm.assume") == 1 and ASSUME not in text
