"""gk.config.check_nan names the kernel, array, direction and first bad element."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def take_log(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.log(x[i])


@pytest.fixture
def check_nan():
    gk.config.check_nan = True
    yield
    gk.config.check_nan = False


def test_forward_nan_origin(device, check_nan):
    x = gk.array([1.0, 2.0, -1.0, 3.0], dtype=gk.float32, device=device)
    y = gk.zeros(4, device=device)
    y.label = "logs"
    with pytest.raises(gk.NaNError, match=r"take_log.*forward.*'logs' at index 2"):
        gk.launch(take_log, 4, inputs=[x], outputs=[y], device=device)


@gk.kernel
def take_sqrt(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sqrt(x[i])


def test_backward_inf_origin(device, check_nan):
    """sqrt(0) is finite going forward; its gradient is inf: the backward launch is named."""
    x = gk.array([1.0, 0.0], dtype=gk.float32, device=device, requires_grad=True)
    y = gk.zeros(2, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(take_sqrt, 2, inputs=[x], outputs=[y], device=device)
    with pytest.raises(gk.NaNError, match=r"take_sqrt.*backward.*index 1"):
        tape.backward(grads={y: gk.array([1.0, 1.0], dtype=gk.float32, device=device)})


def test_no_false_positive(device, check_nan):
    x = gk.array(np.linspace(1, 2, 8, dtype=np.float32), device=device)
    y = gk.zeros(8, device=device)
    gk.launch(take_log, 8, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), np.log(np.linspace(1, 2, 8)), rtol=1e-6)
