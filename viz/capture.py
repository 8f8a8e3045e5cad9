"""`Capture`: what `gradkit debug` wraps a user's script in — per-launch snapshots, NaN checks and
per-access bounds checks (`gk.config.debug`) on, the tapes the script records and the first NaN/Inf error kept, one debug bundle written at the end.

    with Capture() as cap:
        runpy.run_path("script.py", run_name="__main__")
    cap.save("bundle")        # the tape that hit the NaN, else the last tape that recorded launches
"""

from __future__ import annotations

import pathlib
import threading

import numpy as np

from ..core.config import config
from ..core.errors import NaNError
from ..core.locks import fork_safe
from ..runtime.state import process
from ..runtime.call_site import traceback_site
from .bundle import save_bundle
from .grad_history import History, pass_stats


def _site(site) -> dict | None:
    return {"file": site[0], "line": int(site[1])} if site else None


class Capture:
    """Context manager collecting the tapes a block records; a gk.NaNError ends the block and is kept.
    What `gradkit debug` wraps a script in; `save(path)` writes the last tape as a debug bundle.

    Args:
        snapshots: keep per-launch array snapshots (`gk.config.snapshot_launches`) inside the block.
        check_nan: stop at the first NaN/Inf a launch makes (`gk.config.check_nan`) inside the block.
        bounds_checks: compile bounds checks (`gk.config.debug`) inside the block."""

    def __init__(self, snapshots: bool = True, check_nan: bool = True, bounds_checks: bool = True):
        self.snapshots, self.check_nan, self.bounds_checks = snapshots, check_nan, bounds_checks
        self.tape = None            # the most recent tape that recorded or ran backward
        self.tapes_seen = 0
        self.loss_history: list[float] = []
        self.error: NaNError | None = None
        self.grads: dict = {}                # id(array) -> gradient as the last backward of `tape` left it
        self.history = History()
        self.nan: dict | None = None
        self._saved = None
        self._lock = fork_safe(threading.Lock())    # tapes of several threads report here
        self.declared: dict[int, object] = {}       # arrays declared as parameters (optimisers' params)

    def __enter__(self) -> "Capture":
        if process.capture is not None:
            raise RuntimeError("gradkit Capture blocks do not nest")
        self._saved = (config.snapshot_launches, config.check_nan, config.debug)
        config.snapshot_launches, config.check_nan = self.snapshots, self.check_nan
        # an index outside its array is an IndexError naming the access, not a wrong value or a crash
        config.debug = config.debug or self.bounds_checks
        process.capture = self
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        config.snapshot_launches, config.check_nan, config.debug = self._saved
        process.capture = None
        if isinstance(exc, NaNError):
            self.error, self.nan = exc, self._nan_origin(exc, tb)
            return True
        return False

    def recorded(self, tape) -> None:
        """Called by a tape when it records a launch or starts its backward pass."""
        with self._lock:
            if tape is not self.tape:
                self.tapes_seen += 1
                self.tape, self.grads = tape, {}

    def declare(self, arrays) -> None:
        """Arrays the script trains (an optimiser's parameters): the debugger leads with them."""
        with self._lock:
            self.declared.update((id(a), a) for a in arrays if hasattr(a, "buffer"))

    def backward_started(self, loss_value: float) -> None:
        with self._lock:
            self.loss_history.append(loss_value)

    def backward_finished(self, tape) -> None:
        """Called by a tape when its backward pass ends: keep the gradients as they are now (the script may
        zero them before the bundle is written) and this pass's statistics for the history."""
        grads = self._gradients(tape)
        stats = pass_stats(tape, grads)
        with self._lock:
            if tape is self.tape:
                self.grads = grads
            self.history.add(tape.loss_history[-1] if tape.loss_history else None, stats)

    def backward_stopped(self, tape) -> None:
        """Called by a tape whose backward pass raised, before it puts its gradients back as they were: keep
        them as the pass left them (a NaN's spread is what the debugger shows)."""
        grads = self._gradients(tape)
        with self._lock:
            if tape is self.tape:
                self.grads = grads

    @staticmethod
    def _gradients(tape) -> dict:
        from ..core.config import config
        grads = {}
        for rec in tape.launches:
            for a in rec.args:
                g = getattr(a, "grad", None)
                if g is not None and id(a) not in grads and g.nbytes <= config.snapshot_max_bytes:
                    grads[id(a)] = np.array(g._read(), copy=True)
        return grads

    def _nan_origin(self, exc: NaNError, tb=None) -> dict:
        """The error as bundle data: the index of the launch (forward or backward) that raised it, the op that
        made the value (runtime/launch/op_trace.py), where the script called the launch (and backward), and which
        of the script's tapes it was (0 for the first: the training-loop iteration, for one tape a step)."""
        origin = {"message": str(exc)}
        for key in ("kernel", "array", "direction", "index", "value", "file", "line", "origin"):
            origin[key] = getattr(exc, key, None)
        tape, launch, site = self.tape, None, None
        if tape is not None:
            if origin["direction"] == "backward" and tape.backward_records:
                launch = len(tape.backward_records) - 1
                record = tape.records[tape.backward_records[-1].record]
                site = getattr(record, "site", None)
            elif origin["direction"] == "forward" and tape.launches:
                launch = len(tape.launches) - 1
        origin["launch"] = launch
        raised_at = traceback_site(tb)
        if origin["direction"] == "backward":
            origin["backward_site"] = _site(raised_at)
            origin["call_site"] = _site(site)
        else:
            origin["call_site"] = _site(raised_at)
        origin["iteration"] = max(self.tapes_seen - 1, 0) if tape is not None else None
        return origin

    def save(self, path) -> pathlib.Path:
        """Write the bundle of the captured tape; ValueError when the block recorded no launches."""
        if self.tape is None or not self.tape.launches:
            raise ValueError("nothing to save: the script recorded no launches on a gk.Tape "
                             "(the debugger shows what a Tape records)")
        return save_bundle(self.tape, path, nan=self.nan, loss_history=self.loss_history, grads=self.grads,
                           history=self.history.as_dict(), params=list(self.declared.values()))
