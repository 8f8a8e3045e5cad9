"""Named errors instead of internal ones (issue 18, item 5), each hostile case in a child process with a
timeout: deeply nested kernel expressions, buffers past a device's memory, literals and scalar arguments
that would wrap or become inf. A child reports each case as a JSON line [label, error type or "ok", message
or result]; the parent checks the named error, that nothing crashed and that no RecursionError or traceback
escaped.

Measured recursion limits (Python's default limit of 1000 frames, a launch from a script):
- chains of binary operators (`x + a*x - b + ...`, any parenthesisation) are lowered with a loop: 2800 terms
  compile and differentiate on every device; past ~2900 Python itself cannot compile the script;
- other nesting (calls, conditionals, unary operators, subscripts) costs 4-6 frontend frames a level:
  ~250 levels exhausted the frontend before its limit (MAX_EXPR_DEPTH = 100);
- nested regions (statement blocks, conditional expressions reading arrays): the IR passes gave up near
  300-350 levels and the OpenCL compiler at ~256 (clang's bracket depth) on every mode; the frontend allows at
  most ~97 blocks (Python's indentation limit) + 100 expression levels, run below as `deepest_allowed`.
"""

import importlib.util
import json

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.errors import DeviceMemoryError
from gradkit.core.frontend.exprs import MAX_EXPR_DEPTH

from tests.reliability.hostile import run_child

X = [0.25, 0.5, 1.0, -0.75]

PRELUDE = """
import json, sys
import numpy as np
import gradkit as gk

dev = sys.argv[1]


def report(label, fn):
    try:
        print(json.dumps([label, "ok", fn()]))
    except Exception as exc:
        print(json.dumps([label, type(exc).__name__, str(exc)]))
"""


def run_cases(tmp_path, body: str, *args: str) -> dict:
    """Run PRELUDE + body in a child; {label: [outcome, message or result]}, after checking the child exited
    normally (no crash signal) and printed no traceback."""
    proc = run_child(PRELUDE + body, tmp_path, *args, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not any(r[1] == "RecursionError" for r in rows), rows
    return {r[0]: r[1:] for r in rows}


def chain(n: int) -> str:
    """A left-leaning chain of n terms, the shape generated code has: x + 1*x - 0.5 + 2*x - 1.5 ..."""
    return "x[i]" + "".join(f" + x[i] * {k % 7 + 1}.0" if k % 2 else f" - {k % 5}.5" for k in range(n))


def chain_expected(n: int, x):
    """Value and derivative of chain(n) in float64."""
    x = np.asarray(x, np.float64)
    slope = 1.0 + sum(k % 7 + 1 for k in range(n) if k % 2)
    return x * slope - sum(k % 5 + 0.5 for k in range(n) if not k % 2), np.full_like(x, slope)


def ifexp(n: int) -> str:
    """n conditional expressions, each nested in the previous one's else branch (reading x: a region each)."""
    return "".join(f"x[i] * {k}.0 if x[i] > {k}.0 else " for k in range(n)) + "x[i]"


# --------------------------------------------------------------------------- a. expression depth

def depth_source(n_chain: int) -> str:
    blocks = [f"for j{k} in range(1):" for k in range(19)] + [f"if x[i] > -{k + 1}.0:" for k in range(77)]
    body = "\n".join("    " * (k + 1) + line for k, line in enumerate(blocks + [f"y[i] = {ifexp(97)}"]))
    funcs = ["@gk.func\ndef f0(a: float) -> float:\n    return a * 1.5"]
    funcs += [f"@gk.func\ndef f{k}(a: float) -> float:\n    return f{k - 1}(a) + 1.0" for k in range(1, 200)]
    kernels = {"long_chain": chain(n_chain), "horner": "(x[i] * (0.5 + " * 95 + "x[i]" + "))" * 95,
               "deep_unary": "-" * 500 + "x[i]", "deep_ifexp": ifexp(1000), "deep_calls": "f199(x[i])"}
    src = "\n\n".join(funcs) + "\n\n"
    for name, expr in kernels.items():
        src += f"@gk.kernel\ndef {name}(x: gk.array(dtype=float), y: gk.array(dtype=float)):\n"
        src += f"    i = gk.tid()\n    y[i] = {expr}\n\n"
    src += "@gk.kernel\ndef deepest_allowed(x: gk.array(dtype=float), y: gk.array(dtype=float)):\n"
    src += f"    i = gk.tid()\n{body}\n\n"
    return src + f"""
X = {X!r}
KERNELS = {[*kernels, "deepest_allowed"]!r}


def value(k):
    x, y = gk.array(X, device=dev), gk.zeros(4, device=dev)
    gk.launch(k, 4, inputs=[x, y], device=dev)
    return y.numpy().tolist()


def gradient(k):
    x, y = gk.array(X, device=dev, requires_grad=True), gk.zeros(4, device=dev, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(k, 4, inputs=[x, y], device=dev)
    tape.backward(grads={{y: np.ones(4, np.float32)}})
    return x.grad.numpy().tolist()


def tangent(k):
    x, y = gk.array(X, device=dev, requires_dual=True), gk.zeros(4, device=dev, requires_dual=True)
    with gk.ForwardMode(seeds={{x: gk.array(np.ones(4, np.float32), device=dev)}}):
        gk.launch(k, 4, inputs=[x, y], device=dev)
    return y.dual.numpy().tolist()


for name in KERNELS:
    for mode in (value, gradient, tangent):
        report(f"{{name}}.{{mode.__name__}}", lambda: mode(globals()[name]))
"""


@pytest.mark.slow        # ~25 s a device, most of it the reverse pass over ~190 nested regions
def test_expression_depth(device, tmp_path):
    """A 1000-term chain and a 95-deep parenthesised Horner form compile and differentiate; 500 unary
    operators, 1000 nested conditionals and 200 nested @gk.func calls are CompileErrors at the kernel source;
    the deepest nesting the frontend allows survives every pass and code generator."""
    n = 1000
    out = run_cases(tmp_path, depth_source(n), device)
    val, slope = chain_expected(n, X)
    np.testing.assert_allclose(out["long_chain.value"][1], val, rtol=1e-4)
    np.testing.assert_allclose(out["long_chain.gradient"][1], slope, rtol=1e-5)
    np.testing.assert_allclose(out["long_chain.tangent"][1], slope, rtol=1e-5)
    x = np.asarray(X, np.float64)
    horner = x
    for _ in range(95):
        horner = x * (0.5 + horner)
    np.testing.assert_allclose(out["horner.value"][1], horner, rtol=1e-5)
    for mode in ("value", "gradient", "tangent"):
        for name in ("deep_unary", "deep_ifexp"):
            kind, msg = out[f"{name}.{mode}"]
            assert kind == "CompileError", (name, mode, kind, msg)
            assert f"expression too deeply nested (limit {MAX_EXPR_DEPTH}" in msg
            assert "hostile_case.py:" in msg and "^" in msg
        kind, msg = out[f"deep_calls.{mode}"]
        assert kind == "CompileError" and "too deeply nested" in msg and "hostile_case.py:" in msg, msg
        assert out[f"deepest_allowed.{mode}"][0] == "ok", out[f"deepest_allowed.{mode}"]
    # x = 0.25, 0.5, 1.0 take the k = 0 branch (0 * x); -0.75 falls through every branch (x itself)
    assert out["deepest_allowed.value"][1] == [0.0, 0.0, 0.0, -0.75]
    assert out["deepest_allowed.gradient"][1] == [0.0, 0.0, 0.0, 1.0]


def _load(tmp_path, name: str, source: str):
    """Import a generated kernel module (kernels are parsed from their file)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_300_term_chain_value_and_gradients(device, tmp_path):
    src = ("import gradkit as gk\n\n@gk.kernel\ndef k(x: gk.array(dtype=float), y: gk.array(dtype=float)):\n"
           f"    i = gk.tid()\n    y[i] = {chain(300)}\n")
    k = _load(tmp_path, "chain300", src).k
    val, slope = chain_expected(300, X)
    x, y = gk.array(X, device=device, requires_grad=True), gk.zeros(4, device=device, requires_grad=True)
    with gk.Tape() as tape:
        gk.launch(k, 4, inputs=[x, y], device=device)
    tape.backward(grads={y: np.ones(4, np.float32)})
    np.testing.assert_allclose(y.numpy(), val, rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), slope, rtol=1e-6)
    xd, yd = gk.array(X, device=device, requires_dual=True), gk.zeros(4, device=device, requires_dual=True)
    with gk.ForwardMode(seeds={xd: gk.array(np.ones(4, np.float32), device=device)}):
        gk.launch(k, 4, inputs=[xd, yd], device=device)
    np.testing.assert_allclose(yd.dual.numpy(), slope, rtol=1e-6)


def test_nesting_at_the_limit_compiles_inside_pytest(device, tmp_path):
    """MAX_EXPR_DEPTH levels compile even from pytest's deeper stack; one more is the named error."""
    # n unary minus signs + the subscript + its name are n + 2 levels
    n = MAX_EXPR_DEPTH - 2
    head = "import gradkit as gk\n\n@gk.kernel\ndef k(x: gk.array(dtype=float), y: gk.array(dtype=float)):\n"
    ok = _load(tmp_path, "at_limit", head + f"    i = gk.tid()\n    y[i] = {'-' * n}x[i]\n").k
    x, y = gk.array(X, device=device), gk.zeros(4, device=device)
    gk.launch(ok, 4, inputs=[x, y], device=device)
    np.testing.assert_allclose(y.numpy(), np.asarray(X) * (-1) ** n)
    past = _load(tmp_path, "past_limit", head + f"    i = gk.tid()\n    y[i] = {'-' * (n + 1)}x[i]\n").k
    with pytest.raises(gk.CompileError, match=r"past_limit\.py:6:12: .*too deeply nested"):
        gk.launch(past, 4, inputs=[x, y], device=device)
    np.testing.assert_allclose(y.numpy(), np.asarray(X) * (-1) ** n)     # untouched by the refused launch


# --------------------------------------------------------------------------- b. allocations past a device

ALLOC_CHILD = """
n = int(sys.argv[2])                     # float32 elements: past what the device can hold
cpu_lazy = int(sys.argv[3])              # whether a host array of n elements can be made (calloc is lazy)
report("zeros", lambda: gk.zeros(n, dtype=gk.float32, device=dev).nbytes)
report("empty", lambda: gk.empty(n, dtype=gk.float32, device=dev).nbytes)
report("array", lambda: gk.array(np.broadcast_to(np.float32(0), (n,)), device=dev).nbytes)   # no host memory
report("shape2d", lambda: gk.zeros((n, n), device=dev).nbytes)
if cpu_lazy:
    host = gk.zeros(n, device="cpu")
    report("to", lambda: host.to(dev).nbytes)             # an array the runtime makes itself
report("still usable", lambda: (gk.ones(3, device=dev).numpy() * 2).tolist())
"""


def test_oversized_arrays_are_memory_errors(device, tmp_path):
    """16 GiB on OpenCL (PoCL: 4 GiB per buffer) and 4 PiB on the host backends are a MemoryError naming the
    size and the device (and the device's limits where it has them), not a driver or NumPy error."""
    opencl = device.startswith("opencl")
    n = 4 * 2**30 if opencl else 2**50
    out = run_cases(tmp_path, ALLOC_CHILD, device, str(n), "1" if opencl else "0")
    cases = ["zeros", "empty", "array", "shape2d"] + (["to"] if opencl else [])
    for case in cases:
        kind, msg = out[case]
        assert kind == "DeviceMemoryError", (case, kind, msg)
        assert f"on device '{device}'" in msg and "cannot allocate" in msg, msg
        if case != "shape2d":
            assert f"({n * 4} bytes)" in msg, msg
        if opencl:
            assert "16.00 GiB" in msg or case == "shape2d"
            assert "CL_DEVICE_MAX_MEM_ALLOC_SIZE" in msg and "CL_DEVICE_GLOBAL_MEM_SIZE" in msg, msg
    assert issubclass(DeviceMemoryError, MemoryError)
    assert out["still usable"] == ["ok", [2.0, 2.0, 2.0]]


# --------------------------------------------------------------------------- c. literal overflow

LITERAL_CHILD = """
@gk.kernel
def wraps(x: gk.array(dtype=gk.int32), y: gk.array(dtype=gk.int32)):
    i = gk.tid()
    y[i] = x[i] + 3000000000


@gk.kernel
def becomes_inf(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * 1e40


@gk.kernel
def cast_wraps(x: gk.array(dtype=gk.int32), y: gk.array(dtype=gk.int32)):
    i = gk.tid()
    y[i] = x[i] + gk.int32(2**40)


for name, k, dt in [("int32", wraps, gk.int32), ("float32", becomes_inf, gk.float32),
                    ("cast", cast_wraps, gk.int32)]:
    x, y = gk.ones(4, dtype=dt, device=dev), gk.full(4, 7, dtype=dt, device=dev)
    report(name, lambda: gk.launch(k, 4, inputs=[x, y], device=dev))
    report(name + " untouched", lambda: y.numpy().tolist())
"""


def test_literals_that_do_not_fit_are_compile_errors(device, tmp_path):
    out = run_cases(tmp_path, LITERAL_CHILD, device)
    kind, msg = out["int32"]
    assert kind == "CompileError", msg
    assert "hostile_case.py:18:19" in msg and "integer literal 3000000000 does not fit int32" in msg, msg
    assert "gk.int64(3000000000)" in msg and msg.endswith("^")
    kind, msg = out["float32"]
    assert kind == "CompileError", msg
    assert "hostile_case.py:24:19" in msg and "float literal 1e+40 does not fit float32" in msg, msg
    kind, msg = out["cast"]
    assert kind == "CompileError" and "1099511627776 does not fit int32" in msg, msg
    for name in ("int32", "float32", "cast"):
        assert out[name + " untouched"] == ["ok", [7, 7, 7, 7]]


@gk.kernel
def edges(x: gk.array(dtype=gk.int32), y: gk.array(dtype=gk.int32)):
    i = gk.tid()
    y[i] = x[i] * 0 + 2147483647
    if x[i] < 0:
        y[i] = -2147483648


@gk.kernel
def wide_int(x: gk.array(dtype=gk.int64), y: gk.array(dtype=gk.int64)):
    i = gk.tid()
    y[i] = x[i] + 3000000000


@gk.kernel
def wide_float(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * 1e40


def test_literals_at_the_edges_and_in_64_bit_kernels_compile(device):
    x, y = gk.array([1, -1], dtype=gk.int32, device=device), gk.zeros(2, dtype=gk.int32, device=device)
    gk.launch(edges, 2, inputs=[x, y], device=device)
    assert y.numpy().tolist() == [2**31 - 1, -2**31]
    if device.startswith("opencl") and not gk.get_device(device).info.properties.get("fp64", True):
        return
    x, y = gk.array([1, 2], dtype=gk.int64, device=device), gk.zeros(2, dtype=gk.int64, device=device)
    gk.launch(wide_int, 2, inputs=[x, y], device=device)
    assert y.numpy().tolist() == [3000000001, 3000000002]
    x, y = gk.array([1.0, 2.0], dtype=gk.float64, device=device), gk.zeros(2, dtype=gk.float64, device=device)
    gk.launch(wide_float, 2, inputs=[x, y], device=device)
    np.testing.assert_allclose(y.numpy(), [1e40, 2e40])


# --------------------------------------------------------------------------- d. out-of-range values

SCALAR_CHILD = """
@gk.kernel
def scaled(x: gk.array(dtype=float), s: float, n: int, u: gk.uint32, v: gk.vec3):
    i = gk.tid()
    x[i] = s + float(n) + float(u) + v[0]


x = gk.full(2, 7.0, device=dev)
fine = dict(s=1.0, n=1, u=1, v=(0.0, 0.0, 0.0))
for name, value in [("s", 1e40), ("s", np.float64(-1e40)), ("s", 10**400), ("n", 2**40), ("u", -1),
                    ("v", (1e40, 0.0, 0.0)), ("s", float("nan")), ("s", float("inf"))]:
    args = {**fine, name: value}
    report(f"{name}={value!r}", lambda: gk.launch(scaled, 2, inputs=[x, *args.values()], device=dev) or
           x.numpy().tolist())
    report(f"{name}={value!r} x", lambda: x.numpy().tolist())
    x.fill_(7.0)
report("data f32", lambda: gk.array([1.0, 1e40], dtype=gk.float32, device=dev).numpy().tolist())
report("data i32", lambda: gk.array([1, 2**40], dtype=gk.int32, device=dev).numpy().tolist())
report("data u32", lambda: gk.array([-1], dtype=gk.uint32, device=dev).numpy().tolist())
report("data f64 ndarray", lambda: gk.array(np.array([[0.0, 1e300]]), dtype=gk.float32, device=dev).shape)
y = gk.zeros(2, device=dev)
report("assign", lambda: y.assign(np.array([0.0, 1e300])))
report("fill", lambda: y.fill_(1e40))
report("setitem", lambda: y.__setitem__(0, -1e39))
report("untouched", lambda: y.numpy().tolist())
"""


def test_out_of_range_values_are_refused(device, tmp_path):
    """Scalars, vectors and array data that would become inf or wrap are a ValueError naming the parameter
    (or `data` / `values` / `value`); NaN and inf are float values; nothing is written by a refused call."""
    out = run_cases(tmp_path, SCALAR_CHILD, device)
    refused = {"s=1e+40": ("s", "1e+40"), "s=np.float64(-1e+40)": ("s", "-1e+40"),
               f"s={10**400!r}": ("s", "(401 digits)"), f"n={2**40}": ("n", "1099511627776"),
               "u=-1": ("u", "-1"), "v=(1e+40, 0.0, 0.0)": ("v", "1e+40")}
    for label, (name, shown) in refused.items():
        kind, msg = out[label]
        assert kind == "ValueError", (label, kind, msg)
        assert f"kernel 'scaled': parameter '{name}'" in msg and shown in msg and "out of range" in msg, msg
        assert out[label + " x"] == ["ok", [7.0, 7.0]]          # the refused launch wrote nothing
    assert np.isnan(out["s=nan"][1]).all() and out["s=inf"][1] == [np.inf, np.inf]
    for label, arg, shown in [("data f32", "data", "1e+40 at index 1 does not fit float32"),
                              ("data i32", "data", "1099511627776 at index 1 does not fit int32"),
                              ("data u32", "data", "-1 at index 0 does not fit uint32"),
                              ("data f64 ndarray", "data", "1e+300 at index (0, 1) does not fit float32"),
                              ("assign", "values", "1e+300 at index 1"), ("fill", "value", "1e+40"),
                              ("setitem", "value", "-1e+39")]:
        kind, msg = out[label]
        assert kind == "ValueError" and msg.startswith(f"{arg}: {shown}"), (label, kind, msg)
    assert out["untouched"] == ["ok", [0.0, 0.0]]


# --------------------------------------------------------------------------- e. settings

def test_negative_adjoint_stack_size_is_still_refused():
    before = gk.config.adjoint_stack_size
    with pytest.raises(ValueError, match="adjoint_stack_size"):
        gk.config.adjoint_stack_size = -1
    assert gk.config.adjoint_stack_size == before


NESTED_IFS = 40
PASS_DEPTH_CHILD = """
    import sys
    import gradkit as gk

    @gk.kernel
    def nested(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        v = x[i]
""" + "".join("    " * (k + 2) + f"if v > {-k}.0:\n" for k in range(NESTED_IFS)) + "    " * (NESTED_IFS + 2) + \
    "v = v * 2.0\n" + """
        y[i] = v

    @gk.kernel
    def flat(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        y[gk.tid()] = x[gk.tid()]

    dev = sys.argv[1]
    x, y = gk.ones(4, device=dev), gk.zeros(4, device=dev)
    gk.launch(flat, 4, inputs=[x], outputs=[y], device=dev)     # the device and its backend are loaded
    nested.typed_ir                         # the frontend is done; the passes run below
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(40)               # stands in for IR nested deeper than the passes' stack
    try:
        gk.launch(nested, 4, inputs=[x], outputs=[y], device=dev)
        print("compiled")
    except gk.CompileError as exc:
        print("CompileError", "too deeply nested" in str(exc), "'nested'" in str(exc))
    finally:
        sys.setrecursionlimit(limit)        # the interpreter's and PoCL's shutdown run at the usual limit
"""


def test_passes_out_of_stack_are_compile_errors(device, tmp_path):
    """A RecursionError inside a pass or a code generator (IR nested deeper than kernel source may nest,
    e.g. through inlined @gk.func bodies) is a CompileError naming the kernel, not an internal error."""
    proc = run_child(PASS_DEPTH_CHILD, tmp_path, device, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["CompileError", "True", "True"], proc.stdout


@pytest.mark.parametrize("write", ["fill_", "full", "assign"])
def test_ints_too_big_even_for_numpy_are_value_errors(device, write):
    """2**70 into an int32 array is a ValueError naming the value like 2**40 is (NumPy raised OverflowError)."""
    a = gk.zeros(3, dtype=gk.int32, device=device)
    with pytest.raises(ValueError, match=r"^value|^values"):
        if write == "fill_":
            a.fill_(2**70)
        elif write == "full":
            gk.full(3, 2**70, dtype=gk.int32, device=device)
        else:
            a.assign([0, 2**70, 0])
    np.testing.assert_array_equal(a.numpy(), 0)
