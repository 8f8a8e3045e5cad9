"""No silent precision loss in kernels (issue 36 item 4): a float32 value made only of Python float literals,
ints and float() casts (a *weak* float) that meets float64 is a CompileError naming the line and the fix,
unless it is known exactly; `default_fp` (per kernel, per function, or `gk.config`) makes such values float64.
Typed float32 (arrays, parameters, gk.float32(...)) still widens losslessly."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gradkit as gk

F64 = gk.array(dtype=gk.float64)
F32 = gk.array(dtype=gk.float32)
RTOL = 1e-15          # float64 results: a few ulp (float32 would be ~1e-8 off)


@pytest.fixture
def fp64_config():
    gk.config.default_fp = gk.float64
    yield
    gk.config.default_fp = gk.float32


def _raises_at(k, snippet: str, *names: str) -> str:
    """Compiling kernel `k` raises a CompileError at the line holding `snippet`, naming `names` and the
    fix."""
    with pytest.raises(gk.CompileError) as info:
        k.ir()
    text = str(info.value)
    lines, first = inspect.getsourcelines(k.pyfunc)
    row = next(r for r, line in enumerate(lines) if snippet in line)
    assert f"{inspect.getsourcefile(k.pyfunc)}:{first + row}:" in text, text
    src_line, caret_line = text.splitlines()[1:3]
    assert src_line.strip() == lines[row].strip() and caret_line.strip() == "^", text
    assert "gk.float64(" in text and "default_fp=gk.float64" in text and "gk.config.default_fp" in text, text
    for name in names:
        assert name in text, text
    return text


def _arrays(device, n=5, seed=0):
    x = np.random.default_rng(seed).uniform(0.5, 2.0, n)
    return x, gk.array(x, device=device, requires_grad=True), gk.zeros(n, dtype=gk.float64, device=device,
                                                                        requires_grad=True)


# --------------------------------------------------------------------------- the issue's kernel

def _issue_kernel(form: str, **options):
    deco = gk.kernel(**options) if options else gk.kernel
    if form == "float(N)":
        def k(x: F64, y: F64, N: int):
            i = gk.tid()
            c = 0.0
            c = 1.0 / float(N)
            y[i] = c * x[i] * x[i]
    else:
        def k(x: F64, y: F64, N: int):
            i = gk.tid()
            c = 0.0
            c = 1.0 / N
            y[i] = c * x[i] * x[i]
    return deco(k)


@pytest.mark.parametrize("form", ["float(N)", "1.0 / N"])
def test_issue_kernel_is_an_error_naming_the_line_and_the_fix(form):
    text = _raises_at(_issue_kernel(form), "y[i] = c * x[i]", "'c'", "float32",
                      "@gk.kernel(default_fp=gk.float64)")
    assert "line" in text and "1.0 /" in text       # where c was computed


def _check_issue_result(k, device, N=7):
    x_np, x, y = _arrays(device)
    with gk.Tape() as tape:
        gk.launch(k, len(x_np), inputs=[x, y, N], device=device)
    c = 1.0 / N
    np.testing.assert_allclose(y.numpy(), c * x_np * x_np, rtol=RTOL, atol=0)
    tape.backward(grads={y: gk.array(np.ones(len(x_np)), device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * c * x_np, rtol=RTOL, atol=0)


@pytest.mark.parametrize("form", ["float(N)", "1.0 / N"])
def test_kernel_default_fp_gives_the_float64_result_and_gradient(device, form):
    k = _issue_kernel(form, default_fp=gk.float64)
    assert "float32" not in k.ir()
    _check_issue_result(k, device)


def test_config_default_fp_and_recompiling_when_it_changes(device, fp64_config):
    k = _issue_kernel("1.0 / N")
    assert "float32" not in k.ir()
    _check_issue_result(k, device)
    gk.config.default_fp = gk.float32          # the kernel lowers again: the weak float32 is an error again
    _raises_at(k, "y[i] = c * x[i]", "'c'")
    gk.config.default_fp = gk.float64
    _check_issue_result(k, device)
    k32 = _issue_kernel("float(N)", default_fp=gk.float32)     # a kernel's own option wins over gk.config
    _raises_at(k32, "y[i] = c * x[i]", "'c'")


def test_default_fp_settings_are_checked():
    for bad in (gk.int32, "float64", np.float64, float):
        with pytest.raises(TypeError, match="gk.config.default_fp must be gk.float32 or gk.float64"):
            gk.config.default_fp = bad
        with pytest.raises(TypeError, match="default_fp must be gk.float32 or gk.float64"):
            gk.kernel(default_fp=bad)(lambda x: None)
        with pytest.raises(TypeError, match="default_fp must be gk.float32 or gk.float64"):
            gk.func(default_fp=bad)(lambda x: None)
    assert gk.config.default_fp is gk.float32


def test_default_fp_types_literals_float_casts_and_float_locals():
    @gk.kernel(default_fp=gk.float64)
    def k(x: F64, n: int):
        i = gk.tid()
        a = 0.1
        b: float = 2.0
        x[i] = a * float(n) + b / float(i + 1) + gk.sqrt(n) + (1.0 if i < 0.5 else 0.0)
    text = k.ir()
    assert "float32" not in text and "float64 = const 0.1" in text, text


# --------------------------------------------------------------------------- what still widens

def test_typed_float32_widens_but_weak_float32_does_not(device):
    @gk.kernel
    def typed(x32: F32, a: gk.float32, x: F64, y: F64, n: int):
        i = gk.tid()
        c = gk.float32(1.0) / gk.float32(n)        # float32 by the user's choice
        d: gk.float32 = 1.0 / float(n)
        y[i] = (c + d + a + gk.float32(0.1)) * x[i] + x32[i]

    x_np, x, y = _arrays(device)
    x32 = gk.array(np.arange(5, dtype=np.float32) / 3, device=device)
    gk.launch(typed, 5, inputs=[x32, 0.3, x, y, 7], device=device)
    f = np.float32
    s = f(1) / f(7) + f(1) / f(7) + f(0.3) + f(0.1)          # float32 sums, as the kernel computes them
    want = float(s) * x_np + x32.numpy()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-15)

    @gk.kernel
    def weak(x32: F32, a: gk.float32, x: F64, y: F64, n: int):
        i = gk.tid()
        c = 1.0 / float(n)
        y[i] = (c + a) * x[i] + x32[i]       # a and x32 are typed; c + a is too
        y[i] = c * x[i]
    _raises_at(weak, "y[i] = c * x[i]", "'c'")


def test_exactly_known_weak_values_widen_exactly(device):
    """Constants (0.1 too), ints made float, integer arithmetic on them and choices between them are rebuilt
    in float64 from what they are, not widened from float32 (2**24 + 1 is not a float32 number)."""
    big = 2 ** 24 + 1

    @gk.kernel
    def k(x: F64, y: F64, n: int):
        i = gk.tid()
        c = 0.1
        if x[i] > 1.0:
            c = 0.2
        w = 1.0 + float(n + i)
        y[i] = c * x[i] + w + float(n) * 2.0 + gk.float64(float(n)) + (0.3 if i > 1 else 0.7)

    x_np, x, y = _arrays(device)
    gk.launch(k, 5, inputs=[x, y, big], device=device)
    i = np.arange(5)
    want = (np.where(x_np > 1.0, 0.2, 0.1) * x_np + (1.0 + (big + i)) + big * 2.0 + big
            + np.where(i > 1, 0.3, 0.7))
    np.testing.assert_allclose(y.numpy(), want, rtol=RTOL, atol=0)


# --------------------------------------------------------------------------- stores, arguments, loops, ifs

def test_every_way_a_weak_value_meets_float64_is_named():
    @gk.kernel
    def store(y: F64, n: int):
        i = gk.tid()
        h = 0.5 / float(n)
        y[i] = h
    _raises_at(store, "y[i] = h", "'h'")

    @gk.kernel
    def atomic(y: F64, n: int):
        i = gk.tid()
        h = gk.sqrt(float(n))
        y[0] += h
    _raises_at(atomic, "y[0] += h", "'h'")

    @gk.kernel
    def vector(y: gk.array(dtype=gk.vec3d), n: int):
        i = gk.tid()
        y[i] = gk.vec3d(1.0 / float(n), 0.0, 0.0)
    _raises_at(vector, "gk.vec3d(1.0 / float(n)", "1.0 / float(n)")

    @gk.kernel
    def cast(y: F64, n: int):
        i = gk.tid()
        h = 1.0 / float(n)
        y[i] = gk.float64(h)
    _raises_at(cast, "gk.float64(h)", "'h'")

    @gk.kernel
    def annotated(y: F64, n: int):
        i = gk.tid()
        h: gk.float64 = 1.0 / n
        y[i] = h
    _raises_at(annotated, "h: gk.float64 =", "1.0 / n")

    @gk.kernel
    def narrowed(x: F64, y: F64):
        i = gk.tid()
        h = float(x[i])                 # float() is the default float type: float32 here
        y[i] = h * x[i]
    _raises_at(narrowed, "y[i] = h * x[i]", "'h'")


def test_weak_locals_through_loops_and_ifs(device):
    @gk.kernel
    def loop(x: F64, y: F64, n: int):
        i = gk.tid()
        s = 0.0
        for j in range(n):
            s += 1.0 / float(j + 1)
        y[i] = s * x[i]
    _raises_at(loop, "y[i] = s * x[i]", "'s'")

    @gk.kernel
    def branch(x: F64, y: F64, n: int):
        i = gk.tid()
        c = 1.0
        if x[i] > 1.0:
            c = 1.0 / float(n)
        y[i] = c * x[i]
    _raises_at(branch, "y[i] = c * x[i]", "'c'")

    @gk.kernel
    def one_path(x: F64, x32: F32, y: F64, n: int):
        i = gk.tid()
        c = x32[i]                      # typed float32 ...
        if x[i] > 1.0:
            c = 1.0 / float(n)          # ... or a weak one: weak
        y[i] = c * x[i]
    _raises_at(one_path, "y[i] = c * x[i]", "'c'", "1.0 / float(n)")

    @gk.kernel
    def next_trip(x: F64, x32: F32, y: F64, n: int):
        i = gk.tid()
        c = x32[i]
        for j in range(n):
            y[j] = c * x[j]             # typed on the first trip, weak on the next ones
            c = 0.5 / float(j + 1)
    _raises_at(next_trip, "y[j] = c * x[j]", "'c'")

    @gk.kernel
    def inside(x: F64, y: F64, n: int):
        i = gk.tid()
        c = 1.0 / float(n)
        acc = x[i]
        while acc < 10.0:
            acc = acc + c * x[i]
        y[i] = acc
    _raises_at(inside, "acc = acc + c * x[i]", "'c'")

    @gk.kernel
    def carried(x: F64, x32: F32, y: F64, n: int):
        i = gk.tid()
        s = 0.0                 # a literal: it becomes float64 to carry the float64 sum
        found = 0.0             # takes only 0.0 and 1.0: exact
        last = x32[i]           # a typed float32 or 0.25: exact
        for j in range(n):
            s += x[j]
            if x[j] > 1.0:
                found = 1.0
                last = 0.25
        y[i] = s + found * x[i] + last

    x_np, x, y = _arrays(device)
    x32 = gk.array(np.arange(5, dtype=np.float32) / 3, device=device)
    gk.launch(carried, 5, inputs=[x, x32, y, 5], device=device)
    any_big = (x_np > 1.0).any()
    want = x_np.sum() + float(any_big) * x_np + np.where(any_big, 0.25, x32.numpy().astype(np.float64))
    np.testing.assert_allclose(y.numpy(), want, rtol=RTOL)

    for k in (loop, branch):                 # declared float64: the float64 result, gradients included
        k64 = gk.kernel(default_fp=gk.float64)(k.pyfunc)
        x_np, x, y = _arrays(device)
        with gk.Tape() as tape:
            gk.launch(k64, 5, inputs=[x, y, 3], device=device)
        c = (1.0 + 1 / 2 + 1 / 3) if k is loop else np.where(x_np > 1.0, 1 / 3, 1.0)
        np.testing.assert_allclose(y.numpy(), c * x_np, rtol=RTOL, atol=0)
        tape.backward(grads={y: gk.array(np.ones(5), device=device)})
        np.testing.assert_allclose(x.grad.numpy(), c * np.ones(5), rtol=RTOL, atol=0)


# --------------------------------------------------------------------------- @gk.func

@gk.func
def _inverse(n: int):
    return 1.0 / float(n)                   # no annotation: a weak float32 result


@gk.func
def _scaled(v: gk.float64, n: int) -> gk.float64:
    h = 1.0 / float(n)
    return h * v


@gk.func(default_fp=gk.float64)
def _scaled64(v: gk.float64, n: int) -> gk.float64:
    h = 1.0 / float(n)
    return h * v * v


def test_funcs(device):
    @gk.kernel
    def weak_result(x: F64, y: F64, n: int):
        i = gk.tid()
        y[i] = _inverse(n) * x[i]
    _raises_at(weak_result, "y[i] = _inverse(n) * x[i]", "_inverse(n)")

    @gk.kernel
    def inside(x: F64, y: F64, n: int):
        i = gk.tid()
        y[i] = _scaled(x[i], n)
    with pytest.raises(gk.CompileError, match=r"(?s)'h' is float32.*return h \* v.*called from 'inside'"):
        inside.ir()

    @gk.kernel
    def declared(x: F64, y: F64, n: int):
        i = gk.tid()
        y[i] = _scaled64(x[i], n)

    x_np, x, y = _arrays(device)
    with gk.Tape() as tape:
        gk.launch(declared, 5, inputs=[x, y, 7], device=device)
    np.testing.assert_allclose(y.numpy(), x_np * x_np / 7, rtol=RTOL, atol=0)
    tape.backward(grads={y: gk.array(np.ones(5), device=device)})
    np.testing.assert_allclose(x.grad.numpy(), 2 * x_np / 7, rtol=RTOL, atol=0)


def test_funcs_follow_config_default_fp(device, fp64_config):
    @gk.kernel
    def k(x: F64, y: F64, n: int):
        i = gk.tid()
        y[i] = _scaled(x[i], n) + _inverse(n) * x[i]

    x_np, x, y = _arrays(device)
    gk.launch(k, 5, inputs=[x, y, 7], device=device)
    np.testing.assert_allclose(y.numpy(), 2 * x_np / 7, rtol=RTOL, atol=0)


@gk.func
def _half(n: int):
    return float(n) * 0.5                   # float32 or float64, as gk.config.default_fp says


def test_a_kernel_relowers_when_its_callees_change_with_config(device):
    @gk.kernel(default_fp=gk.float64)
    def k(y: F32, n: int):
        i = gk.tid()
        y[i] = _half(n)

    y = gk.zeros(2, device=device)
    gk.launch(k, 2, inputs=[y, 3], device=device)
    assert y.numpy().tolist() == [1.5, 1.5]
    gk.config.default_fp = gk.float64
    try:
        with pytest.raises(gk.CompileError, match="store into array 'y': expected float32, got float64"):
            gk.launch(k, 2, inputs=[y, 3], device=device)
    finally:
        gk.config.default_fp = gk.float32
    gk.launch(k, 2, inputs=[y, 5], device=device)
    assert y.numpy().tolist() == [2.5, 2.5]
