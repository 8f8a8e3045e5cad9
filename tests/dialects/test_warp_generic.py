"""Warp's generic kernels and functions in gradkit.warp (dialects/warp/generic.py, the frontend's param_types):
parameters annotated `typing.Any`, `wp.array(dtype=Any)` or `wp.array[Any]` typed per launch or call, and
`wp.overload`. Each program is written once and run by Warp 1.19 (its cpu device, where installed) and by
gradkit.warp on every device, on random inputs; results are also checked against float64 NumPy references and
gradients against central differences of the same kernel launched in float64. (No `from __future__ import
annotations`: Warp 1.19 cannot evaluate a @wp.func's string annotations naming a local `wp`.)"""

import threading
from typing import Any

import numpy as np
import pytest

import gradkit as gk
import gradkit.warp as gwp
from gradkit.core.errors import CompileError

N = 7
_PROGRAMS: dict = {}


def _warp():
    warp = pytest.importorskip("warp")
    warp.config.quiet = True
    return warp


def _program(wp):
    """The generic kernels and functions, defined once per module (Warp's or gradkit.warp)."""
    if wp.__name__ in _PROGRAMS:
        return _PROGRAMS[wp.__name__]

    @wp.kernel
    def scale_add(a: wp.array(dtype=Any), s: Any, out: wp.array[Any]):
        i = wp.tid()
        out[i] = a[i] * s + a[i]

    @wp.func
    def twice(x: Any):
        return x + x

    @wp.func
    def first(a: wp.array(dtype=Any), k: int):
        return a[k]

    @wp.kernel
    def mixed(a: wp.array(dtype=float), b: wp.array(dtype=wp.float64), v: wp.array(dtype=wp.vec3),
              n: wp.array(dtype=int), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = (twice(a[i]) + float(twice(b[i])) + wp.length(twice(v[i])) + float(twice(n[i])) + twice(1.5)
                  + float(first(b, 0)) + first(a, i))

    @wp.kernel
    def smooth(x: wp.array(dtype=Any), s: Any, y: wp.array(dtype=Any)):
        i = wp.tid()
        y[i] = wp.sin(x[i]) * x[i] * s + twice(x[i])

    @wp.kernel
    def norms(x: wp.array(dtype=Any), s: Any, y: wp.array(dtype=Any)):
        i = wp.tid()
        y[i] = wp.length(x[i]) * s + wp.dot(twice(x[i]), x[i])

    @wp.kernel
    def grid2(a: wp.array2d(dtype=Any), out: wp.array2d(dtype=Any)):
        i, j = wp.tid()
        out[i, j] = twice(a[i, j])

    _PROGRAMS[wp.__name__] = progs = dict(scale_add=scale_add, mixed=mixed, smooth=smooth, norms=norms,
                                          grid2=grid2, twice=twice)
    return progs


# (dtype name, the scalar s as each module writes it, the float64 NumPy value of s)
CASES = {
    "float32": (lambda wp: wp.float32, lambda wp: 2.5, 2.5),
    "float64": (lambda wp: wp.float64, lambda wp: wp.float64(-1.25), -1.25),
    "int32": (lambda wp: wp.int32, lambda wp: 3, 3.0),
    "vec3": (lambda wp: wp.vec3, lambda wp: 0.75, 0.75),
    "vec3d": (lambda wp: wp.vec3d, lambda wp: wp.float64(1.5), 1.5),
}


def _data(rng, name):
    if name == "int32":
        return rng.integers(-20, 20, N).astype(np.int32)
    shape = (N, 3) if name.startswith("vec") else (N,)
    return rng.standard_normal(shape).astype(np.float64 if name.endswith(("64", "3d")) else np.float32)


def _scale_add(wp, name, data, device):
    dtype, s = CASES[name][0](wp), CASES[name][1](wp)
    a = wp.array(data, dtype=dtype, device=device)
    out = wp.zeros(N, dtype=dtype, device=device)
    wp.launch(_program(wp)["scale_add"], N, inputs=[a, s], outputs=[out], device=device)
    return out.numpy()


@pytest.mark.parametrize("name", list(CASES))
def test_generic_kernel_over_dtypes(device, rng, name):
    """One generic kernel over float32, float64, int32, vec3 and vec3d arrays with a scalar Any parameter
    (a Python float is float32, an int int32, wp.float64(x) float64, as Warp infers them)."""
    data = _data(rng, name)
    got = _scale_add(gwp, name, data, device)
    ref = data.astype(np.float64) * CASES[name][2] + data.astype(np.float64)
    assert got.dtype == data.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-6 if data.dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(got, _scale_add(_warp(), name, data, "cpu"), rtol=1e-6, atol=1e-6)


def test_one_specialisation_per_signature(device, rng):
    """Launches with the same argument types reuse one specialised kernel; each new signature adds one, and
    a Python float and a float32 NumPy scalar give the same signature."""
    k = gwp.kernel(_program(gwp)["scale_add"].pyfunc)
    a = gwp.array(_data(rng, "float32"), dtype=gwp.float32, device=device)
    out = gwp.zeros_like(a)
    for s in (1.0, 2.0, np.float32(3.0)):
        gwp.launch(k, N, inputs=[a, s], outputs=[out], device=device)
    assert len(k.overloads) == 1
    spec = next(iter(k.overloads.values()))
    assert spec.typed_ir is spec.typed_ir and not spec.is_generic
    np.testing.assert_allclose(out.numpy(), a.numpy() * 4.0, rtol=1e-6)
    b = gwp.array(_data(rng, "float64"), dtype=gwp.float64, device=device)
    gwp.launch(k, N, inputs=[b, gwp.float64(2.0)], outputs=[gwp.zeros_like(b)], device=device)
    assert len(k.overloads) == 2


def test_specialisation_is_thread_safe(device, rng):
    """Eight threads launching a new signature at once get one specialised kernel, and right results."""
    k = gwp.kernel(_program(gwp)["scale_add"].pyfunc)
    data = _data(rng, "float64")
    outs, errors, barrier = [], [], threading.Barrier(8)

    def run(s):
        try:
            a = gwp.array(data, dtype=gwp.float64, device=device)
            out = gwp.zeros_like(a)
            barrier.wait()
            gwp.launch(k, N, inputs=[a, gwp.float64(s)], outputs=[out], device=device)
            outs.append((s, out.numpy()))
        except Exception as exc:        # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(float(s),)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(k.overloads) == 1
    for s, out in outs:
        np.testing.assert_allclose(out, data * s + data, rtol=1e-12)


def _mixed(wp, data, device):
    a, b, v, n = data
    args = [wp.array(a, dtype=float, device=device), wp.array(b, dtype=wp.float64, device=device),
            wp.array(v, dtype=wp.vec3, device=device), wp.array(n, dtype=int, device=device)]
    out = wp.zeros(N, dtype=float, device=device)
    wp.launch(_program(wp)["mixed"], N, inputs=args, outputs=[out], device=device)
    return out.numpy()


def test_generic_func_called_with_several_types(device, rng):
    """One generic @wp.func called with float32, float64, vec3, int32 and a literal (float32, as Warp types
    it) from one kernel, and a generic array parameter given a float64 and a float32 array: one variant per
    call signature, kept across launches (4 for `twice`: the literal shares float32's)."""
    data = (_data(rng, "float32"), _data(rng, "float64"), _data(rng, "vec3"), _data(rng, "int32"))
    got = _mixed(gwp, data, device)
    a, b, v, n = (x.astype(np.float64) for x in data)
    ref = 2 * a + 2 * b + 2 * np.linalg.norm(v, axis=1) + 2 * n + 3.0 + b[0] + a
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-5)
    np.testing.assert_allclose(got, _mixed(_warp(), data, "cpu"), rtol=2e-6, atol=2e-5)
    twice = _program(gwp)["twice"]      # float32 (the literal 1.5 too), float64, vec3, int32
    types = {dict(pt)["x"] for _, _, pt in twice._view_variants}
    assert types == {gwp.float32, gwp.float64, gwp.vec3, gwp.int32}
    _mixed(gwp, data, device)
    assert len(twice._view_variants) == 4


def test_generic_2d_arrays(device, rng):
    """`wp.array2d(dtype=Any)` takes 2-D arrays of any dtype."""
    for dtype, npt in ((gwp.float32, np.float32), (gwp.float64, np.float64)):
        x = rng.standard_normal((3, 4)).astype(npt)
        a = gwp.array(x, dtype=dtype, device=device)
        out = gwp.zeros_like(a)
        gwp.launch(_program(gwp)["grid2"], (3, 4), inputs=[a], outputs=[out], device=device)
        np.testing.assert_allclose(out.numpy(), 2 * x.astype(np.float64), rtol=1e-6)


@gwp.kernel
def _decorated(a: gwp.array(dtype=Any), s: Any, out: gwp.array(dtype=Any)):
    i = gwp.tid()
    out[i] = a[i] * s


_generic_decorated = _decorated


@gwp.overload
def _decorated(a: gwp.array(dtype=gwp.float64), s: gwp.float64, out: gwp.array(dtype=gwp.float64)):  # noqa: F811
    ...


def test_overload_forms(device, rng):
    """wp.overload(kernel, [types]) and (kernel, {name: type}) return the specialisation, and a launch of
    the generic kernel with those types runs it (no second one); the decorator form registers it too."""
    wp, gk_k = gwp, gwp.kernel(_program(gwp)["scale_add"].pyfunc)
    by_list = wp.overload(gk_k, [wp.array(dtype=wp.vec3d), wp.float64, wp.array[wp.vec3d]])
    by_dict = wp.overload(gk_k, {"a": wp.array(dtype=wp.vec3d), "s": wp.float64, "out": wp.array(dtype=wp.vec3d)})
    assert by_list is by_dict and isinstance(by_list, wp.Kernel) and len(gk_k.overloads) == 1
    data = _data(rng, "vec3d")
    a = wp.array(data, dtype=wp.vec3d, device=device)
    out = wp.zeros_like(a)
    wp.launch(by_list, N, inputs=[a, wp.float64(2.0)], outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), 3 * data, rtol=1e-12)
    wp.launch(gk_k, N, inputs=[a, wp.float64(-1.0)], outputs=[out], device=device)
    assert len(gk_k.overloads) == 1
    np.testing.assert_allclose(out.numpy(), np.zeros_like(data), atol=1e-12)
    # the decorator: the name is rebound to the specialisation, registered in the generic kernel
    assert list(_generic_decorated.overloads.values()) == [_decorated]
    x = rng.standard_normal(N)
    b = wp.array(x, dtype=wp.float64, device=device)
    out = wp.zeros_like(b)
    wp.launch(_decorated, N, inputs=[b, wp.float64(0.5)], outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), 0.5 * x, rtol=1e-12)
    # Warp's own forms give a kernel of the same kind
    warp = _warp()
    w = _program(warp)["scale_add"]
    assert isinstance(warp.overload(w, [warp.array(dtype=warp.vec3d), warp.float64, warp.array[warp.vec3d]]),
                      warp.Kernel)


def _taped(wp, kernel, x, s, dtype, device):
    """x.grad of sum(y) for y = kernel(x, s), taped."""
    xa = wp.array(x, dtype=dtype, device=device, requires_grad=True)
    y = wp.zeros(N, dtype=wp.float64 if x.dtype == np.float64 else float, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, N, inputs=[xa, s], outputs=[y], device=device)
    tape.backward(grads={y: wp.ones(N, dtype=y.dtype, device=device)})
    return y.numpy().astype(np.float64), xa.grad.numpy().astype(np.float64)


def _central(kernel, x, s, dtype, device, h=1e-6):
    """Central differences of sum(y) by x, each component, launching the float64 kernel."""
    def total(v):
        xa = gwp.array(v, dtype=dtype, device=device)
        y = gwp.zeros(N, dtype=gwp.float64, device=device)
        gwp.launch(kernel, N, inputs=[xa, s], outputs=[y], device=device)
        return y.numpy().sum()
    g = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[j] = h
        g[j] = (total(x + e) - total(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("name", ["float64", "vec3d", "float32", "vec3"])
def test_backward_through_a_generic_kernel(device, rng, name):
    """The tape's backward of a generic kernel's specialisation: float64 against central differences of the
    kernel itself (float64), and each dtype against Warp 1.19's tape on the same inputs."""
    kname = "norms" if name.startswith("vec") else "smooth"
    dtype = getattr(gwp, name)
    x = _data(rng, name)
    wide = x.dtype == np.float64
    s_gk, s_wp = (gwp.float64(0.7), lambda wp: wp.float64(0.7)) if wide else (0.7, lambda wp: 0.7)
    y, g = _taped(gwp, _program(gwp)[kname], x, s_gk, dtype, device)
    if wide:
        ref = _central(_program(gwp)[kname], x, s_gk, dtype, device)
        np.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-7)
    warp = _warp()
    wy, wg = _taped(warp, _program(warp)[kname], x, s_wp(warp), getattr(warp, name), "cpu")
    tol = 1e-10 if wide else 2e-5
    np.testing.assert_allclose(y, wy, rtol=tol, atol=tol)
    np.testing.assert_allclose(g, wg, rtol=tol, atol=tol)


def test_forward_mode_through_a_generic_kernel(device, rng):
    """gk.ForwardMode around wp.launch of a generic kernel runs the specialisation's tangent kernel: J.v
    against central differences along v (float64)."""
    x, v = rng.standard_normal(N), rng.standard_normal(N)
    k = _program(gwp)["smooth"]
    xa = gwp.array(x, dtype=gwp.float64, device=device)
    y = gwp.zeros(N, dtype=gwp.float64, device=device)
    with gk.ForwardMode(seeds={xa: gwp.array(v, dtype=gwp.float64, device=device)}):
        gwp.launch(k, N, inputs=[xa, gwp.float64(1.3)], outputs=[y], device=device)
    got = y.dual.numpy()

    def f(z):
        return np.sin(z) * z * 1.3 + 2 * z
    h = 1e-6
    np.testing.assert_allclose(got, (f(x + h * v) - f(x - h * v)) / (2 * h), rtol=1e-6, atol=1e-8)


def test_errors(device):
    """Arguments no specialisation takes, and overloads Warp refuses, are named errors naming the parameter."""
    wp = gwp
    k = wp.kernel(_program(gwp)["scale_add"].pyfunc)
    a = wp.zeros(N, dtype=float, device=device)
    with pytest.raises(TypeError, match=r"parameter 's' \(typing\.Any\) cannot take an argument of type str"):
        wp.launch(k, N, inputs=[a, "x"], outputs=[a], device=device)
    with pytest.raises(TypeError, match=r"parameter 'a' \(array\(dtype=Any\)\) cannot take an argument of type "
                                        r"array2d\(float32\)"):
        wp.launch(k, N, inputs=[wp.zeros((2, 2), dtype=float, device=device), 1.0], outputs=[a], device=device)
    with pytest.raises(TypeError, match=r"parameter 'out' .* of type NoneType"):
        wp.launch(k, N, inputs=[a, 1.0], outputs=[None], device=device)
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        wp.launch(k, N, inputs=[a, 1.0], device=device)
    with pytest.raises(RuntimeError, match="Invalid number of arguments"):
        wp.overload(k, [wp.array(dtype=float)])
    with pytest.raises(RuntimeError, match="Invalid argument name 'b'"):
        wp.overload(k, {"b": float})
    with pytest.raises(TypeError, match="argument 's' cannot be generic"):
        wp.overload(k, {"a": wp.array(dtype=float), "out": wp.array(dtype=float)})
    with pytest.raises(TypeError, match="argument 'a' type mismatch"):
        wp.overload(k, [float, float, wp.array(dtype=float)])
    with pytest.raises(RuntimeError, match="Only generic kernels"):
        wp.overload(_program(gwp)["mixed"], [])
    with pytest.raises(CompileError, match="kernel 'scale_add' is generic"):
        gk.launch(k, N, inputs=[a, 1.0], outputs=[a], device=device)

    twice = _program(gwp)["twice"]

    @wp.kernel
    def wrong(a: wp.array(dtype=float)):
        i = wp.tid()
        a[i] = twice(a, i)

    with pytest.raises(CompileError, match=r"twice\(\) takes 1 argument"):
        wp.launch(wrong, N, inputs=[a], device=device)

    @wp.func
    def head(x: wp.array(dtype=Any)):
        return x[0]

    @wp.kernel
    def scalar_to_array(a: wp.array(dtype=float)):
        i = wp.tid()
        a[i] = head(a[i])

    with pytest.raises(CompileError, match=r"head\(\): parameter 'x' \(array\(dtype=Any\)\) cannot take a "
                                           r"float32 value"):
        wp.launch(scalar_to_array, N, inputs=[a], device=device)

    @gk.kernel
    def plain(a: gk.array(dtype=float), s: Any):
        pass

    with pytest.raises(CompileError, match="parameter 's' is generic"):
        gk.launch(plain, N, inputs=[a, 1.0], device=device)


def _structs(wp, x, device):
    @wp.struct
    class Params:
        a: float
        v: wp.vec3

    @wp.kernel
    def k(p: Any, m: Any, v: Any, x: wp.array(dtype=Any), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = p.a * wp.dot(p.v, x[i]) + wp.dot(m * v, x[i])

    p = Params()
    p.a, p.v = 1.5, wp.vec3(0.5, -1.0, 2.0)
    m = wp.mat33(1.0, 0.5, 0.0, 0.0, 2.0, -1.0, 0.25, 0.0, 3.0)
    xa = wp.array(x, dtype=wp.vec3, device=device)
    out = wp.zeros(N, dtype=float, device=device)
    wp.launch(k, N, inputs=[p, m, wp.vec3(1.0, -2.0, 0.5), xa], outputs=[out], device=device)
    return out.numpy().astype(np.float64)


def test_struct_vector_and_matrix_arguments(device, rng):
    """Any parameters given a struct instance, a mat33 and a vec3 (gradkit's host vectors and matrices are
    NumPy arrays: typed by their shape and dtype) specialise to those types."""
    x = _data(rng, "vec3")
    got = _structs(gwp, x, device)
    m = np.array([[1.0, 0.5, 0.0], [0.0, 2.0, -1.0], [0.25, 0.0, 3.0]])
    ref = 1.5 * x.astype(np.float64) @ np.array([0.5, -1.0, 2.0]) + x.astype(np.float64) @ (m @ [1.0, -2.0, 0.5])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _structs(_warp(), x, "cpu"), rtol=1e-6, atol=1e-6)


def _captured_and_adjoint(wp, x, device):
    @wp.kernel
    def cube(x: wp.array(dtype=Any), y: wp.array(dtype=Any)):
        i = wp.tid()
        y[i] = x[i] * x[i] * x[i]

    xa = wp.array(x, dtype=wp.float64, device=device, requires_grad=True)
    y = wp.zeros_like(xa)
    with wp.ScopedCapture(device=device) as capture:
        wp.launch(cube, N, inputs=[xa], outputs=[y], device=device)
    wp.capture_launch(capture.graph)
    xg = wp.zeros_like(xa)
    wp.launch(cube, N, inputs=[xa], outputs=[y], adj_inputs=[xg], adj_outputs=[wp.ones_like(y)], adjoint=True,
              device=device)
    return y.numpy(), xg.numpy()


def test_capture_and_adjoint_launch(device, rng):
    """A generic kernel launched inside wp.ScopedCapture (replayed by capture_launch) and with adjoint=True
    (adj_inputs / adj_outputs): the specialisation for its arguments runs, as in Warp 1.19; wp.Kernel(func=)
    of a generic function is generic, with nothing lowered."""
    x = rng.standard_normal(N)
    y, g = _captured_and_adjoint(gwp, x, device)
    np.testing.assert_allclose(y, x ** 3, rtol=1e-12)
    np.testing.assert_allclose(g, 3 * x ** 2, rtol=1e-12)
    wy, wg = _captured_and_adjoint(_warp(), x, "cpu")
    np.testing.assert_allclose(y, wy, rtol=1e-12)
    np.testing.assert_allclose(g, wg, rtol=1e-12)
    k = gwp.Kernel(func=_program(gwp)["smooth"].pyfunc)
    assert isinstance(k, gwp.Kernel) and k.is_generic and not k.overloads


def _row_sums(wp, x, dtype, device):
    @wp.func
    def row_sum(r: wp.array(dtype=Any), n: int):
        s = r[0]
        for j in range(1, n):
            s += r[j]
        return s

    @wp.kernel
    def sums(a: wp.array2d(dtype=Any), out: wp.array(dtype=Any)):
        i = wp.tid()
        out[i] = row_sum(a[i], a.shape[1])

    a = wp.array(x, dtype=dtype, device=device)
    out = wp.zeros(x.shape[0], dtype=dtype, device=device)
    wp.launch(sums, x.shape[0], inputs=[a], outputs=[out], device=device)
    return out.numpy()


@pytest.mark.parametrize("name", ["float32", "float64", "int32"])
def test_generic_func_takes_a_sub_array_view(device, rng, name):
    """A row `a[i]` of a 2-D array passed to a generic array parameter of a @wp.func: the view variant and the
    generic specialisation together (the parameter is the view's 1-D type)."""
    x = (rng.integers(-9, 9, (4, 5)) if name == "int32" else rng.standard_normal((4, 5))).astype(
        {"float32": np.float32, "float64": np.float64, "int32": np.int32}[name])
    got = _row_sums(gwp, x, getattr(gwp, name), device)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(got, _row_sums(_warp(), x, getattr(_warp(), name), "cpu"), rtol=1e-6, atol=1e-6)
