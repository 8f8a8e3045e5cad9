"""gradkit.warp against Warp 1.19 on small programs, each written once and run by both (`wp` is the
module under test): integer and float `%` / `//` on negative operands, structs, constants, Tape with
record_func and adjoint launches, warp.optim Adam / SGD steps; and the names gradkit lacks raising one
named error."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit.warp as gwp
import gradkit.warp.optim
import gradkit.warp.render  # noqa: F401

warp = pytest.importorskip("warp")
warp.config.quiet = True
import warp.optim  # noqa: E402

wp = None       # the module a program is being defined with (see _program)

# ------------------------------------------------------------------ kernels, defined once per module


def _division_kernel(wp):
    @wp.func
    def wrap(i: int, n: int):
        return i % n

    @wp.func
    def quotient(i: int, n: int):
        return i / n

    @wp.kernel
    def k(a: wp.array(dtype=int), b: wp.array(dtype=int), fa: wp.array(dtype=float), fb: wp.array(dtype=float),
          r: wp.array(dtype=int), q: wp.array(dtype=int), w: wp.array(dtype=int), fr: wp.array(dtype=float),
          fq: wp.array(dtype=float), m: wp.array(dtype=float), t: wp.array(dtype=int), tf: wp.array(dtype=int),
          ta: wp.array(dtype=int), tq: wp.array(dtype=float)):
        i = wp.tid()
        t[i] = a[i] / b[i]
        tf[i] = quotient(a[i], b[i])
        x = a[i]
        x /= b[i]
        ta[i] = x
        tq[i] = fa[i] / float(b[i])
        r[i] = a[i] % b[i]
        q[i] = a[i] // b[i]
        w[i] = wrap(a[i], b[i])
        fr[i] = fa[i] % fb[i]
        fq[i] = fa[i] // fb[i]
        m[i] = wp.mod(fa[i], fb[i])
    return k


A = np.array([-7, 7, -7, 7, -6, -1, 0, 13], np.int32)
B = np.array([2, -2, -2, 2, 3, 5, 4, -5], np.int32)


def _run_division(wp, device=None):
    k = _division_kernel(wp)
    fa, fb = A.astype(np.float32) + 0.5, B.astype(np.float32)
    ins = [wp.array(A, dtype=int, device=device), wp.array(B, dtype=int, device=device),
           wp.array(fa, dtype=float, device=device), wp.array(fb, dtype=float, device=device)]
    outs = [wp.zeros(len(A), dtype=int, device=device) for _ in range(3)]
    outs += [wp.zeros(len(A), dtype=float, device=device) for _ in range(3)]
    outs += [wp.zeros(len(A), dtype=int, device=device) for _ in range(3)] + [wp.zeros(len(A), dtype=float,
                                                                                     device=device)]
    wp.launch(k, dim=len(A), inputs=ins, outputs=outs, device=device)
    return [o.numpy() for o in outs]


@pytest.fixture(scope="module")
def warp_division():
    return _run_division(warp)


def test_integer_and_float_division_match_warp(device, warp_division):
    """Warp 1.19: integer `%` and `/` truncate (C), `//` floors; float `%` is fmod, `//` floors; gradkit.warp
    kernels and functions compute the same on every device (`/` on two ints is an int, as in Warp)."""
    got = _run_division(gwp, device)
    for g, w in zip(got, warp_division):
        np.testing.assert_array_equal(g, w)
    assert warp_division[0][0] == -1 and warp_division[1][0] == -4      # -7 % 2, -7 // 2 in Warp
    assert warp_division[6][0] == -3 and warp_division[8][0] == -3      # -7 / 2 in Warp: C's quotient


def _program(module):
    """A struct, a constant, a @wp.func, an atomic loss; a Tape with a record_func step. (Warp reads a
    struct's annotations from the module's globals, hence the global `wp`.)"""
    global wp, Params
    wp = module
    SCALE = wp.constant(3.0)

    @wp.struct
    class Params:  # noqa: F811
        k: float
        offset: wp.vec3

    @wp.func
    def energy(p: Params, x: wp.vec3):
        d = x - p.offset
        return p.k * wp.dot(d, d) + SCALE * wp.sin(x[0])

    @wp.kernel
    def potential(p: Params, x: wp.array(dtype=wp.vec3), e: wp.array(dtype=float)):
        i = wp.tid()
        e[i] = energy(p, x[i])

    @wp.kernel
    def total(e: wp.array(dtype=float), loss: wp.array(dtype=float)):
        wp.atomic_add(loss, 0, wp.where(e[wp.tid()] > 0.0, 0.5 * e[wp.tid()], e[wp.tid()]))

    @wp.kernel
    def double(a: wp.array(dtype=float), b: wp.array(dtype=float)):
        i = wp.tid()
        b[i] = 2.0 * a[i]

    return Params, potential, total, double


def _run_program(wp, device=None):
    Params, potential, total, double = _program(wp)
    p = Params()
    p.k = 0.75
    p.offset = wp.vec3(0.1, -0.2, 0.3)
    rng = np.random.default_rng(3)
    x = wp.array(rng.normal(size=(16, 3)).astype(np.float32), dtype=wp.vec3, device=device, requires_grad=True)
    e = wp.zeros(16, dtype=float, device=device, requires_grad=True)
    e2 = wp.zeros(16, dtype=float, device=device, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(potential, dim=16, inputs=[p, x], outputs=[e], device=device)

        def doubled_backward():      # a host step the tape cannot see: its adjoint by hand, Warp-style
            wp.launch(double, dim=16, inputs=[e], outputs=[e2], adj_inputs=[e.grad], adj_outputs=[e2.grad],
                      adjoint=True, device=device)

        wp.launch(double, dim=16, inputs=[e], outputs=[e2], device=device, record_tape=False)
        tape.record_func(doubled_backward, arrays=[e, e2])
        wp.launch(total, dim=16, inputs=[e2], outputs=[loss], device=device)
    tape.backward(loss=loss)
    out = loss.numpy().copy(), e.numpy().copy(), x.grad.numpy().copy(), e.grad.numpy().copy()
    grads = tape.gradients
    tape.zero()
    assert np.all(x.grad.numpy() == 0)
    tape.reset()
    return out, grads


@pytest.fixture(scope="module")
def warp_program():
    return _run_program(warp)[0]


def test_struct_constant_func_tape_record_func_match_warp(device, warp_program):
    got, grads = _run_program(gwp, device)
    for g, w in zip(got[:3], warp_program[:3]):         # loss, energies, x.grad
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
    assert len(grads) >= 1
    # e's gradient after backward: Warp's store adjoint took it (zero), gradkit.warp's too (test_warp_tape.py)
    np.testing.assert_array_equal(got[3], warp_program[3])
    assert np.all(warp_program[3] == 0)


def _optimise(wp, opt_name, steps=3):
    x0 = np.linspace(-1, 1, 8).astype(np.float32)
    g = (x0 ** 3 - 0.5).astype(np.float32)
    x = wp.array(x0, dtype=float, requires_grad=True)
    grad = wp.array(g, dtype=float)
    if opt_name == "Adam":
        opt = wp.optim.Adam([x], lr=0.1, betas=(0.8, 0.99))
    else:
        opt = wp.optim.SGD([x], lr=0.1, momentum=0.9, nesterov=True)
    for _ in range(steps):
        opt.step([grad])
    return x.numpy()


@pytest.mark.parametrize("opt_name", ["Adam", "SGD"])
def test_optim_steps_match_warp(opt_name):
    np.testing.assert_allclose(_optimise(gwp, opt_name), _optimise(warp, opt_name), rtol=1e-6, atol=1e-7)


def test_names_devices_and_config():
    assert gwp.types.vector(length=3, dtype=gwp.float32) is gwp.vec3 is gwp.vec3f
    assert gwp.types.matrix(shape=(3, 3), dtype=gwp.float64) is gwp.mat33d
    assert isinstance(gwp.zeros(3), gwp.array) and not isinstance(np.zeros(3), gwp.array)
    a = gwp.full(4, 2.5)
    assert a.dtype is gwp.float32 and np.all(a.numpy() == 2.5)
    b = gwp.clone(a)
    gwp.copy(b, gwp.array(np.arange(2, dtype=np.float32)), dest_offset=1, count=2)
    np.testing.assert_array_equal(b.numpy(), [2.5, 0.0, 1.0, 2.5])
    assert gwp.get_device("cpu").is_cpu and gwp.get_device("cpu") == "cpu"
    cuda = gwp.get_device("cuda:0")
    assert cuda.name.startswith("opencl") or cuda.name == "cpu"
    with gwp.ScopedDevice("cpu") as dev:
        assert gwp.zeros(2).device == dev
    gwp.init()
    gwp.synchronize()
    gwp.synchronize_device("cpu")
    before = gwp.config.verify_fp
    gwp.config.verify_fp = True
    try:
        import gradkit as gk
        assert gk.config.check_nan is True
    finally:
        gwp.config.verify_fp = before
    times = {}
    with gwp.ScopedTimer("t", print=False, dict=times):
        pass
    assert len(times["t"]) == 1
    with gwp.ScopedTimer("quiet", False):   # Warp's second positional argument is `active`
        pass


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    a = gwp.array(np.arange(6, dtype=np.float32).reshape(2, 3), dtype=float)
    t = gwp.to_torch(a)
    assert torch.equal(t, torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert np.array_equal(gwp.from_torch(t).numpy(), a.numpy())


@pytest.mark.parametrize("name", ["Volume"])        # (wp.Mesh and wp.Bvh are gradkit's: tests/geometry)
def test_geometry_is_a_named_error(name):
    with pytest.raises(gwp.WarpFeatureMissing, match=f"wp.{name} .*docs/porting/warp.md"):
        getattr(gwp, name)(1, 2, 3)
    assert issubclass(gwp.WarpFeatureMissing, NotImplementedError)


def test_missing_builtin_is_a_named_error_in_kernels():
    with pytest.raises(Exception, match="wp.tile_load is not available"):
        gwp.tile_load(None)

    @gwp.kernel
    def k(a: gwp.array(dtype=float)):
        a[0] = gwp.cbrt(a[0])

    with pytest.raises(Exception, match="wp.cbrt is not available in gradkit"):
        gwp.launch(k, 1, inputs=[gwp.zeros(1)])
    with pytest.raises(AttributeError):
        gwp.not_a_warp_name


def test_render_is_a_headless_no_op(capsys):
    r = gwp.render.UsdRenderer("x.usd")
    r.begin_frame(0.0)
    r.render_points("p", np.zeros((3, 3)), radius=0.1)
    r.end_frame()
    r.save()
    gwp.render.OpenGLRenderer()
    assert capsys.readouterr().err.count("rendering is off") <= 1


def _min_max_program(wp, device):
    @wp.kernel
    def k(a: wp.array(dtype=float), b: wp.array(dtype=float), va: wp.array(dtype=wp.vec3),
          vb: wp.array(dtype=wp.vec3), ia: wp.array(dtype=int), out: wp.array(dtype=float),
          vout: wp.array(dtype=wp.vec3), iout: wp.array(dtype=int)):
        i = wp.tid()
        out[i] = (wp.min(a[i], b[i]) + 2.0 * wp.max(a[i], b[i]) + 3.0 * wp.max(a[i], 0.0) + 5.0 * wp.min(va[i])
                  + 7.0 * wp.clamp(a[i], b[i], 1.0) + 11.0 * wp.clamp(b[i], 0.0, a[i])
                  + 13.0 * wp.smoothstep(va[i][0], vb[i][0], 0.25))   # (at x == e0 == e1 Warp's is NaN)
        vout[i] = wp.min(va[i], vb[i]) + 2.0 * wp.max(va[i], vb[i])
        iout[i] = wp.min(ia[i], 2) + 10 * wp.max(ia[i], -1)

    rng = np.random.default_rng(5)
    n = 64
    a = rng.choice([-1.0, 0.0, 1.0, 2.0, np.nan], n).astype(np.float32)      # many ties and NaNs
    b = rng.choice([-1.0, 0.0, 1.0, np.nan], n).astype(np.float32)
    va = rng.choice([-1.0, 0.0, 1.0], (n, 3)).astype(np.float32)
    vb = rng.choice([-1.0, 0.0, 1.0], (n, 3)).astype(np.float32)
    arrs = [wp.array(x, dtype=d, device=device, requires_grad=True)
            for x, d in ((a, float), (b, float), (va, wp.vec3), (vb, wp.vec3))]
    ia = wp.array(rng.integers(-3, 4, n).astype(np.int32), dtype=int, device=device)
    out = wp.zeros(n, dtype=float, device=device, requires_grad=True)
    vout = wp.zeros(n, dtype=wp.vec3, device=device, requires_grad=True)
    iout = wp.zeros(n, dtype=int, device=device)
    tape = wp.Tape()
    with tape:
        wp.launch(k, n, inputs=[*arrs, ia, out, vout, iout], device=device)
    tape.backward(grads={out: wp.array(np.ones(n, np.float32), dtype=float, device=device),
                         vout: wp.array(np.ones((n, 3), np.float32), dtype=wp.vec3, device=device)})
    return [out.numpy(), vout.numpy(), iout.numpy()] + [x.grad.numpy() for x in arrs]


def test_min_max_clamp_follow_warp_ties_and_nans(device):
    """Warp 1.19's float min / max are C's fmin / fmax (a NaN operand is missing) and a tie routes the
    gradient to the second operand; clamp(x, a, b) is fmin(fmax(a, x), b) (inverted bounds included);
    gradkit's gk.min gives ties to the first operand and propagates NaN. wp.min / wp.max / wp.clamp in
    gradkit.warp follow Warp: values and gradients equal on inputs full of ties and NaNs; so does
    smoothstep, whose edges are often equal here (Warp's gradient is then 0, not NaN)."""
    want = _min_max_program(warp, "cpu")
    got = _min_max_program(gwp, device)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


UNARY = ("abs", "sign", "rint", "asin", "acos", "floor", "ceil", "trunc", "sqrt", "exp", "log", "sin", "tanh")
SPECIAL = np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.5, 3.5, 2.0, 9e6 + 1.0, np.nan], np.float32)


def _unary_program(wp, device, folder):
    names = ", ".join(UNARY)
    src = ("def make(wp):\n"
           "    @wp.kernel\n"
           "    def k(x: wp.array(dtype=float), v: wp.array(dtype=wp.vec3), y: wp.array2d(dtype=float),\n"
           "          w: wp.array2d(dtype=wp.vec3)):\n"
           "        i = wp.tid()\n" +
           "".join(f"        y[{j}, i] = wp.{n}(x[i])\n" +
                   (f"        w[{j}, i] = wp.{n}(v[i])\n" if n in ("abs", "sign") else "")   # Warp's vector forms
                   for j, n in enumerate(UNARY)) +
           "    return k\n")
    path = str(folder / f"unary_{wp.__name__.replace('.', '_')}.py")     # both read a kernel's source file
    with open(path, "w") as f:
        f.write(src)
    import linecache
    linecache.checkcache(path)
    ns: dict = {}
    exec(compile(src, path, "exec"), ns)
    k = ns["make"](wp)
    n = len(SPECIAL)
    x = wp.array(SPECIAL, dtype=float, device=device, requires_grad=True)
    v = wp.array(np.stack([SPECIAL, SPECIAL[::-1], np.roll(SPECIAL, 3)], 1), dtype=wp.vec3, device=device,
                 requires_grad=True)
    y = wp.zeros((len(UNARY), n), dtype=float, device=device, requires_grad=True)
    w = wp.zeros((len(UNARY), n), dtype=wp.vec3, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k, n, inputs=[x, v, y, w], device=device)
    tape.backward(grads={y: wp.array(np.ones((len(UNARY), n), np.float32), dtype=float, device=device),
                         w: wp.array(np.ones((len(UNARY), n, 3), np.float32), dtype=wp.vec3, device=device)})
    return y.numpy(), w.numpy(), x.grad.numpy(), v.grad.numpy()


def test_unary_builtins_match_warp_at_special_points(device, tmp_path):
    """Warp 1.19 at zeros, halves, +-1, past the arcsine's domain and NaN: sign(0) = 1, abs'(0) = 1, rint
    rounds halves to even, asin / acos clamp their argument (gradient 0 from |x| >= 1 on); gradkit.warp's
    values and gradients equal Warp's on every device (the other names agree as gradkit's own)."""
    want = _unary_program(warp, "cpu", tmp_path)
    got = _unary_program(gwp, device, tmp_path)
    for name, g, w in zip(("values", "vector values", "gradient", "vector gradient"), got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True, err_msg=name)


def _linalg_program(wp, device):
    @wp.kernel
    def k(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3), q: wp.array(dtype=wp.quat),
          m: wp.array(dtype=wp.mat33), out: wp.array(dtype=float)):
        i = wp.tid()
        qq = wp.normalize(q[i])
        r = wp.quat_rotate(qq, a[i]) + wp.quat_rotate_inv(qq, b[i])
        qa = wp.quat_from_axis_angle(wp.normalize(a[i]), b[i][0])
        s = wp.dot(r, wp.cross(a[i], b[i])) + wp.length(qa * qq) + wp.determinant(m[i]) + wp.trace(wp.inverse(m[i]))
        s += wp.dot(wp.mul(wp.quat_to_matrix(qq), a[i]), b[i]) + wp.length(wp.quat_inverse(qq) * q[i])
        s += wp.dot(wp.mul(wp.transpose(m[i]), a[i]), b[i])
        s += wp.dot(m[i] * a[i], b[i]) + wp.dot(a[i] * m[i], b[i]) + wp.trace(m[i] * wp.transpose(m[i]) * 0.5)
        wp.atomic_add(out, 0, s)

    rng = np.random.default_rng(0)
    n = 16
    arrs = [wp.array(rng.normal(size=(n, 3)).astype(np.float32), dtype=wp.vec3, device=device, requires_grad=True),
            wp.array(rng.normal(size=(n, 3)).astype(np.float32), dtype=wp.vec3, device=device, requires_grad=True),
            wp.array(rng.normal(size=(n, 4)).astype(np.float32), dtype=wp.quat, device=device, requires_grad=True),
            wp.array((rng.normal(size=(n, 3, 3)) + 3 * np.eye(3)).astype(np.float32), dtype=wp.mat33, device=device,
                     requires_grad=True)]
    out = wp.zeros(1, dtype=float, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k, n, inputs=[*arrs, out], device=device)
    tape.backward(loss=out)
    return [out.numpy()] + [a.grad.numpy() for a in arrs]


def test_vector_matrix_quaternion_builtins_match_warp(device):
    """Quaternion rotations and products, axis-angle, quat_to_matrix, cross, determinant, inverse, trace,
    transpose, wp.mul and `*` with a matrix (Warp's matrix product, `@` in gradkit): the loss and every input's gradient equal Warp's to float32 tolerance."""
    for g, w in zip(_linalg_program(gwp, device), _linalg_program(warp, "cpu")):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * np.abs(w).max())


def _python_builtins_program(wp, device):
    """Python's min / max / abs written bare in a kernel and a func: Warp's builtins in a Warp kernel."""
    @wp.func
    def smallest(a: float, b: float):
        return min(a, b)

    @wp.kernel
    def k(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = smallest(a[i], b[i]) + 2.0 * max(a[i], b[i]) + 3.0 * abs(a[i] - b[i]) + 5.0 * min(b[i], 0.0)

    rng = np.random.default_rng(5)
    a = np.concatenate([[1.0, np.nan, 2.0, 0.5, -0.0, 0.0], rng.normal(size=10)]).astype(np.float32)
    b = np.concatenate([[1.0, 3.0, np.nan, 0.5, 0.0, -0.0], rng.normal(size=10)]).astype(np.float32)
    ins = [wp.array(v, dtype=float, device=device, requires_grad=True) for v in (a, b)]
    out = wp.zeros(len(a), dtype=float, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k, len(a), inputs=[*ins, out], device=device)
    tape.backward(grads={out: wp.array(np.ones(len(a), np.float32), dtype=float, device=device)})
    return out.numpy(), ins[0].grad.numpy(), ins[1].grad.numpy()


def test_python_min_max_abs_in_kernels_are_warps(device):
    """Bare min / max / abs follow Warp's NaN rule (the other operand) and route tie and zero gradients as
    Warp does, in @wp.kernel and @wp.func (gradkit's own kernels keep gk.min's rules)."""
    want = _python_builtins_program(warp, "cpu")
    got = _python_builtins_program(gwp, device)
    for name, g, w in zip(("values", "a.grad", "b.grad"), got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True, err_msg=name)
