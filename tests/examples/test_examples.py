"""The bundled examples on every device: each result checked against the float64 NumPy reference the
example carries (or central differences of it), and each script run as `__main__` the way the
debugger runs it."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gravity = load("gravity_forces")
heat = load("heat_optimize")
cloth = load("cloth_trajectory")
safe_sqrt = load("safe_sqrt_nan")
jacobian = load("jacobian")
springs = load("struct_springs")
rigid = load("rigid_body_quat")
monte_carlo = load("monte_carlo")
decompositions = load("decompositions")
ddp = load("torch_ddp_springs")


def test_gravity_forces_are_minus_the_energy_gradient(device):
    out = gravity.run(device, bodies=64, seed=3)
    scale = np.abs(out["ref_force"]).max()
    assert out["energy"] == pytest.approx(out["ref_energy"], rel=1e-5)
    np.testing.assert_allclose(out["autodiff_force"], out["ref_force"], atol=2e-5 * scale)
    np.testing.assert_allclose(out["closed_form_force"], out["ref_force"], atol=2e-5 * scale)


def test_heat_gradient_matches_central_differences_and_loss_falls(device, rng):
    out = heat.run(device, n=16, steps=6, iters=12)
    losses = out["losses"]
    assert losses[-1] < 0.05 * losses[0]
    assert all(b <= a for a, b in zip(losses, losses[1:]))
    # the last iteration's gradient, at the last initial field, against float64 central differences
    u0 = out["initial"].astype(np.float64)
    for i, j in rng.integers(0, 16, size=(6, 2)):
        e = np.zeros_like(u0)
        e[i, j] = 1e-3
        fd = (heat.loss_reference(u0 + e, out["target"], out["alpha"], out["steps"])
              - heat.loss_reference(u0 - e, out["target"], out["alpha"], out["steps"])) / 2e-3
        assert out["grad"][i, j] == pytest.approx(fd, rel=2e-2, abs=1e-5)
    assert losses[-1] == pytest.approx(heat.loss_reference(u0, out["target"], out["alpha"], out["steps"]),
                                       rel=1e-2, abs=1e-7)


def test_cloth_gradient_matches_central_differences_and_loss_falls(device, rng):
    out = cloth.run(device, side=4, steps=20, iters=1)
    v0 = out["velocity"].astype(np.float64)
    grad = out["grad"]
    for p, c in zip(rng.integers(0, 16, 5), rng.integers(0, 3, 5)):
        e = np.zeros_like(v0)
        e[p, c] = 1e-4
        fd = (cloth.loss_reference(out, v0 + e) - cloth.loss_reference(out, v0 - e)) / 2e-4
        assert grad[p, c] == pytest.approx(fd, rel=2e-2, abs=1e-4)
    assert out["losses"][0] == pytest.approx(cloth.loss_reference(out, v0), rel=1e-3)
    trained = cloth.run(device, side=4, steps=20, iters=10, lr=200.0)["losses"]
    assert trained[-1] < 0.1 * trained[0]


def test_safe_sqrt_story(device):
    out = safe_sqrt.run(device)
    np.testing.assert_allclose(out["safe_sqrt"], [0.5, 0.35355338, 0.0], rtol=1e-6)
    assert np.isinf(out["sqrt"][2]) and np.allclose(out["sqrt"][:2], [0.5, 0.35355338])
    points = np.asarray(safe_sqrt.POINTS, np.float64)
    norms = np.linalg.norm(points, axis=1)
    expect = np.divide(points, norms[:, None], out=np.zeros_like(points), where=norms[:, None] > 0)
    for how in ("safe_length",):
        np.testing.assert_allclose(np.stack(out[how], 1), expect, rtol=1e-6, atol=1e-7)
    plain = np.stack(out["length"], 1)
    assert np.isnan(plain[1]).all() and np.allclose(plain[[0, 2]], expect[[0, 2]])


def test_safe_sqrt_nan_check_names_the_origin(device):
    import gradkit as gk
    saved = gk.config.check_nan
    gk.config.check_nan = True
    try:
        with pytest.raises(gk.NaNError) as err:
            safe_sqrt.run(device)
    finally:
        gk.config.check_nan = saved
    assert err.value.kernel == "length" and err.value.array == "px.grad"
    assert err.value.direction == "backward" and list(err.value.index) == [1]


def test_jacobians_agree_with_the_closed_form(device):
    out = jacobian.run(device, size=5, seed=7)
    for key, exact in out["exact"].items():
        np.testing.assert_allclose(out["reverse"][key], exact, atol=1e-6)
        np.testing.assert_allclose(out["forward"][key], exact, atol=1e-6)
        np.testing.assert_allclose(out["fd"][key], exact, atol=2e-3)
    k = out["row_index"]
    np.testing.assert_allclose([out["row"][0][k], out["row"][1][k]],
                               [out["exact"][(0, 0)][k, k], out["exact"][(0, 1)][k, k]], rtol=1e-6)
    assert out["gradcheck"] is True
    assert out["function"].shape == (4, 5)
    np.testing.assert_allclose(out["function"], out["function_exact"], atol=2e-5, rtol=1e-4)


def test_struct_springs_gradient_matches_central_differences_and_loss_falls(device, rng):
    out = springs.run(device, n=6, steps=25, iters=12)
    v0, grad = out["velocity"], out["grad"]
    for p, c in zip(rng.integers(1, 6, 5), rng.integers(0, 3, 5)):
        e = np.zeros_like(v0)
        e[p, c] = 1e-5
        fd = (springs.loss_reference(v0 + e, out["target"], 25) - springs.loss_reference(v0 - e, out["target"], 25)) / 2e-5
        assert grad[p, c] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    np.testing.assert_allclose(grad[0], 0.0)                 # the pinned particle's velocity does nothing
    assert out["losses"][-1] < 0.1 * out["losses"][0]
    assert out["losses"][-1] == pytest.approx(springs.loss_reference(v0, out["target"], 25), rel=1e-9)
    np.testing.assert_allclose(out["log"][-1], out["final"], rtol=1e-12)   # the no_grad log saw the states
    assert out["n_recorded"] == 25 + 2                       # start, the steps, the misfit: not the log


def test_rigid_body_gradient_matches_central_differences_and_misfit_falls(device):
    out = rigid.run(device, steps=60, iters=25)
    w0, grad = out["omega0"], out["grad"]
    for c in range(3):
        e = np.zeros(3)
        e[c] = 1e-6
        fd = (rigid.loss_reference(w0 + e, 60) - rigid.loss_reference(w0 - e, 60)) / 2e-6
        assert grad[c] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    assert out["losses"][-1] < 0.1 * out["losses"][0]
    np.testing.assert_allclose(out["final_q"], rigid.simulate_reference(w0, 60), rtol=1e-10, atol=1e-12)


def test_monte_carlo_estimates(device):
    """The estimates agree with the closed forms statistically, and exactly with the same draws made by an
    independent model of the random stream (so value and gradient are the right sample means)."""
    import math
    from gradkit.conformance.references import pcg
    out = monte_carlo.run(device, n=6, samples=300)
    assert np.abs(out["value"] - out["exact_value"]).max() < 5 * out["stderr"]
    assert np.abs(out["grad"] - out["exact_grad"]).max() < 5 * out["stderr"]
    for i in (0, 3, 5):
        s, eps = pcg((2026 + pcg(i)) & 0xFFFFFFFF), []
        for _ in range(300):
            s1 = pcg(s)
            s = pcg(s1)
            u1, u2 = 1.0 - np.float32((s1 >> 8) / 16777216.0), np.float32((s >> 8) / 16777216.0)
            eps.append(math.sqrt(-2 * math.log(float(u1))) * math.cos(2 * math.pi * float(u2)))
        z = out["x"][i] + 0.7 * np.array(eps)
        assert out["value"][i] == pytest.approx(np.mean(np.sin(z)), abs=2e-6)
        assert out["grad"][i] == pytest.approx(np.mean(np.cos(z)), abs=2e-6)


def test_decompositions_arap_fit(device, rng):
    """The ARAP energy (rotations from gk.polar_decompose) matches its NumPy float64 reference, its gradient
    matches central differences of it, and gradient descent moves the block rigidly onto the handles."""
    out = decompositions.run(device, iters=200)
    ref = lambda x: decompositions.energy_reference(x, out["rest"], out["nbr"], out["handle"], out["target"])  # noqa: E731
    x0 = out["rest"]
    assert out["energies"][0] == pytest.approx(ref(x0), rel=1e-12)
    for i, c in zip(rng.integers(0, len(x0), 8), rng.integers(0, 3, 8)):
        e = np.zeros_like(x0)
        e[i, c] = 1e-6
        assert out["first_grad"][i, c] == pytest.approx((ref(x0 + e) - ref(x0 - e)) / 2e-6, rel=1e-6, abs=1e-6)
    assert out["energies"][-1] < 1e-6 * out["energies"][0]
    np.testing.assert_allclose(out["x"], out["goal"], atol=1e-3)


def test_torch_ddp_training_matches_one_process(device):
    """The gradkit rollout inside torch autograd learns the stiffness; two gloo processes under
    DistributedDataParallel, each simulating half the oscillators, end where one process does."""
    pytest.importorskip("torch")
    one = ddp.train(device, iters=25)
    assert one["losses"][-1] < 1e-4 * one["losses"][0]
    assert one["k"] == pytest.approx(ddp.TRUE_K, rel=1e-3)
    two = ddp.launch_workers(device, 2, 25)
    assert two[0]["k"] == two[1]["k"]                               # every rank holds the same parameter
    assert two[0]["k"] == pytest.approx(one["k"], rel=1e-9)


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_script_runs_as_main(script, device):
    args = [] if script == "quickstart.py" else ["--device", device]
    run = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                         timeout=300, cwd=EXAMPLES)
    assert run.returncode == 0, run.stdout + run.stderr


def test_examples_become_bundles_the_debugger_reads(tmp_path):
    """What `make demo` does before serving: capture each example (snapshots and NaN checks on)."""
    from gradkit.app import data, flow_data, nan_data
    from gradkit.app.cli import capture_script
    reports = {p.stem: capture_script(p, [], tmp_path / p.stem) for p in sorted(EXAMPLES.glob("*.py"))}
    assert all(r.bundle is not None and r.error is None for r in reports.values()), reports
    bundles = {name: data.open_bundle(r.bundle) for name, r in reports.items()}

    origin = nan_data.nan_origin(bundles["safe_sqrt_nan"])
    assert (origin["kernel"], origin["array"], origin["direction"]) == ("length", "px.grad", "backward")
    assert reports["safe_sqrt_nan"].nan and "px.grad" in reports["safe_sqrt_nan"].nan
    for name in ("heat_optimize", "cloth_trajectory"):
        history = data.summary(bundles[name])["loss_history"]
        assert len(history) > 10 and history[-1] < 0.1 * history[0]
        assert nan_data.nan_origin(bundles[name]) is None
    kernels = {row["kernel"] for row in data.launch_rows(bundles["gravity_forces"])}
    assert kernels == {"potential_energy", "gravity_force"}
    # masses are data: listed as a constant, not alarmed as cut off (issue 41 item 2)
    assert "masses" in flow_data.constant_arrays(bundles["gravity_forces"])
    assert "masses" not in {row["array"] for row in flow_data.cut_off_arrays(bundles["gravity_forces"])}
    assert all(not flow_data.cut_off_arrays(b) for b in bundles.values())       # no false alarm in any example
