"""IR → IR passes that lower typed IR to what backends compile.

`lower(fn)` runs: inline → scalarize → simplify → promote (array elements a loop rewrites become
loop-carried values) → simplify, verifying after each, and
keeps the IR after every pass (by name) in `fn.attrs["pass_log"]` for viz/ and the debugger.
"""

from __future__ import annotations

from ..ir import Function, copy_function, format_function, verify
from .inline import inline_calls
from .promote import promote_elements
from .scalarize import scalarize
from .simplify import simplify

PIPELINE = [("inline", inline_calls), ("scalarize", scalarize), ("simplify", simplify),
            ("promote", promote_elements), ("simplify", simplify)]


def run_passes(fn: Function, passes, keep_log: bool = False) -> Function:
    """Apply named passes in order to a copy of `fn`; each must leave valid IR."""
    out = copy_function(fn)
    log = [("input", format_function(fn))] if keep_log else []
    for name, p in passes:
        out = p(out) or out
        verify(out, scalar_only=name in ("scalarize", "simplify", "promote") or out.attrs.get("scalar", False))
        if keep_log:
            log.append((name, format_function(out)))
    if keep_log:
        out.attrs["pass_log"] = log
    return out


def lower(fn: Function, keep_log: bool = False) -> Function:
    """Typed IR → lowered IR (calls inlined, every value scalar, simplified)."""
    return run_passes(fn, PIPELINE, keep_log)
