"""The declared pass pipeline: how each kernel variant is built from typed IR, one named pass at a time.

    forward_ad       typed IR → LOWER (inline, scalarize, simplify, promote, simplify); calls with
                     custom gradient rules stay calls, for reverse mode to see them
    forward          forward_ad → inline_kept → simplify          (only when calls were kept)
    adjoint          forward_ad → reverse                         (ad/reverse.py)
    adjoint_gather   adjoint → gather → simplify                  (ad/gather.py; only for stencil adjoints)
    adjoint_gather_store  adjoint_gather → store: the gathered sums stored, not added, for gradients the
                     tape knows are zero and first written by this launch (ad/fresh_store.py)
    adjoint_store    adjoint → store: the same for a plain adjoint's own-element adds (a reduction's input)
    adjoint_shared   adjoint → shared: its own-element adds atomic again, for launches where two written
                     arrays share memory (runtime/launch/launch.py; only when it has such adds)
    adjoint_consume  forward_ad → consume: reverse mode where every overwriting store resets the gradient
                     it read, for taped launches whose written memory an earlier launch used (ad/consume.py;
                     launched only when the plain adjoint left a reset out), with _shared / _tangent /
                     _shared_tangent forms as above
    forward_tangent  forward → tangent                            (ad/forward.py)
    adjoint_tangent  adjoint → tangent                            (and adjoint_shared_tangent)
    <adjoint>@u<k>   an adjoint → uniform → simplify              (ad/uniform.py; gradients seeded with one
                     value, launch(..., adjoint=True, adj_outputs=[1.0]))
    backend stage    any variant → expand → simplify              (core/passes/expand.py; only when it
                     has primitives to expand that the backend does not implement)

Every pass is verified after it runs (`run_passes`), and `variant_log` replays a variant with the IR
printed after every pass, AD included, for the debugger.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ..core.ir import Function
from ..core.ops import Op
from ..core.passes import EXPAND, INLINE_KEPT, LOWER, SIMPLIFY, Pass, run_passes
from ..core.passes.expand import expand, needs_expansion
from ..core.passes.shifts import has_exclusive_adds, without_exclusive_adds
from .consume import consuming_adjoint
from .forward import tangent_function
from .fresh_store import store_gathered, store_plan
from .gather import gather_adjoint, gather_plan
from .reverse import adjoint_function
from .uniform import uniform_adjoint
from .variants import SEEDED, VariantKey

REVERSE = Pass("reverse", adjoint_function)
GATHER = Pass("gather", gather_adjoint)
TANGENT = Pass("tangent", tangent_function)
SHARED = Pass("shared", without_exclusive_adds)
CONSUME = Pass("consume", consuming_adjoint)
STORE = Pass("store", store_gathered)


def _keeps_calls(fn: Function) -> bool:
    return any(i.op == Op.CALL for i in fn.walk())


@dataclass(frozen=True)
class Variant:
    """A kernel variant: the variant it starts from (None: the typed IR) and the passes applied to it,
    only `when` the source needs them (otherwise the variant is its source)."""

    source: str | None
    passes: tuple[Pass, ...]
    when: Callable[[Function], bool] | None = None


VARIANTS: dict[str, Variant] = {
    "forward_ad": Variant(None, LOWER),
    "forward": Variant("forward_ad", (INLINE_KEPT, SIMPLIFY), when=_keeps_calls),
    "adjoint": Variant("forward_ad", (REVERSE,)),
    # the adjoint with shifted atomic adds (stencils) as gathers; launched only where the gathered arrays'
    # shape is the launch grid (fn.attrs["gather_sources"]; runtime/launch/launch.py adjoint_variant)
    "adjoint_gather": Variant("adjoint", (GATHER, SIMPLIFY), when=lambda fn: gather_plan(fn) is not None),
    "adjoint_gather_store": Variant("adjoint_gather", (STORE,), when=lambda fn: store_plan(fn) is not None),
    "adjoint_store": Variant("adjoint", (STORE,), when=lambda fn: store_plan(fn) is not None),
    "adjoint_shared": Variant("adjoint", (SHARED,), when=has_exclusive_adds),
    "forward_tangent": Variant("forward", (TANGENT,)),
    "adjoint_tangent": Variant("adjoint", (TANGENT,)),
    "adjoint_shared_tangent": Variant("adjoint_shared", (TANGENT,)),
    "adjoint_consume": Variant("forward_ad", (CONSUME,)),
    "adjoint_consume_shared": Variant("adjoint_consume", (SHARED,), when=has_exclusive_adds),
    "adjoint_consume_tangent": Variant("adjoint_consume", (TANGENT,)),
    "adjoint_consume_shared_tangent": Variant("adjoint_consume_shared", (TANGENT,)),
}


# Variant names are spelled in one place, VariantKey.name (ad/variants.py); "<adjoint variant>@u<k>,<k>" is
# the adjoint with the gradients at adjoint-parameter positions k taken as one value each (ad/uniform.py;
# runtime/launch/variants.py picks it for scalar adj_outputs).


def seeded_variant(source: Function, positions: tuple[int, ...], keep_log: bool = False) -> Function:
    """Adjoint `source` with the gradients at `positions` folded to scalars; NotUniform when one cannot."""
    return run_passes(source, (Pass("uniform", functools.partial(uniform_adjoint, params=positions)), SIMPLIFY),
                      keep_log)


def build_variant(name: str, source: Function, keep_log: bool = False) -> Function:
    """Variant `name` from its source's IR (the typed IR for forward_ad)."""
    v = VARIANTS[name]
    if v.when is not None and not v.when(source):
        return source
    return run_passes(source, v.passes, keep_log)


@functools.cache
def backend_passes(native_prims: frozenset = frozenset()) -> tuple[Pass, ...]:
    """The passes between a variant and a backend: expand what the backend does not implement itself."""
    ex = EXPAND if not native_prims else Pass("expand", functools.partial(expand, keep=native_prims))
    return (ex, SIMPLIFY)


def for_backend(fn: Function, native_prims: frozenset = frozenset(), keep_log: bool = False) -> Function:
    """`fn` as a backend compiles it (the same object when there is nothing to expand)."""
    if not needs_expansion(fn, native_prims):
        return fn
    return run_passes(fn, backend_passes(native_prims), keep_log)


def variant_log(typed: Function, name: str, native_prims: frozenset | None = None) -> list[tuple[str, str]]:
    """The printed IR after every pass that builds variant `name` from typed IR, source variants first;
    with `native_prims` given, the backend stage too. For display: nothing is cached."""
    seeds = VariantKey.parse(name).seeds if SEEDED in name else ()
    chain, step = [], VariantKey.parse(name).unseeded.name if seeds else name
    while step is not None:
        chain.append(step)
        step = VARIANTS[step].source
    fn = typed
    for step in reversed(chain):
        fn = build_variant(step, fn, keep_log=True)
    if seeds:
        fn = seeded_variant(fn, seeds, keep_log=True)
    if native_prims is not None:
        fn = for_backend(fn, native_prims, keep_log=True)
    return list(fn.attrs.get("pass_log", ()))
