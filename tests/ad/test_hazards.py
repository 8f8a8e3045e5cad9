"""Hazards on a tape (issue 36): a write overwritten before anything read it, and a parameter that reaches
the loss only through int(), a comparison or stop_gradient — named with their lines by `tape.hazards()`, as
GradientHazardWarning under Tape(check=True) / gk.config.check_ad, and never for the harmless patterns
(a buffer cleared then written, accumulation, a partial overwrite, a read in between)."""

import pathlib
import warnings

import numpy as np
import pytest

import gradkit as gk

F = gk.array(dtype=gk.float64)
LINES = pathlib.Path(__file__).read_text().splitlines()


def line_of(text: str) -> str:
    return f"{__file__}:{1 + next(n for n, t in enumerate(LINES) if text in t)}"


@gk.kernel
def wind(w: F, f: F):
    i = gk.tid()
    f[i] = w[0] * gk.float64(0.5)                       # wind store


@gk.kernel
def gravity(m: F, f: F):
    i = gk.tid()
    f[i] = gk.float64(-9.8) * m[i]                      # gravity store


@gk.kernel
def add_gravity(m: F, f: F):
    i = gk.tid()
    f[i] += gk.float64(-9.8) * m[i]


@gk.kernel
def even_gravity(m: F, f: F):
    i = gk.tid()
    if i % 2 == 0:
        f[i] = gk.float64(-9.8) * m[i]


@gk.kernel
def integrate(x: F, f: F, xo: F):
    i = gk.tid()
    xo[i] = x[i] + gk.float64(0.01) * f[i]


@gk.kernel
def by_int(x: F, c: F, y: F):
    i = gk.tid()
    y[i] = x[i] * gk.float64(int(c[0]))                 # int use


@gk.kernel
def by_compare(x: F, c: F, y: F):
    i = gk.tid()
    y[i] = x[i]
    if c[0] > gk.float64(0.5):                          # compare use
        y[i] = gk.float64(2.0) * x[i]


@gk.kernel
def total(x: F, l: F):
    gk.atomic_add(l, 0, x[gk.tid()])


def arrays(device, n=4):
    mk = lambda v, label: gk.array(np.asarray(v, dtype=np.float64), dtype=gk.float64, device=device,  # noqa: E731
                                   requires_grad=True, label=label)
    return (mk([1.0], "w"), mk(np.ones(n), "m"), mk(np.ones(n), "x"), mk(np.zeros(n), "f"),
            mk(np.zeros(n), "x1"), mk([0.0], "l"))


def test_a_write_overwritten_before_any_read_is_named_with_both_lines(device):
    w, m, x, f, x1, l = arrays(device)
    tape = gk.Tape(check=True)
    with tape:
        gk.launch(wind, 4, [w], [f], device=device)
        gk.launch(gravity, 4, [m], [f], device=device)
        gk.launch(integrate, 4, [x, f], [x1], device=device)
        gk.launch(total, 4, [x1], [l], device=device)
    with pytest.warns(gk.GradientHazardWarning) as caught:
        tape.backward(loss=l)
    (h,) = tape.hazards()
    assert h.kind == "overwritten before read" and h.array is f and h.inputs == (w,)
    assert h.lines == (line_of("# wind store"), line_of("# gravity store"))
    assert str(h) in {str(c.message) for c in caught}
    assert "'wind'" in str(h) and "'gravity'" in str(h) and "'w' gets no gradient" in str(h)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0])
    np.testing.assert_allclose(m.grad.numpy(), np.full(4, -9.8 * 0.01))


@pytest.mark.parametrize("between", ["read", "accumulate", "partial", "clear"])
def test_harmless_patterns_are_not_named(device, between):
    w, m, x, f, x1, l = arrays(device)
    x2 = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape(check=True)
    with tape:
        if between == "clear":
            f.zero_()                                            # cleared, then written: the usual pattern
            gk.launch(gravity, 4, [m], [f], device=device)
        else:
            gk.launch(wind, 4, [w], [f], device=device)
        if between == "read":
            gk.launch(integrate, 4, [x, f], [x2], device=device)
            gk.launch(gravity, 4, [m], [f], device=device)
        elif between == "accumulate":
            gk.launch(add_gravity, 4, [m], [f], device=device)
        elif between == "partial":
            gk.launch(even_gravity, 4, [m], [f], device=device)
        gk.launch(integrate, 4, [x, f], [x1], device=device)
        gk.launch(total, 4, [x1], [l], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gk.GradientHazardWarning)
        tape.backward(loss=l)
    assert tape.hazards() == []


def test_a_host_copy_overwritten_by_a_launch_is_named(device):
    w, m, x, f, x1, l = arrays(device)
    tape = gk.Tape()
    with tape:
        f.assign(x)                                              # host copy site
        gk.launch(gravity, 4, [m], [f], device=device)
        gk.launch(integrate, 4, [x, f], [x1], device=device)
        gk.launch(total, 4, [x1], [l], device=device)
    (h,) = tape.hazards()
    assert h.kind == "overwritten before read" and h.lines[0] == line_of("# host copy site")
    assert h.inputs == (x,)


@pytest.mark.parametrize(("kernel", "use"), [(by_int, "int()"), (by_compare, "a comparison")])
def test_a_parameter_used_only_without_a_derivative_is_named(device, kernel, use):
    w, m, x, f, x1, l = arrays(device)
    c = gk.array([1.0], dtype=gk.float64, device=device, requires_grad=True, label="c")
    old = gk.config.check_ad
    gk.config.check_ad = True
    try:
        tape = gk.Tape()
        with tape:
            gk.launch(kernel, 4, [x, c], [x1], device=device)
            gk.launch(total, 4, [x1], [l], device=device)
        with pytest.warns(gk.GradientHazardWarning, match=f"'c' reaches the outputs only through {use}"):
            tape.backward(loss=l)
    finally:
        gk.config.check_ad = old
    (h,) = tape.hazards()
    assert h.kind == "not differentiable" and h.array is c
    assert h.lines == (line_of("# int use" if kernel is by_int else "# compare use"),)
    np.testing.assert_array_equal(c.grad.numpy(), [0.0])


def test_a_parameter_also_used_differentiably_is_not_named(device):
    w, m, x, f, x1, l = arrays(device)
    c = gk.array([1.0], dtype=gk.float64, device=device, requires_grad=True, label="c")
    x2 = gk.zeros(4, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(by_compare, 4, [x, c], [x1], device=device)
        gk.launch(wind, 4, [c], [x2], device=device)             # c reaches x2 differentiably
        gk.launch(total, 4, [x1], [l], device=device)
        gk.launch(total, 4, [x2], [l], device=device)
    tape.backward(loss=l)
    assert tape.hazards() == []
    np.testing.assert_allclose(c.grad.numpy(), [2.0])
