"""Visualisation: tape graphs and kernel IR graphs as GraphViz DOT, and debug bundles."""

from __future__ import annotations


def kernel_graph(kernel, adjoint: bool = False, filename=None) -> str:
    """DOT source of a kernel's IR data flow (or its adjoint's)."""
    from .kernel_graph import kernel_graph as _kg
    return _kg(kernel, adjoint=adjoint, filename=filename)


def tape_graph(tape, **kwargs) -> str:
    """DOT source of a tape's launches and arrays (what `Tape.visualize` returns)."""
    from .tape_graph import tape_graph as _tg
    return _tg(tape, **kwargs)


def load_bundle(path):
    """Load and validate a debug bundle written by `Tape.save` (never unpickles)."""
    from .bundle import load_bundle as _lb
    return _lb(path)
