"""The contract's promise, on a plugin frozen at version 1 (tests/backends/frozen_c_v1: the `c` example as a
contract-1 plugin, whose C dialect refuses anything version 1 lacked): kernels using what later versions
added still run on it, lowered by gradkit, with results equal to NumPy's; what cannot be lowered is a
CompileError naming the feature, and the conformance suite reports it as "not declared", never failed.

The plugin is registered only for the tests here (`frozen` fixture), so the device list other tests see
(collected before) never contains it."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends import registry
from gradkit.backends.capabilities import defaults
from gradkit.core.passes.lower_capabilities import NotDeclaredError

HERE = pathlib.Path(__file__).resolve().parent / "frozen_c_v1"
pytest.importorskip("gradkit_c_backend", reason="pip install -e examples/c_backend (the C toolchain probe)")


@pytest.fixture(scope="module")
def frozen():
    sys.path.insert(0, str(HERE))
    try:
        from gradkit_c_v1 import CBackend
    finally:
        sys.path.remove(str(HERE))

    class WithCAS(CBackend):
        """The same plugin declaring compare-and-swap: gradkit's CAS loops stand in for its missing xchg."""

        name = "c_v1_cas"
        v1 = defaults(1)
        capabilities = {"primitives": v1.primitives, "atomics": v1.atomics, "features": v1.features | {"cas"}}

        def devices(self):
            d = super().devices()[0]
            d.name = "c_v1_cas"
            return [d]

    try:
        CBackend().devices()
    except gk.DeviceError as exc:
        pytest.skip(f"no C compiler: {exc}")
    registry.register("c_v1", CBackend)
    registry.register("c_v1_cas", WithCAS)
    yield "c_v1"
    registry.unregister("c_v1")
    registry.unregister("c_v1_cas")


@gk.kernel
def _newer_ops(x: gk.array(dtype=float), a: gk.array(dtype=int), b: gk.array(dtype=int),
               e: gk.array(dtype=float), q: gk.array(dtype=int), r: gk.array(dtype=int), s: gk.array(dtype=int)):
    i = gk.tid()
    e[i] = gk.erf(x[i])
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    s[i] = ((a[i] << 3) ^ (b[i] >> 1)) | (a[i] & ~b[i])


def test_kernels_with_newer_primitives_run_on_a_contract_1_plugin(frozen, rng):
    from math import erf
    n = 300
    x0 = rng.uniform(-4, 4, n).astype(np.float32)
    a0 = rng.integers(-2**31, 2**31 - 1, n).astype(np.int32)
    b0 = rng.integers(-50, 50, n).astype(np.int32)
    b0[b0 == 0] = 3
    outs = [gk.zeros(n, dtype=t, device=frozen) for t in (gk.float32, gk.int32, gk.int32, gk.int32)]
    ins = [gk.array(v, device=frozen) for v in (x0, a0, b0)]
    gk.launch(_newer_ops, n, inputs=ins, outputs=outs, device=frozen)
    e, q, r, s = (o.numpy() for o in outs)
    np.testing.assert_allclose(e, [erf(float(v)) for v in x0], rtol=3e-7, atol=1e-7)
    np.testing.assert_array_equal(q, a0 // b0)              # Python's floored // and %
    np.testing.assert_array_equal(r, a0 % b0)
    with np.errstate(over="ignore"):
        want = ((a0 << np.int32(3)) ^ (b0 >> np.int32(1))) | (a0 & ~b0)
    np.testing.assert_array_equal(s, want)
    source = _newer_ops.source(frozen)
    assert "erf" not in re.sub(r"/\*.*?\*/", "", source)   # lowered: the frozen dialect would refuse it


@gk.kernel
def _smallest(x: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_min(out, 0, x[i] * x[i])


def _min_gradient(device: str, x0: np.ndarray):
    x = gk.array(x0, device=device, requires_grad=True)
    out = gk.array(np.array([1e30], np.float32), device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(_smallest, len(x0), inputs=[x], outputs=[out], device=device)
    tape.backward(grads={out: gk.array(np.ones(1, np.float32), device=device)})
    return out.numpy()[0], x.grad.numpy()


def test_atomic_min_adjoint_is_not_declared_without_cas_and_runs_with_it(frozen, rng):
    x0 = rng.uniform(1, 2, 129).astype(np.float32)
    k = int(np.argmin(x0 * x0))
    with pytest.raises(NotDeclaredError) as err:           # its adjoint claims the gradient with an xchg
        _min_gradient(frozen, x0)
    assert err.value.feature == "atomic_xchg" and err.value.backend == "c_v1"
    value, grad = _min_gradient("c_v1_cas", x0)
    assert value == np.min(x0 * x0)
    want = np.zeros_like(x0)
    want[k] = 2 * x0[k]
    np.testing.assert_allclose(grad, want, rtol=1e-6)
    assert "gk_casloop_xchg_float" in _smallest.source("c_v1_cas", adjoint=True)


@pytest.mark.slow
def test_conformance_suite_on_the_frozen_plugin_has_no_failures(tmp_path):
    """Today's suite (builtins op by op, native snippets, threads, the atomic min/max language cells) on the
    frozen plugin, from outside the checkout: passes, with every skip a "not declared" one."""
    cmd = [sys.executable, "-m", "gradkit.conformance", "--register", "c_v1=gradkit_c_v1:CBackend",
           "--device", "c_v1", "-q", "-p", "no:xdist", "-rs", "-k",
           "test_builtins or test_native or test_threads or min or max or erf"]
    env = {**__import__("os").environ, "PYTHONPATH": str(HERE)}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    out = done.stdout + done.stderr
    summary = out.strip().splitlines()[-1]
    assert done.returncode == 0 and "failed" not in summary and "error" not in summary, out[-4000:]
    skips = re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", out, flags=re.M)
    assert skips and all(s.startswith("not declared: ") for s in skips), skips
    assert {"native", "threads", "atomic_xchg"} <= {s.split(": ", 1)[1] for s in skips}
