"""`gk.ScopedTimer`: times a block and, inside a recording tape, opens a scope named after it."""

from __future__ import annotations

from ..state import current as state


class ScopedTimer:
    """Times a block (prints when `print=True`) and, inside a recording tape, opens a scope named after it;
    `elapsed` holds the time in milliseconds afterwards.

    Args:
        name: the block's name, printed and used as the tape scope's label.
        print: print "NAME took X ms" when the block ends.
        synchronize: wait for the current device's launches to finish before stopping the clock."""

    def __init__(self, name: str, print: bool = True, synchronize: bool = False):
        self.name, self.print, self.synchronize = name, print, synchronize
        self.elapsed = 0.0
        self._tape = None

    def __enter__(self) -> "ScopedTimer":
        import time
        self._tape = state.tape
        if self._tape is not None:
            self._tape.record_scope_begin(self.name)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        import time
        if self.synchronize:
            from ..launch.device import synchronize
            synchronize()
        self.elapsed = (time.perf_counter() - self._t0) * 1e3
        if self._tape is not None:
            self._tape.record_scope_end()
        if self.print:
            print(f"{self.name} took {self.elapsed:.2f} ms")
