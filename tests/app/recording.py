"""Recording a one-launch debug bundle for the debugger and bundle tests."""

from __future__ import annotations

import pathlib

import numpy as np

import gradkit as gk


def record_bundle(path: pathlib.Path, kernel, inputs, outputs, snapshots: bool = True,
                  seed: bool = False) -> pathlib.Path:
    """Save a bundle of one launch recorded on a tape (its backward pass too when `seed`: ones into every
    output's gradient)."""
    tape = gk.Tape(snapshots=snapshots)
    with tape:
        gk.launch(kernel, outputs[0].shape[0], inputs=inputs, outputs=outputs)
    if seed:
        tape.backward(grads={y: np.ones(y.shape[0], np.float32) for y in outputs})
    tape.save(path)
    return path
