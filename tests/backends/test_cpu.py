"""The LLVM CPU backend specifically: generated code, vectorisation, math accuracy, the disk cache,
debug bounds checks, and reductions."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gradkit as gk

pytestmark = pytest.mark.skipif("cpu" not in [d.name for d in gk.get_devices()], reason="cpu backend unavailable")


@gk.kernel
def w1(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sin(x[i]) * x[i] + 0.5 * x[i] * x[i]


def _host_float_lanes() -> int:
    """float32 lanes of the widest vector unit the host reports (AVX-512: 16, AVX2: 8, else 4)."""
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features().flatten()
    # LLVM tunes Intel's AVX-512 parts (skylake-avx512 .. rocketlake, sapphirerapids) to prefer 256-bit
    # vectors, AMD's znver4 to 512-bit: expect 16 lanes only where LLVM's own tuning picks them.
    if "+avx512f" in features and llvm.get_host_cpu_name().startswith("znver"):
        return 16
    return 8 if "+avx2" in features else 4


def test_source_is_vectorised_llvm_ir():
    text = w1.source("cpu")
    assert "define" in text
    widths = {int(w) for w in re.findall(r"<(\d+) x float>", text)}
    assert max(widths, default=1) >= _host_float_lanes()          # full-width SIMD on this host
    assert "adj" not in w1.source("cpu") and "define" in w1.source("cpu", adjoint=True)


def _ulp_error(got, ref64):
    ref = ref64.astype(np.float32)
    spacing = np.spacing(np.abs(ref).astype(np.float32))
    return np.abs(got.astype(np.float64) - ref64) / spacing


@pytest.mark.parametrize("name, lo, hi, bound", [
    ("sin", -8192.0, 8192.0, 2.0), ("cos", -8192.0, 8192.0, 2.0), ("exp", -87.0, 88.0, 2.0), ("log", 1e-30, 1e30, 2.0),
])
def test_float32_math_ulp(name, lo, hi, bound):
    """The vectorisable float32 polynomials stay within the stated ULP bound on dense sweeps."""
    fn = getattr(gk, name)

    @gk.kernel
    def k(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = fn(x[i])

    if name == "log":
        x = np.geomspace(lo, hi, 1_000_003).astype(np.float32)
    else:
        x = np.linspace(lo, hi, 1_000_003).astype(np.float32)
    xa, ya = gk.array(x, device="cpu"), gk.zeros(len(x), device="cpu")
    gk.launch(k, len(x), inputs=[xa], outputs=[ya], device="cpu")
    ref = getattr(np, name)(x.astype(np.float64))
    err = _ulp_error(ya.numpy(), ref)
    if name in ("sin", "cos"):
        err = err[np.abs(ref) > 1e-3]   # relative ULPs near the zeros of sin/cos measure the argument's rounding
    assert err.max() <= bound, f"{name}: max {err.max():.2f} ULP"


def test_bounds_checks_in_debug_mode():
    @gk.kernel
    def shifted(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = x[i + 1]

    x, y = gk.zeros(8, device="cpu"), gk.zeros(8, device="cpu")
    gk.config.debug = True
    try:
        with pytest.raises(IndexError, match=r"shifted.*index 8.*axis 0.*'x'.*extent 8.*test_cpu.py:\d+"):
            gk.launch(shifted, 8, inputs=[x], outputs=[y], device="cpu")
    finally:
        gk.config.debug = False


def test_reduction_onto_one_element_is_accurate():
    @gk.kernel
    def total(x: gk.array(dtype=float), s: gk.array(dtype=float)):
        i = gk.tid()
        gk.atomic_add(s, 0, x[i])

    x = np.random.default_rng(0).uniform(0, 1, 1 << 22).astype(np.float32)
    s = gk.zeros(1, device="cpu")
    gk.launch(total, len(x), inputs=[gk.array(x, device="cpu")], outputs=[s], device="cpu")
    assert abs(s.numpy()[0] - x.astype(np.float64).sum()) / x.sum() < 1e-6


SCRIPT = textwrap.dedent("""
    import warnings, numpy as np, gradkit as gk
    from gradkit.runtime.launch.cache import default_cache
    @gk.kernel
    def k(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = 3.0 * x[i]
    x, y = gk.array([1.0, 2.0]), gk.zeros(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gk.launch(k, 2, inputs=[x], outputs=[y], device="cpu")
    print(len(default_cache()), y.numpy().tolist(), any("cache" in str(w.message) for w in caught))
""")


def _run(tmp_path, env_extra=None):
    import os
    env = dict(os.environ, GRADKIT_CACHE_DIR=str(tmp_path / "cache"), **(env_extra or {}))
    script = tmp_path / "cache_script.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, "-W", "ignore::RuntimeWarning", str(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")[-2]


def test_disk_cache_miss_hit_and_corruption(tmp_path):
    first = _run(tmp_path)                                  # miss: compiled and stored
    assert first.startswith("1 [3.0, 6.0]")
    second = _run(tmp_path)                                 # hit: same entry count, same result
    assert second.startswith("1 [3.0, 6.0] False")
    for f in (tmp_path / "cache").rglob("*.gkc"):           # corrupt every entry
        f.write_bytes(f.read_bytes()[:40] + b"garbage")
    third = _run(tmp_path)                                  # rebuilt with a warning, never fatal
    assert third.startswith("1 [3.0, 6.0] True")


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_the_far_reduction_branch_stays_cold_in_optimised_code(name):
    """The exact reduction past |x| = 8192 is a branch weighted 1 : 2^20 (mathlib._sincos): unweighted, LLVM
    laid the vector loop out for both paths and kept the near path's constants on the stack (W1 forward
    3.4 ms instead of 2.6). The weights must survive into the optimised module, in either orientation."""
    fn = getattr(gk, name)

    @gk.kernel
    def k(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = fn(x[i]) * x[i]

    src = k.source("cpu")
    assert re.search(r'"branch_weights", i32 (1, i32 1048576|1048576, i32 1)\b', src), "far branch lost its weights"


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_trig_beyond_the_polynomial_range(name):
    """Past |x| = 8192 the float32 reduction would lose the argument (it gave NaN): an exact reduction in
    double takes over for the vectors (or scalars) that hold such a lane, within 2 ULP of float64 NumPy up
    to the largest float32, whether a vector holds far lanes only, near ones only or both; the loop stays
    SIMD. Under gk.config.fast_math only the fast path remains."""
    fn = getattr(gk, name)

    @gk.kernel
    def k(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = fn(x[i])

    rng = np.random.default_rng(11)
    mag = 10.0 ** rng.uniform(np.log10(8192.0), 38.5, 400_000)
    far = (mag * rng.choice([-1.0, 1.0], mag.size)).astype(np.float32)
    far[:4] = [8192.0, np.nextafter(np.float32(8192.0), np.float32(1e9)), 3.4028235e38, -3.4028235e38]
    near = rng.uniform(-8192.0, 8192.0, far.size).astype(np.float32)
    mixed = np.where(rng.random(far.size) < 0.1, far, near)          # most vectors hold one far lane or two
    runs = np.concatenate([far[:1000], near[:1000]] * 50)             # whole vectors of either kind
    x = np.concatenate([far, mixed, runs, np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0])])
    xa, ya = gk.array(x, device="cpu"), gk.zeros(len(x), device="cpu")
    gk.launch(k, len(x), inputs=[xa], outputs=[ya], device="cpu")
    with np.errstate(invalid="ignore"):
        ref = getattr(np, name)(x.astype(np.float64))
    finite = np.isfinite(x)
    err = _ulp_error(ya.numpy()[finite], ref[finite])[np.abs(ref[finite]) > 1e-3]
    assert err.max() <= 2.0, f"{name}: max {err.max():.2f} ULP"
    assert np.all(np.isnan(ya.numpy()[~finite]))
    assert re.search(r"<\d+ x float>", k.source("cpu"))              # still SIMD


@pytest.mark.parametrize("name", ["sin", "cos", "exp", "log"])
def test_float32_math_called_in_big_kernels(name):
    """A kernel with more float32 polynomial calls than mathlib inlines calls one function per math function
    (scalar or vector variant): the same values as the inlined form, far arguments included."""
    fn = getattr(gk, name)

    @gk.kernel
    def k(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        a = x[i]
        s = fn(a)
        for _ in gk.static(range(17)):   # unrolled: 18 calls (s * 0.0 does not fold), past INLINE_MATH_MAX
            s = fn(s * 0.0 + a)
        y[i] = s

    rng = np.random.default_rng(5)
    x = rng.uniform(0.01, 80.0, 50_000).astype(np.float32)
    if name in ("sin", "cos"):
        x[::7] = (10.0 ** rng.uniform(4, 30, x[::7].size)).astype(np.float32)
    xa, ya = gk.array(x, device="cpu"), gk.zeros(len(x), device="cpu")
    gk.launch(k, len(x), inputs=[xa], outputs=[ya], device="cpu")
    ref = getattr(np, name)(x.astype(np.float64))
    keep = np.abs(ref) > 1e-3
    assert _ulp_error(ya.numpy()[keep], ref[keep]).max() <= 2.0
    assert "_called" in k.source("cpu")


def test_float32_math_functions_together():
    """sin, cos, exp and log in one kernel share the intrinsics their definitions declare (once each in the
    module), and sin/cos of one argument share its reduction: values as float64 NumPy's, far arguments too."""
    @gk.kernel
    def k(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        v = x[i]
        y[i] = gk.sin(v) * gk.cos(v) + gk.exp(gk.sin(v)) * gk.log(gk.abs(v) + 1.0)

    rng = np.random.default_rng(3)
    x = rng.uniform(-50, 50, 20_000).astype(np.float32)
    x[::5] = (10.0 ** rng.uniform(4, 30, x[::5].size)).astype(np.float32)
    xa, ya = gk.array(x, device="cpu"), gk.zeros(len(x), device="cpu")
    gk.launch(k, len(x), inputs=[xa], outputs=[ya], device="cpu")
    d = x.astype(np.float64)
    ref = np.sin(d) * np.cos(d) + np.exp(np.sin(d)) * np.log(np.abs(d) + 1.0)
    np.testing.assert_allclose(ya.numpy(), ref, rtol=2e-5, atol=2e-5)
    src = k.source("cpu")
    assert src.count('declare double @"llvm.rint.f64"') + src.count("declare double @llvm.rint.f64") <= 1
