"""Visualisation: tape graphs and kernel IR graphs as GraphViz DOT, and debug bundles."""

from __future__ import annotations

from .bundle import load_bundle
from .capture import Capture
from .kernel_graph import kernel_graph
from .tape_graph import tape_graph

__all__ = ["Capture", "kernel_graph", "tape_graph", "load_bundle"]
