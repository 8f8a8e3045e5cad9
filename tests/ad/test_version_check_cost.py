"""Backward's "modified after recording" check stays linear in the tape's length for time-stepped programs
(every step reads row t - 1 and writes row t of one array: DiffTaichi's mass-spring, rigid body, MPM), and
its verdicts are the walk's: a later write into a needed row, or a write the tape did not see, still raises."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.tape import version_check


@gk.kernel
def step(x: gk.array(dtype=float, ndim=2), t: int):
    i = gk.tid()
    x[t, i] = gk.sin(x[t - 1, i]) + 0.5 * x[t - 1, i]


@gk.kernel
def last(x: gk.array(dtype=float, ndim=2), t: int, l: gk.array(dtype=float)):
    l[0] += x[t, gk.tid()]


def _record(n, tail=None):
    x = gk.ones((n + 1, 2), requires_grad=True)
    l = gk.zeros(1, requires_grad=True)
    tape = gk.Tape()
    with tape:
        for t in range(1, n + 1):
            gk.launch(step, 2, inputs=[x, t])
        gk.launch(last, 2, inputs=[x, n, l])
        if tail is not None:
            tail(x, l)
    return tape, x, l


def _walks(monkeypatch):
    """Counts the check's per-record steps: memory comparisons and row evaluations."""
    calls = [0]
    for name in ("same_memory", "written_rows", "needed_rows"):
        real = getattr(version_check, name)

        def counting(*args, real=real):
            calls[0] += 1
            return real(*args)
        monkeypatch.setattr(version_check, name, counting)
    return calls


def test_time_stepped_tape_checks_in_linear_time(monkeypatch):
    counts = []
    for n in (40, 160):
        calls = _walks(monkeypatch)
        tape, x, l = _record(n)
        tape.backward(loss=l)
        counts.append(calls[0])
        assert np.isfinite(x.grad.numpy()).all() and x.grad.numpy()[0, 0] != 0 or n > 40
    assert counts[1] < 6 * counts[0]                       # 4x the steps: ~4x the work, not 16x


def test_a_later_write_into_a_needed_row_still_raises():
    tape, x, l = _record(30, tail=lambda x, l: gk.launch(step, 2, inputs=[x, 5]))   # rewrites row 5
    with pytest.raises(gk.GradientRuleError, match="writes row 5"):
        tape.backward(loss=l)


def test_a_write_the_tape_did_not_see_still_raises():
    tape, x, l = _record(30)
    gk.launch(step, 2, inputs=[x, 7])                      # outside the tape
    with pytest.raises(gk.GradientRuleError, match="modified after it was recorded"):
        tape.backward(loss=l)
