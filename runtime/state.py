"""Recording state: the active Tape and ForwardMode belong to the Python thread that entered them (as
PyTorch's grad mode is per thread), so threads record and differentiate independently; the debugger's
capture is process-wide (`gradkit debug` collects the tapes of every thread)."""

from __future__ import annotations

import threading


class _Recording(threading.local):
    """Per-thread attributes; the class attributes are each new thread's starting values."""

    tape = None          # the recording gk.Tape of this thread
    forward_mode = None  # the active gk.ForwardMode of this thread
    # while a tape's backward pass runs a Python record (a @gk.grad_for function): the memory the records
    # before it used, so adjoint launches it makes consume what they overwrite there (runtime/tape/tape_consume.py)
    consume_seen = None
    adjoint_variant = None   # the VariantKey of this thread's last adjoint launch (its backward record's)


class _Process:
    capture = None       # the active viz.capture.Capture of `gradkit debug` (if any)


current = _Recording()
process = _Process()
