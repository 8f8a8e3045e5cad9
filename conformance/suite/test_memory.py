"""Device memory through the backend interface (alloc, host copies both ways, device copy, zero fill,
host_view): every scalar, vector and matrix dtype round-trips bit for bit, including NaN payloads, ±0
and integer extremes; copies with offsets and counts move exactly the range asked; fills and zeroing
touch only their array; arrays of a few bytes and of tens of megabytes; an empty array."""

import numpy as np
import pytest

import gradkit as gk

DTYPES = [gk.float32, gk.float64, gk.int32, gk.int64, gk.uint32, gk.vec3, gk.vec2d, gk.mat22, gk.mat33d]


def _data(dtype, n, rng) -> np.ndarray:
    host = gk.zeros(1, dtype=dtype).numpy()         # the host layout of one element (dtype and components)
    shape = (n, *host.shape[1:])
    if host.dtype.kind == "f":
        x = rng.normal(size=shape).astype(host.dtype)
        flat = x.reshape(-1)
        special = np.array([np.nan, -0.0, np.inf, -np.inf, np.finfo(host.dtype).max], dtype=host.dtype)
        flat[:min(len(special), flat.size)] = special[:flat.size]
        return x
    info = np.iinfo(host.dtype)
    x = rng.integers(-50 if info.min < 0 else 0, 50, size=shape).astype(host.dtype)
    flat = x.reshape(-1)
    flat[:2] = [info.max, info.min][:flat.size]
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=[d.name for d in DTYPES])
def test_round_trip_copy_fill(device, dtype, rng):
    for n in (1, 7, 1000):
        x = _data(dtype, n, rng)
        a = gk.array(x, dtype=dtype, device=device)
        assert a.shape == (n,) and a.device.name == device
        np.testing.assert_array_equal(a.numpy().view(np.uint8), x.view(np.uint8))     # bit for bit
        b = a.copy()
        a.zero_()
        np.testing.assert_array_equal(b.numpy().view(np.uint8), x.view(np.uint8))
        assert not a.numpy().any()
        a.assign(x)
        dst = gk.zeros(n + 4, dtype=dtype, device=device)
        gk.copy(dst, a, dest_offset=3, src_offset=1, count=n - 1)
        got = dst.numpy()
        np.testing.assert_array_equal(got[3:3 + n - 1].view(np.uint8), x[1:].view(np.uint8))
        assert not got[:3].any() and not got[3 + n - 1:].any()


def test_fill_and_large_arrays(device, rng):
    n = 5_000_001
    a = gk.zeros(n, device=device)
    a.fill_(2.5)
    b = gk.full(n, 7, dtype=gk.int32, device=device)
    host = a.numpy()
    assert host.shape == (n,) and np.all(host == 2.5) and np.all(b.numpy() == 7)
    x = rng.normal(size=n).astype(np.float32)
    a.assign(x)
    np.testing.assert_array_equal(a.numpy(), x)


def test_empty_arrays(device):
    a = gk.zeros(0, device=device)
    assert a.numpy().shape == (0,)
    b = gk.array(np.zeros((0, 3), np.float32), dtype=gk.vec3, device=device)
    assert b.shape == (0,) and b.copy().numpy().shape == (0, 3)
