"""Host memory for the CPU backend: the shared host buffers of backends/host_memory.py (64-byte aligned
NumPy buffers, zero-copy views for gradkit arrays; adopted arrays must be 64-byte aligned)."""

from __future__ import annotations

from ..host_memory import ALIGN, HostBuffer, HostMemory, physical_memory

__all__ = ["ALIGN", "HostBuffer", "HostMemory", "physical_memory"]
