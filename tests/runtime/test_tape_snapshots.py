"""The tape's snapshot hook (runtime/tape/snapshots.py): who turns it on, what it keeps per forward and adjoint
launch, and that an adjoint launch that raises still leaves its BackwardRecord (the debugger names it)."""

import types

import numpy as np
import pytest

import gradkit as gk
from gradkit.runtime.tape import snapshots


@gk.kernel
def double_into(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * 2.0


def _record(device, tape):
    x = gk.array(np.arange(4, dtype=np.float32), device=device, requires_grad=True)
    y = gk.zeros(4, device=device, requires_grad=True)
    with tape:
        gk.launch(double_into, 4, inputs=[x], outputs=[y], device=device)
    tape.backward(grads={y: np.ones(4, np.float32)})
    return x, y


def test_snapshot_switches():
    assert not gk.Tape().snapshotting and gk.Tape(snapshots=True).snapshotting
    saved = gk.config.snapshot_launches
    try:
        gk.config.snapshot_launches = True
        assert gk.Tape().snapshotting and not gk.Tape(snapshots=False).snapshotting
    finally:
        gk.config.snapshot_launches = saved


def test_forward_and_adjoint_snapshots(device):
    tape = gk.Tape(snapshots=True)
    _record(device, tape)
    snaps = tape.launches[0].snapshots
    np.testing.assert_array_equal(snaps.before["y"].data, 0.0)
    np.testing.assert_array_equal(snaps.after["y"].data, 2.0 * np.arange(4))
    (brec,) = tape.backward_records
    assert (brec.record, brec.kernel) == (0, tape.launches[0].kernel) and brec.ms >= 0.0
    np.testing.assert_array_equal(brec.grads.before["x"].data, 0.0)
    np.testing.assert_array_equal(brec.grads.after["x"].data, 2.0)


def test_switched_on_after_construction(device):
    tape = gk.Tape()
    tape.snapshotting = True
    _record(device, tape)
    assert tape.launches[0].snapshots is not None and len(tape.backward_records) == 1


def test_off_keeps_nothing(device):
    tape = gk.Tape(snapshots=False)
    _record(device, tape)
    assert tape.launches[0].snapshots is None and tape.backward_records == []


def test_adjoint_that_raises_keeps_its_record():
    kernel = types.SimpleNamespace(params=[("x", None)])
    grad = types.SimpleNamespace(buffer=1, _read=lambda: np.zeros(2, np.float32))
    arr = types.SimpleNamespace(buffer=1, grad=grad)
    rec = types.SimpleNamespace(kernel_obj=kernel, args=[arr], kernel="k")
    records = []

    def boom():
        raise FloatingPointError("nan")

    with pytest.raises(FloatingPointError):
        snapshots.around_adjoint(3, rec, boom, records)
    (brec,) = records
    assert brec.record == 3 and set(brec.grads.before) == set(brec.grads.after) == {"x"}
