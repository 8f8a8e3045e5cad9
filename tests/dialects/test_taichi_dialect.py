"""gradkit.taichi: Taichi programs with only the import line changed, checked against the real Taichi
(float64 to ~1e-12, float32 to float32 tolerance) and against NumPy; the dialect's own rules (Tape clears
every gradient, a local keeps its first type, literals follow default_fp, to_numpy copies) and its errors."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

import gradkit as gk
import gradkit.taichi as ti
from taichi_programs import FEATURES, MASS_SPRING, rel_err, run_program

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _taichi():
    return pytest.importorskip("taichi")


# ------------------------------------------------------------------ layout
def test_real_taichi_is_not_shadowed_from_the_repository_root():
    code = ("import taichi, gradkit.taichi as ti, gradkit.dialects.taichi as d; "
            "print(taichi.__file__); print(ti.__name__, d is ti)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "site-packages" in lines[-2] and str(ROOT / "taichi") not in lines[-2]
    assert lines[-1] == "gradkit.taichi True"
    assert not (ROOT / "taichi").exists() and not (ROOT / "taichi.py").exists()


# ------------------------------------------------------------------ programs against Taichi
@pytest.mark.parametrize("fp, tol", [("ti.f64", 1e-12), ("ti.f32", 2e-4)])
def test_mass_spring_matches_taichi(tmp_path, fp, tol, device):
    _taichi()
    text = MASS_SPRING.replace("FP", fp)
    ours = run_program(text.replace("arch=ti.cpu", f"arch=ti.cpu, device={device!r}"), "gradkit.taichi",
                       tmp_path, "ms")
    got = ours["run"](7)
    again = ours["run"](7)                        # second iteration: Tape cleared every gradient again
    theirs = run_program(text, "taichi", tmp_path, "ms")["run"](7)
    for g, a, t in zip(got, again, theirs):
        assert rel_err(g, t) < tol
        assert rel_err(a, g) < 1e-12
    assert abs(got[0]) > 0 and np.abs(got[2]).max() > 0


def test_features_match_taichi(tmp_path):
    _taichi()
    got = run_program(FEATURES, "gradkit.taichi", tmp_path, "feat")["run"](3)
    theirs = run_program(FEATURES, "taichi", tmp_path, "feat")["run"](3)
    for g, t in zip(got, theirs):
        assert rel_err(g, t) < 1e-12


# ------------------------------------------------------------------ fields and kernels against NumPy
def test_fields_python_scope():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32)
    g = ti.Vector.field(3, ti.f64)
    ti.root.dense(ti.i, 4).dense(ti.j, 2).place(x, g)
    s = ti.field(ti.i32, shape=())
    assert x.shape == (4, 2) and g.shape == (4, 2) and s.shape == ()
    x[1, 1] = 2.5
    s[None] = 7
    assert x[1, 1] == 2.5 and s[None] == 7 and s.to_numpy().shape == ()
    a = x.to_numpy()
    a[1, 1] = 9                                   # a copy, as in Taichi
    assert x[1, 1] == 2.5
    g.from_numpy(np.arange(24.0).reshape(4, 2, 3))
    assert np.array_equal(g[3, 1], [21, 22, 23])
    x.fill(1.5)
    assert np.all(x.to_numpy() == 1.5)
    ti.root.lazy_grad()
    assert x.grad.to_numpy().shape == (4, 2)


def test_kernel_forms():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 6
    x = ti.field(ti.f64, shape=n)
    y = ti.field(ti.f64, shape=(n, 3))
    cnt = ti.field(ti.i32, shape=())

    @ti.kernel
    def fill(base: ti.f64, k: ti.i32) -> ti.f64:
        cnt[None] = 0
        start = k - 1
        for i in range(start, n):                # a top-level local of serial code in a loop bound
            x[i] = base + i
            cnt[None] += 1
        for i, j in ti.ndrange(n, (1, 3)):
            y[i, j] = x[i] * j
        for I in ti.grouped(x):
            if I[0] % 2 == 0:
                continue
            x[I] *= 2
        return x[n - 1] + start

    r = fill(0.5, 2)
    xs = np.array([0, 1.5, 2.5, 3.5, 4.5, 5.5]) * np.array([1, 2, 1, 2, 1, 2])
    assert np.allclose(x.to_numpy(), xs) and cnt[None] == n - 1
    assert np.allclose(y.to_numpy()[:, 1:], np.array([0, 1.5, 2.5, 3.5, 4.5, 5.5])[:, None] * [1, 2])
    assert r == pytest.approx(11.0 + 1)


def test_typing_rules():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    out = ti.field(ti.f64, shape=4)

    @ti.kernel
    def k(v: ti.f64):
        mass = 0.0                  # first assignment: default_fp (float64)
        mass = 4                    # later int: cast to float64 (Taichi), not an int local
        out[0] = mass / 3
        lit = 0.1                   # a float literal follows default_fp: exactly float64 0.1
        out[1] = lit
        m = 0                       # first assignment int: a later float is cast to int (Taichi)
        m = v * 2.7
        out[2] = m
        out[3] = ti.floor(v * 1.5, ti.i32) + ti.cast(2.9, ti.i32)

    k(1.0)
    assert out[0] == 4 / 3 and out[1] == 0.1 and out[2] == 2.0 and out[3] == 3.0


def test_tape_clears_every_gradient_and_kernel_grad():
    taichi = _taichi()
    rng = np.random.default_rng(5)
    xs = rng.uniform(0.5, 1.5, 8)
    results = []
    for t in (ti, taichi):
        t.init(arch=t.cpu, default_fp=t.f64)
        x = t.field(t.f64, shape=8, needs_grad=True)
        other = t.field(t.f64, shape=8, needs_grad=True)
        loss = t.field(t.f64, shape=(), needs_grad=True)

        @t.kernel
        def f():
            for i in x:
                loss[None] += t.sin(x[i]) * x[i] ** 2

        x.from_numpy(xs)
        other.grad.fill(3.0)                    # not touched by the tape: Taichi clears it too
        with t.ad.Tape(loss=loss):
            f()
        first = x.grad.to_numpy()
        with t.ad.Tape(loss=loss):
            f()
        assert np.array_equal(x.grad.to_numpy(), first)
        assert np.all(other.grad.to_numpy() == 0)
        x.grad.fill(0)
        loss.grad[None] = 2.0
        f.grad()
        results.append((first, x.grad.to_numpy(), loss[None]))
    for ours, theirs in zip(*results):
        assert rel_err(ours, theirs) < 1e-12
    assert np.allclose(results[0][0], np.cos(xs) * xs ** 2 + 2 * xs * np.sin(xs), rtol=1e-12)


def test_forward_mode():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=3, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def f():
        for i in x:
            y[None] += ti.exp(x[i]) * (i + 1)

    x.from_numpy(np.array([0.1, 0.2, 0.3]))
    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 1.0]):
        f()
    assert y.dual[None] == pytest.approx(np.exp(0.1) + 3 * np.exp(0.3), rel=1e-12)


def test_random_is_uniform_and_differs_per_thread():
    ti.init(arch=ti.cpu, random_seed=3)
    r = ti.field(ti.f32, shape=4096)

    @ti.kernel
    def draw():
        for i in r:
            r[i] = ti.random() * 0.5 + ti.random(ti.f32) * 0.5

    draw()
    a = r.to_numpy()
    draw()
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.03
    assert len(np.unique(a)) > 4000 and not np.array_equal(a, r.to_numpy())


# ------------------------------------------------------------------ errors
def test_compile_error_points_at_the_taichi_line():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def bad():
        for i in x:
            x[i] = undefined_name + 1  # noqa: F821

    with pytest.raises(gk.CompileError) as info:
        bad()
    line = bad.pyfunc.__code__.co_firstlineno + 3
    assert f"{__file__}:{line}" in str(info.value) and "undefined_name" in str(info.value)


@pytest.mark.parametrize("use", [lambda: ti.GUI("x"), lambda: ti.root.pointer(ti.i, 4), lambda: ti.ui,
                                 lambda: ti.root.dynamic(ti.i, 4), lambda: ti.field(ti.u8, shape=2)])
def test_unsupported_features_name_themselves(use):
    ti.init(arch=ti.cpu)
    with pytest.raises(ti.TaichiUnsupportedError, match="docs/porting/taichi.md"):
        use()


def test_gpu_arch_maps_to_an_opencl_device_or_the_cpu(capsys):
    ti.init(arch=ti.gpu)
    dev = ti.runtime.device()
    assert dev.backend in ("opencl", "cpu")
    if dev.backend == "cpu":
        assert "no OpenCL device" in capsys.readouterr().err
    ti.init(arch=ti.cpu)
    assert ti.runtime.device().name == "cpu"


# ------------------------------------------------------------------ the frontend hooks the dialect uses
def test_numpy_vector_constant_in_a_gk_kernel():
    c = np.array([0.5, 2.0])

    @gk.kernel
    def k(y: gk.array(dtype=gk.vec2)):
        y[gk.tid()] = y[gk.tid()] + c

    y = gk.zeros(3, dtype=gk.vec2)
    gk.launch(k, 3, inputs=[y])
    assert np.array_equal(y.numpy(), np.tile(c, (3, 1)))


def test_int_float_promotion_is_the_dialects_only():
    @gk.kernel
    def k(y: gk.array(dtype=float), n: int):
        y[0] = y[0] / n

    y = gk.ones(1)
    with pytest.raises(gk.CompileError, match="differ"):
        gk.launch(k, 1, inputs=[y, 2])
    importlib.import_module("gradkit.taichi")


BOUND_FROM_LOCAL = '''
import numpy as np
import taichi as ti
ti.init(arch=ti.cpu, default_fp=ti.f64)
a = ti.field(ti.f64, shape=8, needs_grad=True)
b = ti.field(ti.f64, shape=8, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)

@ti.kernel
def half():
    m = a.shape[0] // 2                 # a top-level local computed from a field's shape
    for i in range(m):
        b[i] = a[i] * a[i]

@ti.kernel
def total():
    for i in b:
        loss[None] += b[i]

def run(tape):
    a.from_numpy(np.arange(8.0) + 1.0)
    b.fill(0.0)
    if not tape:                        # Taichi refuses a tape over a kernel mixing serial code and loops
        half()
        return b.to_numpy()
    with ti.ad.Tape(loss=loss):
        half()
        total()
    return b.to_numpy(), a.grad.to_numpy()
'''


def test_a_loop_bound_from_a_top_level_local_matches_taichi(tmp_path):
    """`m = a.shape[0] // 2; for i in range(m)`: the bound is evaluated from the user's statement (the
    translator used to evaluate its rewritten copy, which named a kernel parameter: a NameError)."""
    _taichi()
    ours = run_program(BOUND_FROM_LOCAL, "gradkit.taichi", tmp_path, "bound")["run"]
    want = run_program(BOUND_FROM_LOCAL, "taichi", tmp_path, "bound")["run"](False)
    assert rel_err(ours(False), want) < 1e-12
    values, grad = ours(True)                 # d sum(a[i]^2, i < 4) / da = 2 a on the first half, else 0
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(grad, [2.0, 4.0, 6.0, 8.0, 0, 0, 0, 0])


def test_the_dialect_has_one_copy_under_both_names():
    """Importing a submodule as gradkit.dialects.taichi.<sub> neither loads a second copy of the dialect's
    modules (their state: fields, settings) nor replaces ti.kernel with a module."""
    code = ("import gradkit.dialects.taichi.ad as dad, gradkit.taichi as ti, gradkit.taichi.ad as tad; "
            "import gradkit.dialects.taichi.kernels as dk, gradkit.taichi.kernels as tk; "
            "import gradkit.dialects.warp as dw, gradkit.warp as wp; "
            "print(dad is tad, dk is tk, callable(ti.kernel), dw is wp)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 4


def test_names_not_translated_raise_the_dialects_error_and_stay_attribute_errors():
    ti.init(arch=ti.cpu)
    assert not hasattr(ti, "eig") and getattr(ti.math, "fract", None) is None
    with pytest.raises(ti.TaichiUnsupportedError, match="ti.eig"):
        ti.eig
    x = ti.field(ti.f32, shape=2)

    @ti.kernel
    def uses_eig():
        for i in x:
            w, v = ti.eig(ti.Matrix([[1.0, 2.0], [3.0, 4.0]]))
            x[i] = w[0, 0]

    with pytest.raises(ti.TaichiUnsupportedError) as info:
        uses_eig()
    line = uses_eig.pyfunc.__code__.co_firstlineno + 3
    assert f"{__file__}:{line}" in str(info.value) and "ti.eig" in str(info.value)


CONTAINERS = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)

outs = {"a": ti.field(ti.f64, shape=4, needs_grad=True), "b": ti.field(ti.f64, shape=4, needs_grad=True)}
layers = [ti.field(ti.f64, shape=4, needs_grad=True) for _ in range(2)]
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def run_kernel(s: ti.f64):
    for i in range(4):
        outs["a"][i] = layers[0][i] * s
        outs["b"][i] += ti.sin(layers[1][i]) + outs["a"][i] * layers[0][i]
    for i in range(4):
        loss[None] += outs["b"][i] ** 2
        for f in ti.static(layers):                 # a static loop over fields: unrolled per field
            loss[None] += 0.5 * f[i] ** 3
        for k, f in ti.static(enumerate([outs["a"], layers[1]])):
            loss[None] += (k + 1) * ti.cos(f[i])


def run(seed):
    rng = np.random.default_rng(seed)
    for f in layers:
        f.from_numpy(rng.uniform(-1, 1, 4))
    with ti.ad.Tape(loss=loss):
        run_kernel(0.5)
    return [loss[None], layers[0].grad.to_numpy(), layers[1].grad.to_numpy(), outs["a"].to_numpy()]
'''


def test_fields_in_python_containers_match_taichi(tmp_path):
    _taichi()
    got = run_program(CONTAINERS, "gradkit.taichi", tmp_path, "cont")["run"](1)
    theirs = run_program(CONTAINERS, "taichi", tmp_path, "cont")["run"](1)
    for g, t in zip(got, theirs):
        assert rel_err(g, t) < 1e-12
    assert np.all(got[1] != 0)
