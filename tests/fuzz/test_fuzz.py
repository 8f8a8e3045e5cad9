"""Property-based fuzzing: random kernels on every device, forward values against an independent float64
reference, reverse and forward gradients against central finite differences of that reference.

The default run is sized for CI: shards of SHARD_SIZE examples, 4 shards on cpu and the NumPy plugin and 3
on OpenCL devices (whose compiler is slower), 1100 programs in all on this machine's three devices, about
a minute of wall time under `pytest -n 2`. GRADKIT_FUZZ_EXAMPLES sets the examples per shard (`make fuzz`
runs a long campaign). Failing programs are printed in full so they can be kept as regression tests.
"""

import os
import pathlib
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

import gradkit as gk
from tests.conftest import DEVICES
from tests.fuzz.generator import build_module, programs

N = 5
SHARD_SIZE = int(os.environ.get("GRADKIT_FUZZ_EXAMPLES", "100"))
SEED = int(os.environ.get("GRADKIT_FUZZ_SEED", "20261123"))     # CI: fixed; `make fuzz`: new programs each run
SHARDS = {"opencl": 3}           # per backend; others get DEFAULT_SHARDS
DEFAULT_SHARDS = 4
CASES = [(d, k) for d in DEVICES for k in range(SHARDS.get(gk.get_device(d).backend, DEFAULT_SHARDS))]
FOLDER = pathlib.Path(tempfile.mkdtemp(prefix="gradkit-fuzz-"))


def _fd(ref, x, y, eps=1e-6):
    """Central-difference gradients of sum(out * w_out) + total * w_tot w.r.t. x and y."""
    gx, gy = np.zeros(N), np.zeros(N)
    for arr, g in ((x, gx), (y, gy)):
        for k in range(N):
            old = arr[k]
            arr[k] = old + eps
            hi = ref(x, y)
            arr[k] = old - eps
            lo = ref(x, y)
            arr[k] = old
            g[k] = ((hi[0] - lo[0]) @ W_OUT + (hi[1] - lo[1]) * W_TOT) / (2 * eps)
    return gx, gy


W_OUT = np.linspace(0.5, 1.5, N)
W_TOT = 0.75


@pytest.mark.parametrize(("device", "shard"), CASES, ids=[f"{d}-{k}" for d, k in CASES])
def test_random_kernels(device, shard):
    """One shard: SHARD_SIZE programs drawn from a fixed seed per shard (the same programs on every device)."""
    @seed(SEED + shard)
    @settings(max_examples=SHARD_SIZE, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(lines=programs())
    def run(lines):
        check_program(device, lines)
    run()


def check_program(device, lines):
    mod, src = build_module(lines, FOLDER)
    rng = np.random.default_rng(len(src))
    x_np, y_np = rng.uniform(-1.5, 1.5, N), rng.uniform(-1.5, 1.5, N)
    with np.errstate(all="ignore"):
        ref_out, ref_tot = mod.reference(x_np.copy(), y_np.copy())
    if not (np.all(np.isfinite(ref_out)) and np.isfinite(ref_tot)) or np.abs(ref_out).max() > 1e6:
        return
    x = gk.array(x_np, dtype=gk.float64, device=device, requires_grad=True)
    y = gk.array(y_np, dtype=gk.float64, device=device, requires_grad=True)
    out = gk.zeros(N, dtype=gk.float64, device=device, requires_grad=True)
    total = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tape = gk.Tape()
        with tape:
            gk.launch(mod.fuzz_kernel, N, inputs=[x, y], outputs=[out, total], device=device)
    msg = "program:\n" + "\n".join(lines)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-9, atol=1e-9, err_msg=msg)
    np.testing.assert_allclose(total.numpy()[0], ref_tot, rtol=1e-9, atol=1e-9, err_msg=msg)
    with np.errstate(all="ignore"):
        gx, gy = _fd(mod.reference, x_np.copy(), y_np.copy())
    if not (np.all(np.isfinite(gx)) and np.all(np.isfinite(gy))) or max(np.abs(gx).max(), np.abs(gy).max()) > 1e4:
        return
    tape.backward(grads={out: gk.array(W_OUT, dtype=gk.float64, device=device),
                         total: gk.array([W_TOT], dtype=gk.float64, device=device)})
    # FD straddles branch switches at most rarely; compare where it is smooth enough to be meaningful.
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-4, atol=1e-5, err_msg=msg)
    np.testing.assert_allclose(y.grad.numpy(), gy, rtol=1e-4, atol=1e-5, err_msg=msg)
    v = np.linspace(-1, 1, N)
    with gk.ForwardMode(seeds={x: gk.array(v, dtype=gk.float64, device=device)}):
        out2 = gk.zeros(N, dtype=gk.float64, device=device)
        tot2 = gk.zeros(1, dtype=gk.float64, device=device)
        gk.launch(mod.fuzz_kernel, N, inputs=[x, y], outputs=[out2, tot2], device=device)
    jvp = out2.dual.numpy() @ W_OUT + tot2.dual.numpy()[0] * W_TOT
    np.testing.assert_allclose(jvp, gx @ v, rtol=1e-4, atol=1e-5, err_msg=msg)
