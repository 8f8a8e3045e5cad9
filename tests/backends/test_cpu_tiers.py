"""The CPU backend's code tiers (backends/cpu/backend.py, jit.py): a straight-line kernel starts on the quick
tier, a busy one launched over few threads moves to the scalar tier (-O3 without the loop vectoriser) and to
the vectorised one at its first wide launch; every tier computes bit-identical results, the scalar tier's
module is the quick tier's (generated once), and a warm disk cache gives the best tier it holds."""

import json
import os
import subprocess
import sys
import textwrap

import gradkit as gk
import pytest

pytestmark = pytest.mark.skipif("cpu" not in [d.name for d in gk.get_devices()], reason="cpu backend unavailable")

SCRIPT = textwrap.dedent("""
    import json, sys, numpy as np, gradkit as gk
    from gradkit.backends.cpu import backend, codegen, jit

    generated = []
    text = codegen.Codegen.text
    codegen.Codegen.text = lambda self: generated.append(self.name) or text(self)

    @gk.kernel
    def k(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = gk.sin(x[i]) * x[i] + gk.exp(0.25 * x[i]) / (1.0 + x[i] * x[i])

    dev = gk.get_device("cpu")
    rng = np.random.default_rng(int(sys.argv[1]))
    xs = rng.uniform(-3, 3, 256)
    ref = np.sin(xs) * xs + np.exp(0.25 * xs) / (1.0 + xs * xs)
    x, y = gk.array(xs, device="cpu"), gk.zeros(256, dtype=gk.float64, device="cpu")
    tiers, outs = [], []

    def run(n):
        gk.launch(k, n, inputs=[x], outputs=[y], device="cpu")
        compiled = k.specialization(dev).compiled
        tiers.append(compiled.tier)
        outs.append(y.numpy()[:n].copy())

    for _ in range(backend.QUICK_LAUNCHES + 2):     # busy, but never wider than VECTOR_FROM - 1 threads
        run(backend.VECTOR_FROM - 1)
    if sys.argv[2] == "wide":
        run(256)                                    # wide: vectorised code
    first = outs[0]
    print(json.dumps({
        "tiers": tiers,
        "identical": all(np.array_equal(o[:len(first)], first) for o in outs),
        "err": max(float(np.abs(o - ref[:len(o)]).max() / np.abs(ref).max()) for o in outs),
        "generated": generated,
    }))
""")


def _run(tmp_path, seed: int, wide: bool = True, cache: str = "cache") -> dict:
    env = dict(os.environ, GRADKIT_CACHE_DIR=str(tmp_path / cache))
    env.pop("GRADKIT_CPU_QUICK_TIER", None)
    script = tmp_path / "tiers.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), str(seed), "wide" if wide else "narrow"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_tiers_quick_scalar_vectorised_agree_bit_for_bit_and_the_cache_gives_the_best(tmp_path):
    from gradkit.backends.cpu import backend, jit
    cold = _run(tmp_path, 1)
    quick_launches = backend.QUICK_LAUNCHES
    # launches 1..QUICK_LAUNCHES run quick-tier code; the next one finds the kernel busy on narrow launches
    assert cold["tiers"][:quick_launches] == [jit.QUICK] * quick_launches
    assert cold["tiers"][quick_launches:-1] == [jit.SCALAR] * 2
    assert cold["tiers"][-1] == jit.FULL
    assert cold["identical"], "a tier changed the results"
    assert cold["err"] < 1e-14
    # one module for the quick and scalar tiers (renamed), one for the vectorised code (with its streaming loop)
    assert len(cold["generated"]) == 2 and cold["generated"][0].endswith(jit.QUICK)
    # warm: the vectorised object is on disk, and taken from the first launch on
    warm = _run(tmp_path, 2)
    assert set(warm["tiers"]) == {jit.FULL} and warm["identical"] and warm["err"] < 1e-14
    assert warm["generated"] == []


def test_a_warm_cache_holding_the_scalar_tier_starts_there(tmp_path):
    from gradkit.backends.cpu import backend, jit
    cold = _run(tmp_path, 3, wide=False, cache="narrow")
    assert cold["tiers"][-1] == jit.SCALAR and cold["identical"] and cold["err"] < 1e-14
    warm = _run(tmp_path, 4, wide=False, cache="narrow")
    assert warm["tiers"] == [jit.SCALAR] * (backend.QUICK_LAUNCHES + 2) and warm["generated"] == []
    assert warm["identical"] and warm["err"] < 1e-14


LOOPS_SCRIPT = textwrap.dedent("""
    import json, sys, numpy as np, gradkit as gk

    @gk.kernel
    def iterate(x: gk.array(dtype=gk.float64), m: int, y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        v = x[i]
        for k in range(m):
            v = gk.sin(v) * 0.5 + x[i]      # carried, but no sum: the scalar code computes the same bits
        y[i] = v

    @gk.kernel
    def summed(x: gk.array(dtype=gk.float64), m: int, y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        s = float(0.0)
        for k in range(m):
            s += x[i] * float(k)            # a loop sum: vectorised code may reassociate it
        y[i] = s

    dev = gk.get_device("cpu")
    rng = np.random.default_rng(int(sys.argv[1]))
    xs = rng.uniform(-2, 2, 256)
    x, y = gk.array(xs, device="cpu"), gk.zeros(256, dtype=gk.float64, device="cpu")
    v = xs.copy()
    for k in range(7):
        v = np.sin(v) * 0.5 + xs
    out = {}
    for name, kern, ref in (("iterate", iterate, v), ("summed", summed, xs * 21.0)):
        tiers, outs = [kern.specialization(dev).compiled.tier], []
        for n in (8, 8, 256):
            gk.launch(kern, n, inputs=[x, 7], outputs=[y], device="cpu")
            tiers.append(kern.specialization(dev).compiled.tier)
            outs.append(y.numpy()[:n].copy())
        out[name] = {"tiers": tiers, "identical": all(np.array_equal(o[:8], outs[0]) for o in outs),
                     "err": max(float(np.abs(o - ref[:len(o)]).max() / np.abs(ref).max()) for o in outs)}
    print(json.dumps(out))
""")


def test_a_kernel_with_loops_compiles_at_its_first_launch_scalar_when_narrow(tmp_path):
    """A kernel with loops and no loop sum is compiled at its first launch, scalar for a narrow one, and
    vectorised at its first wide one (bit-identical); a loop sum keeps the vectorised code from the start;
    a warm cache gives its best tier before the first launch."""
    from gradkit.backends.cpu import jit
    env = dict(os.environ, GRADKIT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GRADKIT_CPU_QUICK_TIER", None)
    script = tmp_path / "loops.py"
    script.write_text(LOOPS_SCRIPT)
    runs = []
    for seed in (6, 7):
        done = subprocess.run([sys.executable, str(script), str(seed)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    cold, warm = runs
    assert cold["iterate"]["tiers"] == [None, jit.SCALAR, jit.SCALAR, jit.FULL]
    assert cold["summed"]["tiers"] == [jit.FULL] * 4
    assert warm["iterate"]["tiers"] == [jit.FULL] * 4
    for run in runs:
        for name in ("iterate", "summed"):
            assert run[name]["identical"] and run[name]["err"] < 1e-13, (name, run[name])
