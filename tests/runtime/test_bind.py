"""Launch argument binding: conversions, every error (naming kernel and parameter), no mutation, speed."""

import time

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.types import array_type
from gradkit.runtime.launch.bind import bind_args, make_binder

F32_1D = array_type(gk.float32, 1)
PARAMS = [("x", F32_1D), ("y", array_type(gk.vec3d, 2)), ("a", gk.float32), ("n", gk.int32),
          ("flag", gk.bool), ("u", gk.uint32), ("v", gk.vec3), ("m", gk.mat22d), ("vi", gk.vec2i),
          ("d", gk.float64)]


@pytest.fixture
def dev(fake_backends):
    return gk.get_device("fakehost")


def _good_args(dev):
    return [gk.zeros(4, device=dev), gk.zeros((2, 2), dtype=gk.vec3d, device=dev), 1.5, 3, True, 7,
            [1.0, 2.0, 3.0], np.array([[1.0, 2.0], [3.0, 4.0]]), (1, 2), np.float32(0.25)]


def test_conversions(dev):
    args = _good_args(dev)
    out = make_binder("k", PARAMS)(args, dev)
    assert out[0] is args[0] and out[1] is args[1]
    kinds = [type(v) for v in out[2:6]]
    assert kinds == [np.float32, np.int32, np.bool_, np.uint32]
    assert out[2] == 1.5 and out[3] == 3 and out[4] and out[5] == 7
    assert out[6] == (1.0, 2.0, 3.0) and all(type(c) is np.float32 for c in out[6])
    assert out[7] == (1.0, 2.0, 3.0, 4.0) and all(type(c) is np.float64 for c in out[7])   # row-major
    assert out[8] == (1, 2) and all(type(c) is np.int32 for c in out[8])
    assert type(out[9]) is np.float64 and out[9] == 0.25
    assert bind_args("k", PARAMS, args, dev) == out
    assert bind_args("k", PARAMS, args, "fakehost")[3] == 3


@pytest.mark.parametrize("param, value, expected", [
    (gk.float32, 2, np.float32(2.0)),                 # int → float is fine
    (gk.float64, np.int64(5), np.float64(5.0)),
    (gk.float32, np.array(1.25), np.float32(1.25)),   # 0-d NumPy array
    (gk.float32, True, np.float32(1.0)),
    (gk.int32, np.int64(-4), np.int32(-4)),
    (gk.int64, 2 ** 40, np.int64(2 ** 40)),
    (gk.int32, np.uint32(9), np.int32(9)),
    (gk.uint32, 2 ** 32 - 1, np.uint32(2 ** 32 - 1)),
    (gk.bool, np.bool_(False), np.bool_(False)),
    (gk.bool, 1, np.bool_(True)),
])
def test_scalar_conversions(param, value, expected, dev):
    (out,) = make_binder("k", [("s", param)])([value], dev)
    assert type(out) is type(expected) and out == expected


@pytest.mark.parametrize("param, value, exc, match", [
    (gk.int32, 1.5, TypeError, "'s'.*integer"),
    (gk.int32, np.float32(2.0), TypeError, "'s'"),
    (gk.int32, 2 ** 31, ValueError, "'s'.*out of range"),
    (gk.int32, np.int64(2 ** 40), ValueError, "'s'.*out of range"),
    (gk.uint32, -1, ValueError, "'s'.*out of range"),
    (gk.bool, 0.5, TypeError, "'s'.*bool"),
    (gk.float32, "1.0", TypeError, "'s'"),
    (gk.float32, None, TypeError, "'s'"),
    (gk.float32, [1.0], TypeError, "'s'"),
    (gk.float64, np.zeros(2), TypeError, "'s'"),
    (gk.vec3, [1.0, 2.0], ValueError, r"'s'.*3 components"),
    (gk.vec3, np.zeros((3, 1)), ValueError, "'s'"),
    (gk.vec2i, [1.5, 2.0], TypeError, "'s'.*integer"),
    (gk.vec2i, [2 ** 40, 1], ValueError, "'s'.*out of range"),
    (gk.vec2i, np.array([2 ** 40, 1]), ValueError, "'s'.*out of range"),
    (gk.vec3, "abc", TypeError, "'s'"),
    (gk.mat22, np.zeros(3), ValueError, "'s'"),
])
def test_scalar_and_value_errors(param, value, exc, match, dev):
    with pytest.raises(exc, match=match):
        make_binder("kern", [("s", param)])([value], dev)


def test_value_accepts_gk_constructors_and_flat_matrices(dev):
    bind = make_binder("k", [("v", gk.vec3), ("m", gk.mat33)])
    v, m = bind([gk.vec3(1, 2, 3), np.arange(9.0)], dev)
    assert v == (1.0, 2.0, 3.0) and m == tuple(float(k) for k in range(9))
    assert all(type(c) is np.float32 for c in v + m)
    v, m = bind([[1, 2.5, True], tuple(range(9))], dev)          # mixed Python numbers, flat matrix
    assert v == (1.0, 2.5, 1.0) and m == tuple(float(k) for k in range(9))
    assert all(type(c) is np.float32 for c in v + m)
    with pytest.raises(TypeError, match="'v'"):
        bind([gk.zeros(3, device=dev), np.eye(3)], dev)


def test_array_errors(fake_backends):
    dev = gk.get_device("fakehost")
    other = gk.get_device("fakedev:1")
    bind = make_binder("my_kernel", [("x", F32_1D), ("a", gk.float32)])
    with pytest.raises(TypeError, match=r"my_kernel.*'x'.*pass gk.array"):
        bind([np.zeros(3, dtype=np.float32), 1.0], dev)
    with pytest.raises(TypeError, match=r"'x'.*pass gk.array"):
        bind([[1.0, 2.0], 1.0], dev)
    with pytest.raises(TypeError, match="'x'.*gk.array"):
        bind([3.0, 1.0], dev)
    with pytest.raises(TypeError, match="'x'.*float32.*float64"):
        bind([gk.zeros(3, dtype=gk.float64, device=dev), 1.0], dev)
    with pytest.raises(TypeError, match="'x'.*float32.*vec3"):
        bind([gk.zeros(3, dtype=gk.vec3, device=dev), 1.0], dev)
    with pytest.raises((TypeError, ValueError), match="'x'.*1-d.*2-d"):
        bind([gk.zeros((3, 3), device=dev), 1.0], dev)
    with pytest.raises(ValueError, match="'x'.*fakedev:1.*fakehost"):
        bind([gk.zeros(3, device=other), 1.0], dev)
    with pytest.raises(TypeError, match="'a'"):
        bind([gk.zeros(3, device=dev), gk.zeros(1, device=dev)], dev)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_argument_count(n, dev):
    params = [(f"p{k}", gk.float32) for k in range(n)]
    bind = make_binder("count_kernel", params)
    assert bind([1.0] * n, dev) == [np.float32(1.0)] * n
    for wrong in (n + 1, max(n - 1, 0) if n else 2):
        with pytest.raises(TypeError, match=r"count_kernel.*takes %d argument" % n) as info:
            bind([1.0] * wrong, dev)
        for name, _ in params:
            assert name in str(info.value)


def test_never_mutates_inputs(dev):
    args = _good_args(dev)
    vec_in, mat_in = args[6], args[7]
    snapshot = (list(args), list(vec_in), mat_in.copy())
    a0_version = args[0].version
    make_binder("k", PARAMS)(args, dev)
    assert args == snapshot[0] and vec_in == snapshot[1]
    np.testing.assert_array_equal(mat_in, snapshot[2])
    assert args[0].version == a0_version


def test_binder_speed(dev):
    """Target: about 2 µs for two arrays and one scalar (generous bound here; slow CI machines vary)."""
    bind = make_binder("speed", [("x", F32_1D), ("y", F32_1D), ("a", gk.float32)])
    args = [gk.zeros(8, device=dev), gk.zeros(8, device=dev), 0.5]
    n = 20000
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            bind(args, dev)
        best = min(best, (time.perf_counter() - t0) / n)
    print(f"bind 2 arrays + 1 scalar: {best * 1e6:.2f} us")
    assert best < 10e-6
