"""Gradient rule checks turn the peers' silently-wrong-gradient cases into named errors, with no false
positives on the allowed accumulation patterns."""

import warnings

import numpy as np
import pytest

import gradkit as gk


def broke_rule_1(x: gk.array(dtype=float), b: gk.array(dtype=float), loss: gk.array(dtype=float)):
    loss[0] = x[1] * b[0]
    b[0] += 100.0


def broke_rule_2(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    loss[0] += x[1] * x[1]
    loss[0] *= x[2]


@gk.kernel
def reads_a(a: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = a[i] * a[i]


@gk.kernel
def scale_in_place(a: gk.array(dtype=float)):
    i = gk.tid()
    a[i] = a[i] * 2.0


@gk.kernel
def accumulate(a: gk.array(dtype=float), out: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.sin(a[i])
    loss[0] += a[i]
    gk.atomic_add(loss, 0, out[i] * 0.0)


@gk.kernel
def branch_writes(a: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    if a[i] > 1.0:
        out[i] = a[i] * 3.0
    else:
        out[i] = a[i] * a[i]


def _arrays(device):
    x = gk.array([1.0, 2.0, 3.0], device=device, requires_grad=True)
    b = gk.array([4.0], device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    return x, b, loss


@pytest.mark.parametrize("pyfunc, rule", [(broke_rule_1, "reads array 'b'"), (broke_rule_2, "overwrites")])
def test_static_rules_warn_and_error(device, pyfunc, rule):
    kernel = gk.kernel(pyfunc)           # a fresh kernel object: the warning fires once per kernel
    x, b, loss = _arrays(device)
    args = [x, b, loss] if pyfunc is broke_rule_1 else [x, loss]
    with warnings.catch_warnings():
        warnings.simplefilter("error", gk.GradientRuleWarning)
        kernel.lowered("forward_ad")                                  # compiling alone stays quiet
        gk.launch(kernel, 1, inputs=args, device=device)              # so does a launch off the tape
    with pytest.warns(gk.GradientRuleWarning, match=rule):
        with gk.Tape():
            gk.launch(kernel, 1, inputs=args, device=device)
    with pytest.raises(gk.GradientRuleError, match=rule):
        with gk.Tape(check=True):
            gk.launch(kernel, 1, inputs=args, device=device)


def test_overwrite_hazard_across_launches(device):
    a = gk.array([1.0, 2.0], device=device, requires_grad=True, label="state")
    out = gk.zeros(2, device=device, requires_grad=True)
    before = a.numpy().copy()
    with pytest.raises(gk.GradientRuleError, match=r"'state'.*reads_a"):
        with gk.Tape(check=True):
            gk.launch(reads_a, 2, inputs=[a], outputs=[out], device=device)
            gk.launch(scale_in_place, 2, inputs=[a], device=device)
    np.testing.assert_array_equal(a.numpy(), before)      # the failing launch did not run


def test_allowed_patterns_raise_nothing(device):
    a = gk.array([0.5, 1.5], device=device, requires_grad=True)
    out = gk.zeros(2, device=device, requires_grad=True)
    loss = gk.zeros(1, device=device, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gk.GradientRuleWarning)
        with gk.Tape(check=True) as tape:
            gk.launch(accumulate, 2, inputs=[a], outputs=[out, loss], device=device)
            gk.launch(reads_a, 2, inputs=[out], outputs=[gk.zeros(2, device=device, requires_grad=True)],
                      device=device)
            branched = gk.zeros(2, device=device, requires_grad=True)
            gk.launch(branch_writes, 2, inputs=[a], outputs=[branched], device=device)   # one write per branch
    tape.backward(loss=loss, grads={branched: np.array([1.0, 1.0], np.float32)})
    np.testing.assert_allclose(a.grad.numpy(), [1.0 + 2 * 0.5, 1.0 + 3.0])
