"""gk.launch rejects bad arguments with TypeError/ValueError naming the parameter, and changes nothing."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def axpy(x: gk.array(dtype=float), a: float, y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a * x[i] + y[i]


@gk.kernel
def grid(m: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    m[i, j] = 1.0


def _args(device):
    return gk.array([1.0, 2.0], device=device), gk.array([5.0, 6.0], device=device)


@pytest.mark.parametrize("make, exc, pattern", [
    (lambda x, y: ([x], [y]), TypeError, r"axpy.*3.*x, a, y"),                       # wrong count
    (lambda x, y: ([x.numpy(), 2.0], [y]), TypeError, r"'x'.*gk.array"),              # NumPy for an array
    (lambda x, y: ([gk.zeros(2, dtype=gk.float64, device=x.device), 2.0], [y]), TypeError, r"'x'.*float32"),
    (lambda x, y: ([gk.zeros((2, 2), device=x.device), 2.0], [y]), (TypeError, ValueError), r"'x'"),
    (lambda x, y: ([x, "two"], [y]), TypeError, r"'a'"),                              # bad scalar
], ids=["count", "numpy", "dtype", "ndim", "scalar"])
def test_bad_arguments_name_the_parameter(device, make, exc, pattern):
    x, y = _args(device)
    inputs, outputs = make(x, y)
    with pytest.raises(exc, match=pattern):
        gk.launch(axpy, 2, inputs=inputs, outputs=outputs, device=device)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(y.numpy(), [5.0, 6.0])


def test_bad_dim(device):
    x, y = _args(device)
    with pytest.raises(ValueError, match="dim"):
        gk.launch(axpy, -1, inputs=[x, 2.0], outputs=[y], device=device)
    with pytest.raises(ValueError, match="dim"):
        gk.launch(axpy, (1, 1, 1, 1, 1), inputs=[x, 2.0], outputs=[y], device=device)
    with pytest.raises(ValueError, match="unpacks gk.tid.. into 2"):
        gk.launch(grid, 4, outputs=[gk.zeros((2, 2), device=device)], device=device)


def test_array_on_another_device(device):
    others = [d.name for d in gk.get_devices() if d.name != device]
    if not others:
        pytest.skip("only one device available")
    x = gk.array([1.0, 2.0], device=others[0])
    y = gk.zeros(2, device=device)
    with pytest.raises(ValueError, match=r"'x'.*" + others[0]):
        gk.launch(axpy, 2, inputs=[x, 2.0], outputs=[y], device=device)


def test_good_launch(device):
    x, y = _args(device)
    gk.launch(axpy, 2, inputs=[x, 2.0], outputs=[y], device=device)
    np.testing.assert_array_equal(y.numpy(), [7.0, 10.0])
