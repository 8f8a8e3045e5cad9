"""Issue 41's acceptance program without a browser: the generated 201-launch, 50-step rope (tests/app/
planted.py) with four planted bugs. The landing data names each bug with the line the generator planted it
on; the host-copy and unused-parameter hazards are checked on tapes recorded in-process, and the claims
they make (a zero gradient for the declared parameter) against what backward computes."""

from __future__ import annotations

import numpy as np

import gradkit as gk
from gradkit.app import data, flow_data, nan_data, overview_data
from tests.app import planted as program


def _problems(bundle) -> list[str]:
    return [p["text"] for p in overview_data.bundle_status(bundle)["problems"]]


def test_the_landing_data_names_each_planted_bug_and_its_line(planted):
    folder, lines = planted
    b = data.open_bundle(folder / "planted")
    assert len(b.launches) == 4 * program.STEPS + 1
    texts = _problems(b)
    at = {bug: f"planted.py:{line}" for bug, line in lines.items()}
    assert f"NaN/Inf: sqrt at {at['nan']}, iteration 0, step {program.NAN_STEP}" in texts
    dead = [t for t in texts if t.startswith("overwritten before read: 'f'")]
    assert len(dead) == 1 and dead[0].endswith(f"overwritten at {at['dead_write']} ({program.STEPS} times)")
    assert f"not differentiable: 'drag' at {at['int_cast']}" in texts
    assert f"host copy: 'stiffness' at {at['host_copy']}" in texts
    status = overview_data.bundle_status(b)
    assert status["status"] == "NaN/Inf" and status["launches"] == 4 * program.STEPS + 1


def test_the_fixed_program_shows_no_problem(planted):
    """The four planted lines fixed: no NaN, no hazard, no alarm, and the gradients the bugs cut now arrive
    (wind through the force, the drag coefficient, the declared stiffness itself)."""
    folder, _ = planted
    b = data.open_bundle(folder / "planted_fixed")
    assert overview_data.bundle_status(b) == {"status": "ok", "rank": 3, "problems": [],
                                              "launches": 4 * program.STEPS + 1}
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(b)}
    assert flags["wind"] == flags["drag"] == flags["stiffness"] == "ok"


def test_the_nan_view_data_names_the_step_and_the_sqrt(planted):
    folder, lines = planted
    b = data.open_bundle(folder / "planted")
    o = nan_data.nan_origin(b)
    assert o["kernel"] == "integrate" and o["launch"] == 4 * program.NAN_STEP + 3
    assert nan_data.time_step(b, o["launch"]).startswith(f"step {program.NAN_STEP} (of the {program.STEPS}")
    d = nan_data.op_diagnosis(o)
    assert d["op"] == "sqrt" and d["where"] == f"planted.py:{lines['nan']}"
    hazards = {h["kind"]: h for h in flow_data.hazards(b)}
    assert hazards["host copy"]["lines"] == [f"planted.py:{lines['host_copy']}"]
    assert "'k_dev'" in hazards["host copy"]["message"]          # the copy, by the user's variable name


@gk.kernel
def weigh(x: gk.array(dtype=gk.float64), w: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, w[0] * x[i] * x[i])


def _weigh_tape(device, x_np, w, w_read, params):
    x = gk.array(x_np, dtype=gk.float64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape(params=params)
    with tape:
        gk.launch(weigh, len(x_np), inputs=[x, w_read], outputs=[loss], device=device)
    tape.backward(loss=loss)
    return tape, x


def test_a_parameter_copied_through_numpy_is_a_host_copy_with_no_gradient(device, rng):
    """w declared, w_copy = gk.array(w.numpy()) launched instead: the hazard names w and the copy, and the
    gradient says the same: w's is zero, the copy's is sum(x^2) (float64 NumPy reference)."""
    x_np = rng.normal(size=7)
    w = gk.array(rng.uniform(0.5, 2.0, 1), dtype=gk.float64, device=device, requires_grad=True, label="w")
    w_copy = gk.array(w.numpy(), dtype=gk.float64, device=device, requires_grad=True, label="w_copy")
    tape, _ = _weigh_tape(device, x_np, w, w_copy, [w])
    found = [h for h in tape.hazards() if h.kind == "host copy"]
    assert len(found) == 1 and found[0].array is w and "'w_copy'" in found[0].message
    np.testing.assert_allclose(w_copy.grad.numpy()[0], np.sum(x_np ** 2), rtol=1e-12)
    assert not np.any(w.grad.numpy())


def test_a_declared_parameter_launched_directly_is_no_hazard(device, rng):
    """The same program passing w itself: no host copy, no unused parameter, and w's gradient is sum(x^2)."""
    x_np = rng.normal(size=7)
    w = gk.array(rng.uniform(0.5, 2.0, 1), dtype=gk.float64, device=device, requires_grad=True, label="w")
    spare = gk.array(w.numpy(), dtype=gk.float64, device=device, label="spare")     # equal values, unused
    tape, x = _weigh_tape(device, x_np, w, w, [w])
    assert tape.hazards() == [] and spare is not None
    np.testing.assert_allclose(w.grad.numpy()[0], np.sum(x_np ** 2), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * w.numpy()[0] * x_np, rtol=1e-12)


def test_a_declared_parameter_nothing_reads_is_unused(device, rng):
    """A declared parameter whose values no launched array holds: an unused parameter, not a host copy."""
    x_np = rng.normal(size=5)
    w = gk.array(rng.uniform(0.5, 2.0, 1), dtype=gk.float64, device=device, requires_grad=True, label="w")
    other = gk.array(w.numpy() + 1.0, dtype=gk.float64, device=device, requires_grad=True, label="other")
    tape, _ = _weigh_tape(device, x_np, w, other, [w])
    assert [h.kind for h in tape.hazards()] == ["unused parameter"]
    np.testing.assert_allclose(other.grad.numpy()[0], np.sum(x_np ** 2), rtol=1e-12)


def test_the_unfolded_graph_is_refused_before_dot_starts(planted):
    """201 launch boxes unfolded would keep dot busy for over a minute: the debugger refuses it at once and
    says to fold or collapse; folded, the same program is a handful of boxes, under the limit."""
    import time

    import pytest

    from gradkit.app import graph_component, graph_data
    b = data.open_bundle(planted[0] / "planted")
    start = time.perf_counter()
    with pytest.raises(graph_component.NoRenderer, match="fold repeated launches") as err:
        graph_component.render_svg(graph_data.graph_dot(b, simplify=False))
    assert err.value.kind == "too_large" and str(4 * program.STEPS + 1) in str(err.value)
    assert time.perf_counter() - start < 2.0
    folded = graph_data.graph_dot(b, simplify=True)
    assert 1 <= len(graph_component._LAUNCH_BOX.findall(folded)) <= graph_component.MAX_LAUNCH_BOXES


def _fixed_loss(wind: float, k: float, c: float, steps: int = program.STEPS, n: int = 8) -> float:
    """The fixed program's loss in float64 NumPy (its scalar dt is a float32 kernel argument)."""
    dt = float(np.float32(0.01))
    gust = np.linspace(1.0, 2.0, steps)
    gust[program.NAN_STEP] = 0.0
    x, v = np.linspace(0.0, 1.0, n) ** 2, np.zeros(n)
    for s in range(steps):
        f = np.full(n, wind * 0.5)
        left, right = x[np.maximum(np.arange(n) - 1, 0)], x[np.minimum(np.arange(n) + 1, n - 1)]
        f = f + k * (left + right - 2.0 * x)
        g = -0.1 * (c * 10.0) * v
        v = v + dt * (f + g + np.sqrt(gust[s] + 1e-12) * 0.1)
        x = x + dt * v
    return float(np.sum(x * x))


def test_the_fixed_programs_gradients_match_central_differences(planted):
    """The gradients the fixed program's bundle holds for its three parameters against float64 central
    differences of a NumPy re-implementation: the bugs' fixes make each of them arrive, and arrive right."""
    b = data.open_bundle(planted[0] / "planted_fixed")
    ids = {a["label"]: a["id"] for a in b.manifest["arrays"]}
    point = {"wind": 0.3, "stiffness": 2.0, "drag": 0.35}
    for name in point:
        h = 1e-6 * max(1.0, abs(point[name]))
        up, down = dict(point), dict(point)
        up[name] += h
        down[name] -= h
        fd = (_fixed_loss(up["wind"], up["stiffness"], up["drag"])
              - _fixed_loss(down["wind"], down["stiffness"], down["drag"])) / (2 * h)
        grad = b.grad(ids[name])
        assert grad is not None and abs(fd) > 1e-6, name
        np.testing.assert_allclose(grad[0], fd, rtol=1e-6, err_msg=name)


def test_no_unused_parameter_claim_past_a_python_step(device, rng):
    """A record_func step may read arrays it does not list: a declared parameter no launch reads is then not
    called unused (without the step it is)."""
    x_np = rng.normal(size=5)
    w = gk.array(rng.uniform(0.5, 2.0, 1), dtype=gk.float64, device=device, requires_grad=True, label="w")
    other = gk.array(w.numpy() + 1.0, dtype=gk.float64, device=device, requires_grad=True, label="other")
    x = gk.array(x_np, dtype=gk.float64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape(params=[w])
    with tape:
        gk.launch(weigh, 5, inputs=[x, other], outputs=[loss], device=device)
    assert [h.kind for h in tape.hazards()] == ["unused parameter"]
    tape.record_func(lambda: None, [x])
    assert tape.hazards() == []
