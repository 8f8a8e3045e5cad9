"""The `c` example plugin frozen at contract version 1: a test fixture, registered by the tests that use it
(`gradkit.backends.registry.register("c_v1", CBackend)`), never through an entry point."""

from .backend import CBackend

__all__ = ["CBackend"]
