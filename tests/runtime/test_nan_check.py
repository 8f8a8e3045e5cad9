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


# --------------------------------------------------------------------------- the op that made it (op_trace)

def _line_of(kernel, text: str) -> int:
    import inspect
    lines, first = inspect.getsourcelines(kernel.pyfunc)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _raise(fn):
    with pytest.raises(gk.NaNError) as info:
        fn()
    return info.value


def test_op_forward_names_log_and_its_operand(device, check_nan, rng):
    xs = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    xs[11] = -0.25
    x = gk.array(xs, device=device)
    y = gk.zeros(16, device=device)
    err = _raise(lambda: gk.launch(take_log, 16, inputs=[x], outputs=[y], device=device))
    o = err.origin
    assert (o["op"], o["operands"], o["result"], o["thread"]) == ("log", [-0.25], "nan", [11])
    assert o["line"] == _line_of(take_log, "gk.log(x[i])") and o["grad_of"] is None
    assert "`log` computed log(-0.25) = nan" in str(err)


def test_op_backward_ties_the_gradient_to_the_forward_sqrt(device, check_nan, rng):
    xs = rng.uniform(0.5, 2.0, 8).astype(np.float32)
    xs[3] = 0.0
    x = gk.array(xs, device=device, requires_grad=True)
    y = gk.zeros(8, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(take_sqrt, 8, inputs=[x], outputs=[y], device=device)
    err = _raise(lambda: tape.backward(grads={y: gk.array(np.ones(8, np.float32), device=device)}))
    o = err.origin
    assert o["grad_of"] == "sqrt" and o["primal_operands"] == [0.0] and o["primal_result"] == 0.0
    assert o["result"] == "inf" and o["thread"] == [3]
    assert o["line"] == _line_of(take_sqrt, "gk.sqrt(x[i])")
    assert "the gradient of `sqrt`" in str(err)


@gk.kernel
def log_steps(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    acc = float(0.0)
    for k in range(5):
        acc += gk.log(x[i] - float(k))
    y[i] = acc


def test_op_in_a_loop_names_the_iteration(device, check_nan):
    """log(x - k) meets a negative argument at k = 3 for x = 2.5: the loop and the iteration are named."""
    x = gk.array([9.0, 2.5, 9.0], dtype=gk.float32, device=device)
    y = gk.zeros(3, device=device)
    err = _raise(lambda: gk.launch(log_steps, 3, inputs=[x], outputs=[y], device=device))
    o = err.origin
    assert o["op"] == "log" and o["operands"] == [-0.5] and o["thread"] == [1]
    assert o["loops"] == [[_line_of(log_steps, "for k in range(5)"), 3]]
    assert "iteration 3 of the loop at line" in str(err)


@gk.kernel
def grow(x: gk.array(dtype=gk.float32, ndim=2), y: gk.array(dtype=gk.float32, ndim=2)):
    i, j = gk.tid()
    y[i, j] = gk.exp(x[i, j]) * 0.5


def test_op_keeps_float32_and_2d_threads(device, check_nan):
    """exp(89) overflows float32 (not float64): the trace computes in the kernel's dtype; a 2-D grid's
    thread is named by its coordinates."""
    xs = np.zeros((3, 4), np.float32)
    xs[2, 1] = 89.0
    x, y = gk.array(xs, device=device), gk.zeros((3, 4), dtype=gk.float32, device=device)
    err = _raise(lambda: gk.launch(grow, (3, 4), inputs=[x], outputs=[y], device=device))
    o = err.origin
    assert (o["op"], o["operands"], o["result"], o["thread"]) == ("exp", [89.0], "inf", [2, 1])


@gk.kernel
def unit(v: gk.array(dtype=gk.vec3), out: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    out[i] = v[i] / gk.length(v[i])


def test_op_in_vector_code(device, check_nan, rng):
    vs = rng.normal(size=(6, 3)).astype(np.float32)
    vs[4] = 0.0
    v, out = gk.array(vs, dtype=gk.vec3, device=device), gk.zeros(6, dtype=gk.vec3, device=device)
    err = _raise(lambda: gk.launch(unit, 6, inputs=[v], outputs=[out], device=device))
    o = err.origin
    assert (o["op"], o["operands"], o["result"], o["thread"]) == ("div", [0.0, 0.0], "nan", [4])


@gk.kernel
def double(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * 2.0


def test_op_read_of_an_existing_nan_says_it_came_from_before(device, check_nan):
    x = gk.array([1.0, np.nan, 2.0], dtype=gk.float32, device=device)
    y = gk.zeros(3, device=device)
    err = _raise(lambda: gk.launch(double, 3, inputs=[x], outputs=[y], device=device))
    o = err.origin
    assert (o["op"], o["array"], o["index"], o["thread"]) == ("load", "x", [1], [1])
    assert "already there before this launch" in str(err)


@gk.kernel
def halve_until(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    n = int(0)
    while v > 1.0:
        v = v * 0.5
        n += 1
    y[i] = gk.log(v - 0.75) + float(n)


def test_op_after_a_while_loop_and_thread_search(device, check_nan):
    """The offending element is written by its own thread here; the trace replays the while loop."""
    x = gk.array([8.0, 1.5, 3.0, 6.0], dtype=gk.float32, device=device)      # 1.5 -> 0.75: log(0)
    y = gk.zeros(4, device=device)
    err = _raise(lambda: gk.launch(halve_until, 4, inputs=[x], outputs=[y], device=device))
    o = err.origin
    assert o["thread"] == [1] and o["op"] == "log" and o["operands"] == [0.0] and o["result"] == "-inf"


@gk.kernel
def scatter_log(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[(i + 2) % 5] = gk.log(x[i])


def test_op_finds_the_thread_that_wrote_another_element(device, check_nan):
    x = gk.array([1.0, 2.0, 3.0, -4.0, 5.0], dtype=gk.float32, device=device)   # thread 3 writes y[0]
    y = gk.zeros(5, device=device)
    err = _raise(lambda: gk.launch(scatter_log, 5, inputs=[x], outputs=[y], device=device))
    assert err.index == [0] and err.origin["thread"] == [3] and err.origin["operands"] == [-4.0]
