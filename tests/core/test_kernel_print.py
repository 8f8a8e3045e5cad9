"""print() in kernels and Warp's wp.printf / expect_eq / expect_near (core/builtins/printing.py, #40), on
every device: the text each thread prints against the same values formatted by Python's `%` operator (C's
printf semantics: floats as doubles), compared as sorted lines since the order of threads is not defined;
a print leaves gradients alone (tape and forward mode against central differences) and the adjoint prints
nothing; a format its arguments do not match is a CompileError at the call's file:line:col.

Output is captured with capfd: the cpu, c and opencl backends write with the C library's printf (file
descriptor 1), the numpy backend through sys.stdout."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
import gradkit.warp as wp
from tests.compile_errors import assert_compile_error


def _lines(capfd) -> list[str]:
    return sorted(capfd.readouterr().out.splitlines())


def _g(x) -> str:
    return "%g" % float(x)


@gk.kernel
def print_values(x: gk.array(dtype=float), n: gk.array(dtype=int), big: gk.array(dtype=gk.int64),
                 d: gk.array(dtype=gk.float64), u: gk.array(dtype=gk.uint32)):
    i = gk.tid()
    print("thread", i, "x =", x[i], "n:", n[i], big[i], d[i], u[i], x[i] > 0.0, 3, 2.5)


def test_print_scalars(device, rng, capfd):
    count = 16
    x = (rng.normal(size=count) * 10.0 ** rng.integers(-6, 7, size=count)).astype(np.float32)
    n = rng.integers(-1000, 1000, size=count).astype(np.int32)
    big = rng.integers(-2 ** 62, 2 ** 62, size=count).astype(np.int64)
    d = rng.normal(size=count) * 1e-3
    u = rng.integers(0, 2 ** 32, size=count).astype(np.uint32)
    capfd.readouterr()
    gk.launch(print_values, count, inputs=[gk.array(x, device=device), gk.array(n, device=device),
                                           gk.array(big, device=device), gk.array(d, device=device),
                                           gk.array(u, device=device)], device=device)
    gk.synchronize(device)
    want = sorted(f"thread {i} x = {_g(x[i])} n: {n[i]} {big[i]} {_g(d[i])} {u[i]} {x[i] > 0} 3 2.5"
                  for i in range(count))
    assert _lines(capfd) == want


@gk.func
def show(v: gk.vec3, m: gk.mat22, tag: int):
    print("v", v, "m", m, sep="|", end=";\n")
    print(tag)


@gk.kernel
def print_vectors(p: gk.array(dtype=gk.vec3), q: gk.array(dtype=gk.mat22)):
    i = gk.tid()
    show(p[i], q[i], i)
    print()


def test_print_vectors_matrices_sep_end_in_a_func(device, rng, capfd):
    p = rng.normal(size=(5, 3)).astype(np.float32)
    q = rng.normal(size=(5, 2, 2)).astype(np.float32)
    capfd.readouterr()
    gk.launch(print_vectors, 5, inputs=[gk.array(p, dtype=gk.vec3, device=device),
                                       gk.array(q, dtype=gk.mat22, device=device)], device=device)
    gk.synchronize(device)
    want = []
    for i in range(5):
        v = ", ".join(map(_g, p[i]))
        m = ", ".join("[" + ", ".join(map(_g, row)) + "]" for row in q[i])
        want += [f"v|[{v}]|m|[{m}];", str(i), ""]
    assert _lines(capfd) == sorted(want)


@gk.kernel
def print_in_control_flow(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = x[i]
    for j in range(i + 1):
        if j % 2 == 0:
            print("even", i, j)
        else:
            print("odd", i, j, s)
        s = s * 0.5
    k = 0
    while k < i:
        k += 2
        print("while", i, k)
    y[i] = s


def test_print_in_loops_and_branches(device, rng, capfd):
    x = rng.normal(size=6).astype(np.float32)
    y = gk.zeros(6, device=device)
    capfd.readouterr()
    gk.launch(print_in_control_flow, 6, inputs=[gk.array(x, device=device)], outputs=[y], device=device)
    gk.synchronize(device)
    want = []
    for i in range(6):
        s = np.float32(x[i])
        for j in range(i + 1):
            want.append(f"even {i} {j}" if j % 2 == 0 else f"odd {i} {j} {_g(s)}")
            s = np.float32(s * np.float32(0.5))
        k = 0
        while k < i:
            k += 2
            want.append(f"while {i} {k}")
    assert _lines(capfd) == sorted(want)
    np.testing.assert_allclose(y.numpy(), x * 0.5 ** np.arange(1, 7), rtol=1e-6)


@gk.kernel
def printf_kernel(x: gk.array(dtype=float), n: gk.array(dtype=int), big: gk.array(dtype=gk.int64)):
    i = gk.tid()
    wp.printf("[%3d] %8.3f %e %x %s %05d %lld %%\n", i, x[i], x[i], n[i], "text", n[i], big[i])


def test_printf_formats(device, rng, capfd):
    count = 8
    x = (rng.normal(size=count) * 100).astype(np.float32)
    n = rng.integers(0, 99999, size=count).astype(np.int32)
    big = rng.integers(-2 ** 62, 2 ** 62, size=count).astype(np.int64)
    capfd.readouterr()
    gk.launch(printf_kernel, count, inputs=[gk.array(x, device=device), gk.array(n, device=device),
                                           gk.array(big, device=device)], device=device)
    gk.synchronize(device)
    want = ["[%3d] %8.3f %e %x %s %05d %d %%" % (i, float(x[i]), float(x[i]), n[i], "text", n[i], big[i])
            for i in range(count)]
    assert _lines(capfd) == sorted(want)


@gk.kernel
def expectations(a: gk.array(dtype=float), b: gk.array(dtype=float), n: gk.array(dtype=int),
                 v: gk.array(dtype=gk.vec3), w: gk.array(dtype=gk.vec3)):
    i = gk.tid()
    wp.expect_eq(n[i], i)
    wp.expect_near(a[i], b[i], 0.01)
    wp.expect_near(v[i], w[i], 0.01)
    wp.expect_eq(v[i], w[i])


def _warp_value(x) -> str:
    """Warp's native print of a value (builtin.h): %d / %g, a vector's components each followed by a space."""
    x = np.asarray(x)
    if x.ndim:
        return "".join(f"{_g(c)} " for c in x) + "\n"
    return (f"{int(x)}" if x.dtype.kind in "iu" else _g(x)) + "\n"


def test_expect_eq_and_near_pass_and_fail(device, rng, capfd):
    count = 6
    a = rng.normal(size=count).astype(np.float32)
    b = a.copy()
    n = np.arange(count, dtype=np.int32)
    v = rng.normal(size=(count, 3)).astype(np.float32)
    w = v.copy()
    capfd.readouterr()
    args = [gk.array(t, device=device) for t in (a, b, n)] + \
        [gk.array(t, dtype=gk.vec3, device=device) for t in (v, w)]
    gk.launch(expectations, count, inputs=args, device=device)
    gk.synchronize(device)
    assert capfd.readouterr().out == ""                # every expectation holds: nothing printed
    bad = 3
    b[bad] += 0.5
    n[bad] = 7
    w[bad, 1] -= 0.25
    args = [gk.array(t, device=device) for t in (a, b, n)] + \
        [gk.array(t, dtype=gk.vec3, device=device) for t in (v, w)]
    gk.launch(expectations, count, inputs=args, device=device)
    gk.synchronize(device)
    out = capfd.readouterr().out
    tol = _g(np.float32(0.01))
    want = [
        f"Error, expect_eq() failed:\n\t Expected: {bad}\n\t Actual: 7\n",
        f"Error, expect_near() failed with tolerance {tol}\n    Expected: {_warp_value(b[bad])}    Actual: "
        f"{_warp_value(a[bad])}    Absolute difference: {_warp_value(np.float32(abs(a[bad] - b[bad])))}",
        f"Error, expect_near() failed with tolerance {tol}\n    Expected: {_warp_value(w[bad])}    Actual: "
        f"{_warp_value(v[bad])}    Max absolute difference: {_warp_value(np.abs(v[bad] - w[bad]).max())}",
        f"Error, expect_eq() failed:\n\t Expected: {_warp_value(w[bad])}\t Actual: {_warp_value(v[bad])}",
    ]
    assert out == "".join(want)                        # one thread failed: its messages in program order


@gk.kernel
def printed_loss(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    s = x[i] * x[i]
    print("s", s)
    for j in range(3):
        s = gk.sin(s) + x[i]
        wp.printf("%d %f\n", j, s)
        wp.expect_near(s, s, gk.float64(0.0))
    y[i] = s


@gk.kernel
def unprinted_loss(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    s = x[i] * x[i]
    for j in range(3):
        s = gk.sin(s) + x[i]
    y[i] = s


def test_print_leaves_gradients_alone(device, rng, capfd):
    count = 5
    x0 = rng.uniform(-1.0, 1.0, size=count)
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.zeros(count, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(printed_loss, count, inputs=[x], outputs=[y], device=device)
    gk.synchronize(device)
    assert len(capfd.readouterr().out.splitlines()) == 4 * count
    tape.backward(grads={y: gk.array(np.ones(count), device=device)})
    gk.synchronize(device)
    assert capfd.readouterr().out == ""                # the adjoint kernel prints nothing
    grad = x.grad.numpy().copy()

    def run(xs):
        out = gk.zeros(count, dtype=gk.float64, device=device)
        gk.launch(unprinted_loss, count, inputs=[gk.array(xs, device=device)], outputs=[out], device=device)
        return out.numpy()
    eps = 1e-6
    fd = (run(x0 + eps) - run(x0 - eps)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    x.grad.zero_()
    with gk.ForwardMode(seeds={x: gk.array(np.ones(count), device=device)}):
        gk.launch(printed_loss, count, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(y.dual.numpy(), fd, rtol=1e-6, atol=1e-8)
    assert len(capfd.readouterr().out.splitlines()) == 4 * count   # the tangent kernel prints as the forward


def test_bad_formats_are_compile_errors():
    def too_few(x: gk.array(dtype=float)):
        wp.printf("%d %d\n", gk.tid())
    assert_compile_error(too_few, "wp.printf", r"printf\(\): the format '%d %d\\n' has more conversions than "
                                               r"the 1 argument given")

    def float_as_int(x: gk.array(dtype=float)):
        wp.printf("%d\n", x[gk.tid()])
    assert_compile_error(float_as_int, "wp.printf", r"'%d' \(argument 1\) needs an integer, got float32")

    def int_as_float(x: gk.array(dtype=float)):
        wp.printf("%.2f\n", gk.tid())
    assert_compile_error(int_as_float, "wp.printf", r"'%\.2f' \(argument 1\) needs a float, got int32")

    def unknown_conversion(x: gk.array(dtype=float)):
        wp.printf("%q\n", x[0])
    assert_compile_error(unknown_conversion, "wp.printf", r"'%q': unsupported conversion 'q'")

    def string_of_value(x: gk.array(dtype=float)):
        wp.printf("%s\n", x[0])
    assert_compile_error(string_of_value, "wp.printf", r"'%s' \(argument 1\) prints a string literal")

    def lone_percent(x: gk.array(dtype=float)):
        wp.printf("100%")
    assert_compile_error(lone_percent, "wp.printf", r"lone '%'")

    def extra_args(x: gk.array(dtype=float)):
        wp.printf("none\n", 1)
    assert_compile_error(extra_args, "wp.printf", r"has 0 conversions but 1 argument")

    def print_file(x: gk.array(dtype=float)):
        print(x[0], file=None)
    assert_compile_error(print_file, "file=None", r"print\(\): the keyword 'file' is not supported")

    def print_array(x: gk.array(dtype=float)):
        print(x)
    assert_compile_error(print_array, "x)", r"cannot print array1d\(float32\) values")


@pytest.mark.parametrize("what", ["print", "printf"])
def test_print_ir_is_one_instruction_kept_by_the_passes(what):
    @gk.kernel
    def k(x: gk.array(dtype=float)):
        i = gk.tid()
        if what == "print":
            print(x[i])
            print(x[i])
        else:
            wp.printf("%f\n", x[i])
            wp.printf("%f\n", x[i])
    text = k.ir()
    conv = "g" if what == "print" else "f"
    assert text.count(f"native[native={what}('%{conv}\\n'; float32)#") == 2, text
    adjoint = k.ir(adjoint=True)           # after the passes: two identical prints stay two, in the replay
    assert adjoint.count("variant=replay") == 2 and adjoint.count("variant=adjoint") == 2, adjoint


@gk.kernel
def expect_kernel(n: gk.array(dtype=int), want: int):
    wp.expect_eq(n[gk.tid()], want)


def test_warp_check_output_fails_a_test_that_printed(device):
    """tests/dialects/warp_test_utils.py's CheckOutput (Warp's check_output): a kernel's failed expectation
    printed at the C level fails the test; a silent one passes."""
    import unittest

    pytest.importorskip("warp")
    from tests.dialects.warp_test_utils import CheckOutput

    test = unittest.TestCase()
    n = gk.array(np.array([4, 4, 4], dtype=np.int32), device=device)
    with CheckOutput(test):
        gk.launch(expect_kernel, 3, inputs=[n, 4], device=device)
    with pytest.raises(AssertionError, match=r"Unexpected output:\n'Error, expect_eq\(\) failed:\n\t Expected: 5"):
        with CheckOutput(test):
            gk.launch(expect_kernel, 3, inputs=[n, 5], device=device)


def test_taichi_print_format(device, rng, capfd):
    """gradkit.taichi's print: Taichi 1.7's text (floats %f, bools as integers, vectors [a, b] with ', ';
    checked by hand against Taichi 1.7.4 on the cpu), one line per call."""
    import gradkit.taichi as ti

    ti.init(device=device)
    vals = rng.normal(size=4).astype(np.float32)
    x = ti.field(ti.f32, shape=4)
    x.from_numpy(vals)

    @ti.kernel
    def show():
        for i in range(4):
            v = ti.Vector([x[i], 2.0])
            print("x =", x[i], i, v, i > 1, 3, sep=" ", end="\n")

    capfd.readouterr()
    show()
    gk.synchronize(device)
    want = sorted(f"x = {float(vals[i]):f} {i} [{float(vals[i]):f}, 2.000000] {int(i > 1)} 3" for i in range(4))
    assert _lines(capfd) == want


_WARP_PROGRAM = '''
import numpy as np
import {module} as wp


@wp.kernel
def show(x: wp.array(dtype=float), n: int):
    i = wp.tid()
    wp.printf("i=%d x=%f n=%5d %s|\\n", i, x[i], n, "lit")
    wp.expect_eq(i, 1)
    wp.expect_near(x[i], 0.5, 0.1)
    v = wp.vec3(x[i], 1.0, 2.0)
    wp.expect_near(v, wp.vec3(0.0, 1.0, 2.0), 0.01)
    wp.expect_eq(v, wp.vec3(0.5, 1.0, 2.0))
    wp.expect_eq(wp.mat22(x[i], 1.0, 2.0, 3.0), wp.mat22(0.0, 1.0, 2.0, 3.0))
    wp.expect_eq(i > 0, True)
    wp.expect_eq(wp.int64(i), wp.int64(0))
    print(x[i] * 2.0)
    print(i)
    print(v)


def run(values, device):
    x = wp.array(np.asarray(values, dtype=np.float32), device=device)
    wp.launch(show, len(values), inputs=[x, 3], device=device)
    wp.synchronize()
'''


def _load(tmp_path, module: str):
    import importlib.util

    path = tmp_path / f"print_program_{module.replace('.', '_')}.py"
    path.write_text(_WARP_PROGRAM.replace("{module}", module))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_warp_program_prints_what_warp_prints(device, rng, tmp_path, capfd):
    """The same kernel source run by Warp 1.19 (cpu) and by gradkit.warp: the same lines (sorted: thread
    order is not defined; each expectation's message is one print, so its lines stay together in Warp's
    single-threaded cpu runs and in gradkit's)."""
    warp = pytest.importorskip("warp")
    warp.config.quiet = True
    warp.init()                 # its banner, if any, before the capture
    values = np.round(rng.uniform(-1.0, 1.0, size=5), 2).tolist() + [0.5]
    theirs = _load(tmp_path, "warp")
    ours = _load(tmp_path, "gradkit.warp")
    capfd.readouterr()
    theirs.run(values, "cpu")
    want = [line for line in _lines(capfd) if not (line.startswith("Module") and "load on device" in line)]
    ours.run(values, device)
    gk.synchronize(device)
    got = _lines(capfd)
    assert len(want) > 20 and got == want


def test_warp_expectations_from_python_print_what_warp_prints(rng, capfd):
    """wp.expect_eq / expect_near called from Python (Warp exports them) write Warp 1.19's text; printf
    raises Warp's RuntimeError (Warp has no host printf)."""
    warp = pytest.importorskip("warp")
    warp.config.quiet = True
    warp.init()
    a, b = np.round(rng.uniform(-2.0, 2.0, size=(2, 3)), 3).astype(np.float32)

    def calls(w):
        w.expect_eq(1, 2)
        w.expect_eq(3, 3)
        w.expect_eq(w.vec3(*a), w.vec3(*b))
        w.expect_near(float(a[0]), float(b[0]), 0.001)
        w.expect_near(w.vec3(*a), w.vec3(*b), 0.001)
        w.expect_near(w.vec3(*a), w.vec3(*a), 0.001)
    capfd.readouterr()
    calls(warp)
    want = capfd.readouterr().out
    calls(wp)
    assert want.count("Error") == 4 and capfd.readouterr().out == want
    with pytest.raises(RuntimeError, match="Error calling function 'printf', function is undefined"):
        wp.printf("%d\n", 1)
