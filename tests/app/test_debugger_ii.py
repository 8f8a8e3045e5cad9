"""The debugger's second round (issue 41), on bundles captured in-process: a backward pass that stopped
midway, the NaN view's time step and fix, arrays named as the user names them, parameters declared or
inferred, a NaN launch kept visible when the graph folds, and the graph opening on the loss."""

from __future__ import annotations

import re

import numpy as np

import gradkit as gk
from gradkit.app import data, flow_data, graph_data, nan_data


@gk.kernel
def root_of(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sqrt(x[i])


@gk.kernel
def faint_sum(y: gk.array(dtype=float), k: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, k[0] * 1e-12 * y[i])


def _faint_bundle(tmp_path, x_np):
    """x -> sqrt -> scaled by k * 1e-12 -> loss: k's gradient is 1e-12 * sum(sqrt(x)), a vanishing one."""
    x = gk.array(x_np, requires_grad=True, label="x")
    y = gk.zeros(len(x_np), requires_grad=True, label="y")
    k = gk.array(np.ones(1, np.float32), requires_grad=True, label="k")
    loss = gk.zeros(1, requires_grad=True, label="loss")
    with gk.viz.Capture() as cap:
        with gk.Tape() as tape:
            gk.launch(root_of, len(x_np), inputs=[x], outputs=[y])
            gk.launch(faint_sum, len(x_np), inputs=[y, k], outputs=[loss])
        tape.backward(loss=loss)
    return data.open_bundle(cap.save(tmp_path / "faint"))


def test_a_partial_backward_is_said_and_raises_no_vanishing_alarm(tmp_path, rng):
    """Issue 41 item 3: backward stopped by the NaN check (sqrt at 0) after k's gradient arrived: every view
    leads with the partial pass, k is 'partial' (no vanishing alarm from a pass that stopped), and the same
    program without the zero does raise the vanishing alarm on k."""
    from gradkit.app import overview_data
    x_np = rng.uniform(0.5, 2.0, 6).astype(np.float32)
    whole = _faint_bundle(tmp_path / "whole", x_np)
    assert data.partial_backward(whole) is None
    assert {r["array"]: r["flag"] for r in flow_data.gradient_flow(whole)}["k"] == "vanishing"
    x_np[2] = 0.0
    stopped = _faint_bundle(tmp_path / "stopped", x_np)
    message = data.partial_backward(stopped)
    assert message.startswith("The backward pass stopped in backward launch #1 (root_of): 2 of 2 adjoint")
    flags = {r["array"]: r["flag"] for r in flow_data.gradient_flow(stopped)}
    assert flags["k"] == "partial" and flags["x"] == "NaN/Inf"
    texts = [p["text"] for p in overview_data.bundle_status(stopped)["problems"]]
    assert any(t.startswith("partial backward") for t in texts)
    assert not any("vanishing" in t for t in texts)


@gk.kernel
def descend(x: gk.array(dtype=float), x_next: gk.array(dtype=float)):
    i = gk.tid()
    x_next[i] = x[i] - 1.0 + 0.0 * gk.sqrt(x[i])


@gk.kernel
def tally(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    gk.atomic_add(loss, 0, x[gk.tid()])


def test_the_nan_view_names_the_time_step_and_a_fix(tmp_path):
    """Issue 41 item 4: a rollout whose sqrt meets a negative value at step 5: the NaN view says "step 5"
    (not only "forward launch #6") and how to fix a sqrt outside its domain; a division has its own hint."""
    xs = [gk.array(np.full(3, 4.5, np.float32), requires_grad=True, label="x0")]
    xs += [gk.zeros(3, requires_grad=True, label=f"x{t + 1}") for t in range(8)]
    with gk.viz.Capture() as cap:
        with gk.Tape():
            gk.launch(tally, 3, inputs=[xs[0]], outputs=[gk.zeros(1, requires_grad=True)])
            for t in range(8):
                gk.launch(descend, 3, inputs=[xs[t]], outputs=[xs[t + 1]])
    b = data.open_bundle(cap.save(tmp_path / "descend"))
    o = nan_data.nan_origin(b)
    assert o["launch"] == 6 and o["kernel"] == "descend"
    step = nan_data.time_step(b, o["launch"])
    assert step.startswith("step 5 (of the 6 recorded; launch 1 of the 1 the loop body makes)")
    d = nan_data.op_diagnosis(o)
    assert d["op"] == "sqrt" and "gk.length" in nan_data.fix_hint(d["op"])
    assert nan_data.fix_hint("div").startswith("a division by zero")
    assert nan_data.fix_hint("tally") is None and nan_data.time_step(b, 0) is None


def test_arrays_carry_the_names_the_user_gave_them(tmp_path):
    """Issue 41 item 1: under gradkit debug an unlabeled array is named after the user's variable (an element
    of a list as `xs[k]`), with the line that created it and the parameter it was bound to; a label wins."""
    with gk.viz.Capture() as cap:
        stiffness = gk.array(np.ones(3, np.float32), requires_grad=True)          # line A
        xs = [gk.zeros(3, requires_grad=True) for _ in range(3)]
        xs[0].assign(gk.array(np.arange(3, dtype=np.float32) + 5.0))
        named = gk.zeros(1, requires_grad=True, label="the loss")
        with gk.Tape():
            for t in range(2):
                gk.launch(descend, 3, inputs=[xs[t]], outputs=[xs[t + 1]])
            gk.launch(faint_sum, 3, inputs=[xs[2], stiffness], outputs=[named])
    b = data.open_bundle(cap.save(tmp_path / "names"))
    arrays = {a["label"]: a for a in b.manifest["arrays"]}
    assert set(arrays) == {"stiffness", "xs[0]", "xs[1]", "xs[2]", "the loss"}
    assert arrays["stiffness"]["param"] == "k" and arrays["xs[1]"]["param"] == "x_next"
    created = arrays["stiffness"]["created"]
    assert created["file"] == __file__ and created["line"] == _line_of("stiffness = gk.array(")


def _line_of(text: str) -> int:
    return next(k for k, line in enumerate(open(__file__), 1) if text in line)


def test_parameters_come_from_optimisers_and_broken_chains_are_cut_off(tmp_path):
    """Without gk.Tape(params=...): an optimiser's parameters are the parameters; an array a launch computes
    from an array with requires_grad but which lacks it breaks the chain and is cut off; constants are not."""
    theta = gk.array(np.full(3, 2.0, np.float32), requires_grad=True, label="theta")
    data_ = gk.array(np.ones(3, np.float32), label="data")
    middle = gk.zeros(3, label="middle")                                   # forgot requires_grad
    loss = gk.zeros(1, requires_grad=True, label="loss")
    with gk.viz.Capture() as cap:
        gk.optim.SGD([theta], lr=0.1)
        with gk.Tape() as tape:
            gk.launch(descend, 3, inputs=[theta], outputs=[middle])
            gk.launch(faint_sum, 3, inputs=[middle, data_], outputs=[loss])
        tape.backward(loss=loss)
    b = data.open_bundle(cap.save(tmp_path / "roles"))
    roles = {a["label"]: a["role"] for a in b.manifest["arrays"]}
    assert roles == {"theta": "parameter", "middle": "intermediate", "data": "constant", "loss": "intermediate"}
    assert [c["array"] for c in flow_data.cut_off_arrays(b)] == ["middle"]
    assert flow_data.constant_arrays(b) == ["data"]


def test_a_nan_launch_stays_visible_in_the_folded_graph(tmp_path):
    """Issue 41 item 5: a 30-step rollout folds into a few boxes, but the step whose launch made the NaN
    is drawn on its own, so the folded graph still shows where it happened."""
    xs = [gk.array(np.full(3, 24.5, np.float32), requires_grad=True, label="x0")]
    xs += [gk.zeros(3, requires_grad=True, label=f"x{t + 1}") for t in range(30)]
    with gk.viz.Capture() as cap:
        with gk.Tape():
            for t in range(30):
                gk.launch(descend, 3, inputs=[xs[t]], outputs=[xs[t + 1]])
    b = data.open_bundle(cap.save(tmp_path / "long"))
    assert nan_data.nan_origin(b)["launch"] == 25
    dot = graph_data.graph_dot(b, simplify=True)
    boxes = re.findall(r"^\s*(l\d+) \[shape=plaintext", dot, re.M)
    assert "l25" in boxes and len(boxes) <= 3                  # the folded run before it, and the NaN step


def test_the_graph_opens_on_the_loss(bundles):
    """Issue 41 item 5: with nothing searched, the tape graph is centred on the loss node."""
    node = graph_data.loss_node(bundles["train"])
    loss_id = next(a["id"] for a in bundles["train"].manifest["arrays"] if a["label"] == "loss")
    assert node == "a" + loss_id[1:] and node in graph_data.node_facts(bundles["train"])
