"""One process-wide lock for building IR and compiling: the frontend, the passes and the backends' code
generators share caches (functions' typed IR, lowered variants, specialisations), so a cache miss builds
under this lock (re-entrant: building a kernel builds the functions it calls). Cache hits take no lock.

`compiling()` takes the lock and pauses Python's cyclic garbage collector while the outermost build runs:
a big kernel's IR is hundreds of thousands of objects, and the collections they trigger rescan all of
them, which made building a 2000-statement kernel grow faster than its size (0.66 s -> 1.3 s for 1000 ->
2000 statements' forward passes). Garbage made meanwhile is collected as usual afterwards."""

import contextlib
import gc
import threading

COMPILING = threading.RLock()
_depth = 0


@contextlib.contextmanager
def compiling():
    """COMPILING, with the cyclic garbage collector paused for the outermost holder."""
    global _depth
    with COMPILING:
        _depth += 1
        paused = _depth == 1 and gc.isenabled()
        if paused:
            gc.disable()
        try:
            yield
        finally:
            _depth -= 1
            if paused:
                gc.enable()
