"""IR → IR passes that lower typed IR to what backends compile.

A pass is a named transform (`Pass(name, apply)`), one module each. `run_passes` applies a list of them,
verifying the IR after each and, on request, keeping the printed IR after every pass in
`fn.attrs["pass_log"]` for viz/ and the debugger. `lower(fn)` runs LOWER: inline → scalarize →
simplify → promote (array elements a loop rewrites become loop-carried values) → simplify. The
variants built on top (adjoint, tangent, the backend-ready expansion) are declared in ad/pipeline.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Function, copy_function, format_function
from ..ops import Op
from ..verify import IRError, verify
from .expand import expand
from .inline import inline_calls, inline_region
from .promote import promote_elements
from .scalarize import scalarize
from .simplify import simplify


@dataclass(frozen=True)
class Pass:
    """A named IR → IR transform (it may rewrite its argument in place and return it). `scalar`: every
    value is scalar afterwards, which `verify` then checks."""

    name: str
    apply: Callable[[Function], Function | None]
    scalar: bool = True


def inline_kept_calls(fn: Function) -> Function:
    """Inline the calls lowering kept for AD: what backends compile. Each callee is lowered first, and the
    calls its lowering kept (a custom-gradient function calling another) are inlined into it likewise.
    (Here rather than in inline.py: it runs `lower`, whose pipeline starts with inline.py's pass.)"""
    for ins in fn.walk():
        if ins.op == Op.CALL and "lowered" not in ins.attrs:
            ins.attrs["func"] = inline_kept_calls(lower(ins.attrs["func"]))
            ins.attrs["lowered"] = True
    inline_region(fn.body, {}, keep=lambda ins: False)
    return fn


INLINE = Pass("inline", inline_calls, scalar=False)
SCALARIZE = Pass("scalarize", scalarize)
SIMPLIFY = Pass("simplify", simplify)
PROMOTE = Pass("promote", promote_elements)
INLINE_KEPT = Pass("inline_kept", inline_kept_calls)
EXPAND = Pass("expand", expand)

LOWER = (INLINE, SCALARIZE, SIMPLIFY, PROMOTE, SIMPLIFY)


def run_passes(fn: Function, passes, keep_log: bool = False) -> Function:
    """Apply `passes` in order to a copy of `fn`; each must leave valid IR (verified after it runs)."""
    out = copy_function(fn)
    log = list(fn.attrs.get("pass_log", ())) or [("input", format_function(fn))] if keep_log else []
    for p in passes:
        out = p.apply(out) or out
        try:
            verify(out, scalar_only=p.scalar)
        except IRError as exc:
            raise IRError(f"after pass '{p.name}': {exc}") from None
        if keep_log:
            log.append((p.name, format_function(out)))
    out.attrs.pop("pass_log", None)
    if keep_log:
        out.attrs["pass_log"] = log
    return out


def lower(fn: Function, keep_log: bool = False) -> Function:
    """Typed IR → lowered IR (calls inlined, every value scalar, simplified)."""
    return run_passes(fn, LOWER, keep_log)
