"""Fewer garbage-collector passes while a tape records.

Every recorded launch leaves a few objects the cyclic collector tracks (its record, its argument list); at
CPython's default first threshold (700 net allocations) a tape of thousands of tiny launches pays for a
young-generation pass every few hundred records, each traversing records that are not garbage (W5 taped:
~0.3 µs a launch, ~1 µs on a tape of 100k launches). While any tape records, the first threshold is raised
to `RECORDING_THRESHOLD`: collections still happen (memory stays bounded by that many objects of garbage,
whatever runs meanwhile, launches or not), just rarely; a tape shorter than that is freed by reference
counting before any pass sees it. The thresholds found are put back when the last recording tape exits.
Nothing is changed when the collector is disabled or its first threshold is already at least as high.
"""

from __future__ import annotations

import gc
import threading

from ...core.locks import fork_safe

RECORDING_THRESHOLD = 100_000    # net allocations of tracked objects between young-generation passes

_lock = fork_safe(threading.Lock())   # released in a child forked while another thread held it
_active = 0                      # tapes recording now (several threads may each have one)
_saved: tuple | None = None      # the thresholds found when the first of them started


def start() -> None:
    """A tape starts recording: raise the first threshold (the first of several tapes saves the old ones)."""
    global _active, _saved
    with _lock:
        _active += 1
        if _active == 1 and gc.isenabled():
            found = gc.get_threshold()
            if 0 < found[0] < RECORDING_THRESHOLD:
                gc.set_threshold(RECORDING_THRESHOLD, *found[1:])
                _saved = found


def stop() -> None:
    """A tape stops recording: the last one puts the thresholds back, unless someone changed them since."""
    global _active, _saved
    with _lock:
        if _active == 0:
            return
        _active -= 1
        if _active == 0 and _saved is not None:
            if gc.get_threshold()[0] == RECORDING_THRESHOLD:
                gc.set_threshold(*_saved)
            _saved = None


def active() -> int:
    """How many tapes are recording (tests: none once every `with tape:` has exited)."""
    return _active
