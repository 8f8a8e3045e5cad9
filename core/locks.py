"""One process-wide lock for building IR and compiling: the frontend, the passes and the backends' code
generators share caches (functions' typed IR, lowered variants, specialisations), so a cache miss builds
under this lock (re-entrant: building a kernel builds the functions it calls). Cache hits take no lock.

`compiling()` takes the lock and pauses Python's cyclic garbage collector while the outermost build runs:
a big kernel's IR is hundreds of thousands of objects, and the collections they trigger rescan all of
them, which made building a 2000-statement kernel grow faster than its size (0.66 s -> 1.3 s for 1000 ->
2000 statements' forward passes). Garbage made meanwhile is collected as usual afterwards.

Fork: a child made by `os.fork()` has only the thread that forked, so a lock another thread held at the
fork would stay held there for ever. Every lock gradkit owns is made through `fork_safe`, and the child
releases them all (and resumes the garbage collector a vanished build paused) before any of its code runs."""

import contextlib
import gc
import os
import threading
import weakref

_FORK_SAFE: "weakref.WeakSet" = weakref.WeakSet()      # every live lock made through fork_safe


def fork_safe(lock):
    """`lock` (a threading Lock or RLock), registered to be released in a child made by `os.fork()` when
    a thread that does not exist there held it (gradkit never runs user code under a plain Lock, so one held
    at the fork was held by another thread). Costs nothing per acquire."""
    _FORK_SAFE.add(lock)
    return lock


COMPILING = fork_safe(threading.RLock())
_depth = 0
_paused = False     # whether the outermost build paused the garbage collector


@contextlib.contextmanager
def compiling():
    """COMPILING, with the cyclic garbage collector paused for the outermost holder."""
    global _depth, _paused
    with COMPILING:
        _depth += 1
        paused = _depth == 1 and gc.isenabled()
        if paused:
            gc.disable()
            _paused = True
        try:
            yield
        finally:
            _depth -= 1
            if paused:
                _paused = False
                gc.enable()


def _after_fork_in_child() -> None:
    """Release the locks the parent's other threads held, and forget a build in flight on one of them (it
    will not finish here): its garbage-collector pause ends, a later build starts from the outermost level.
    A lock the forking thread itself holds (an RLock it owns) stays held: that thread goes on in the child."""
    global _depth, _paused
    forker_builds = COMPILING._is_owned()
    for lock in list(_FORK_SAFE):
        if not (hasattr(lock, "_is_owned") and lock._is_owned()):
            lock._at_fork_reinit()
    if not forker_builds:
        _depth = 0
        if _paused:
            _paused = False
            gc.enable()


if hasattr(os, "register_at_fork"):      # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
