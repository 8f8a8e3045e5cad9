"""The LLVM CPU backend plugin, registered as `cpu` in the `gradkit.backends` entry-point group."""

from .backend import CPUBackend

__all__ = ["CPUBackend"]
