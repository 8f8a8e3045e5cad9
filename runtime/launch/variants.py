"""`choose_variant`: the one place that decides which variant of a kernel a launch runs (ad/variants.py).

`gk.launch`, the tape's prepared adjoints, `Kernel.source` and debug bundles all ask here, so the code a
bundle shows is the code that ran, and a new variant-making pass adds one branch here, nowhere else.
"""

from __future__ import annotations

from ...ad.variants import ADJOINT, FORWARD, FORWARD_TANGENT, VariantKey, variant_key
from ...core.passes.scalarize import user_params
from .adjoint_args import is_seed


def choose_variant(kernel, bound, dims: tuple, dev, *, adjoint: bool = False, tangent: bool = False,
                   consume: bool = False, shared: bool = False, given: list | None = None) -> VariantKey:
    """The variant a launch of `kernel` over `dims` with arguments `bound` on `dev` runs:
    - forward, or forward_tangent under forward mode (`tangent`);
    - for an adjoint: `consume` when asked and the plain adjoint left a reset out (ad/consume.py);
      `shared` when the caller found two written arrays sharing memory (own-element adds atomic again);
      `gather` when the stencil adjoint gathers (ad/gather.py), the device's backend prefers gathers and the
      arrays gathered into have the grid's shape (what makes the gather cover every element), and the
      adjoint neither consumes, is shared nor is differentiated;
    - seeds: the adjoint parameters whose `given` gradient is a number, folded to a scalar where the
      adjoint only reads it (ad/uniform.py)."""
    if not adjoint:
        return FORWARD_TANGENT if tangent else FORWARD
    consume = consume and bool(kernel.consumable())
    gather = False
    if not (consume or shared or tangent) and dev.impl.prefers_gather:
        sources = kernel.gather_sources()
        gather = bool(sources) and all(tuple(bound[j].shape) == dims for j in sources)
    key = variant_key(True, tangent, gather, shared, consume) if (tangent or gather or shared or consume) \
        else ADJOINT
    if given is not None and not tangent:
        key = _seeded(kernel, key, given)
    return key


def _seeded(kernel, base: VariantKey, given: list) -> VariantKey:
    """`base`, or its variant taking the numbers `given` as adjoints as scalars when the adjoint only reads
    those gradients."""
    if not any(is_seed(g) for g in given):
        return base
    fn = kernel.lowered(base)
    user, of = user_params(fn), fn.attrs["adj_of"]
    first = len(fn.params) - len(of)
    positions = tuple(first + m for m, k in enumerate(of) if is_seed(given[user[k]]))
    return kernel.seeded(base, positions) if positions else base
