"""`gradkit.warp` streams and events: `wp.Stream`, `wp.ScopedStream`, `launch(stream=)`, `wp.get_stream` /
`set_stream`, `wait_stream`, `record_event` / `wait_event`, `get_event_elapsed_time`, on every device.
gradkit's launches are ordered on each device (host launches finish before they return; an OpenCL device has
one in-order queue), so streams must change no result: a producer / consumer chain across streams is
checked against float64 NumPy and against the same chain run by Warp 1.19 on its cpu device (where Warp has
no streams), and the bookkeeping (current stream, current device, events) against Warp's documented rules."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import numpy as np
import pytest

import gradkit.warp as gwp

try:
    import warp
    warp.config.quiet = True
    warp.init()
except ImportError:         # pragma: no cover - the reference is optional
    warp = None


def kernels(wp):
    @wp.kernel
    def scale(x: wp.array(dtype=float), a: float, y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = a * wp.sin(x[i])

    @wp.kernel
    def accumulate(y: wp.array(dtype=float), z: wp.array(dtype=float)):
        i = wp.tid()
        z[i] = z[i] + y[i] * y[i]

    return scale, accumulate


def chain(wp, x, device, streams):
    """y_k = (k + 1) sin(x) on stream k, then z += y_k^2 on the next stream after it waits for stream k."""
    scale, accumulate = kernels(wp)
    xs = wp.array(x, dtype=float, device=device)
    z = wp.zeros(len(x), dtype=float, device=device)
    for k in range(4):
        y = wp.zeros(len(x), dtype=float, device=device)
        producer = streams[k % len(streams)] if streams else None
        consumer = streams[(k + 1) % len(streams)] if streams else None
        wp.launch(scale, len(x), inputs=[xs, float(k + 1)], outputs=[y], device=device, stream=producer)
        if streams:
            with wp.ScopedStream(consumer):
                wp.wait_stream(producer)
                wp.launch(accumulate, len(x), inputs=[y], outputs=[z])
        else:
            wp.launch(accumulate, len(x), inputs=[y], outputs=[z], device=device)
    return z.numpy()


def reference(x):
    x = x.astype(np.float64)
    return sum(((k + 1) * np.sin(x)) ** 2 for k in range(4))


def test_launches_across_streams_keep_their_order(device, rng):
    x = rng.uniform(-2.0, 2.0, 5000).astype(np.float32)
    streams = [gwp.Stream(device=device) for _ in range(3)]
    got = chain(gwp, x, device, streams)
    np.testing.assert_allclose(got, reference(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, chain(gwp, x, device, None))
    if warp is not None:         # Warp 1.19 on its cpu device, without streams (it has none there)
        np.testing.assert_allclose(got, chain(warp, x, "cpu", None), rtol=1e-6, atol=1e-6)


def test_scoped_stream_sets_the_current_stream_and_device(device):
    default = gwp.get_stream(device)
    assert gwp.get_stream(device) is default
    s = gwp.Stream(device)
    with gwp.ScopedDevice("cpu"):
        with gwp.ScopedStream(s) as entered:
            assert entered is s
            assert gwp.get_device() == device
            assert gwp.get_stream() is s
            inner = gwp.Stream(device)
            with gwp.ScopedStream(inner, sync_exit=True):
                assert gwp.get_stream() is inner
            assert gwp.get_stream() is s
        assert gwp.get_device() == "cpu"
    assert gwp.get_stream(device) is default
    with gwp.ScopedStream(None) as entered:
        assert entered is None and gwp.get_stream(device) is default
    gwp.set_stream(s, device)
    assert gwp.get_stream(device) is s
    gwp.set_stream(default, device, sync=True)
    assert gwp.get_stream(device) is default


def test_events_record_and_time_the_work_between_them(device, rng):
    scale, _ = kernels(gwp)
    x = gwp.array(rng.uniform(-1.0, 1.0, 20000).astype(np.float32), dtype=float, device=device)
    y = gwp.zeros(len(x), dtype=float, device=device)
    s = gwp.Stream(device)
    with gwp.ScopedStream(s):
        start = gwp.record_event(gwp.Event(enable_timing=True))
        gwp.launch(scale, len(x), inputs=[x, 2.0], outputs=[y])
        end = s.record_event(gwp.Event(device, enable_timing=True))
        gwp.wait_event(end)
    gwp.synchronize_stream(s)
    gwp.synchronize_event(end)
    assert start.is_complete and end.is_complete and s.is_complete
    assert gwp.get_event_elapsed_time(start, end) >= 0.0
    np.testing.assert_allclose(y.numpy(), 2.0 * np.sin(x.numpy().astype(np.float64)), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="recorded"):
        gwp.get_event_elapsed_time(gwp.Event(device), end)
    with pytest.raises(TypeError, match="priority"):
        gwp.Stream(device, priority=0.5)
    with pytest.raises(ValueError, match="interprocess"):
        gwp.Event(device, enable_timing=True, interprocess=True)
    assert gwp.Stream(device, priority=-5).priority == -1 and gwp.Stream(device, priority=3).priority == 0


@pytest.mark.skipif(warp is None, reason="warp-lang (the reference) is not installed")
def test_warp_refuses_streams_on_its_cpu_device_where_gradkit_runs_them_in_order():
    """The documented difference: Warp 1.19's streams are CUDA's only."""
    with pytest.raises(RuntimeError, match="not a CUDA device"):
        warp.Stream("cpu")
    assert gwp.Stream("cpu").device == "cpu"
