"""Bytes held by live gradkit arrays on every device, and the peak since `reset_peak()` (gk.memory_stats)."""

from __future__ import annotations

import weakref


class _MemoryStats:
    """Bytes held by live gradkit arrays (all devices), and the peak since `reset_peak()`."""

    def __init__(self) -> None:
        self.live = self.peak = 0

    def allocated(self, a) -> None:
        n = a.nbytes
        self.live += n
        self.peak = max(self.peak, self.live)
        weakref.finalize(a, self._freed, n)

    def _freed(self, n: int) -> None:
        self.live -= n

    def reset_peak(self) -> None:
        self.peak = self.live


memory = _MemoryStats()
