"""The skeleton every derived kernel (adjoint, tangent) starts from: the forward kernel's parameters, then
one extra array per float array parameter (its `adj_` / `dual_` array), in one empty kernel.

Reverse and forward mode fill the body; this module owns the parameter layout and the attrs (`adj_of` /
`dual_of` name, for each extra array, the forward parameter it belongs to), so both modes agree on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.ir import Function, Param, Region, Value, copy_function


@dataclass
class Derived:
    """A derived kernel under construction.

    Args:
        fwd: a private copy of the forward kernel, which the pass may annotate or rewrite.
        fn: the derived kernel: params = fwd's params + the extra arrays; body empty.
        extra: forward array param value id -> its extra array's value in `fn`.
        primal: forward param value id -> the same param's value in `fn`.
    """

    fwd: Function
    fn: Function
    extra: dict[int, Value]
    primal: dict[int, Value]


def derived_kernel(fwd: Function, suffix: str, prefix: str, of_key: str) -> Derived:
    """`<fwd.name>_<suffix>(params..., <prefix><name> for each float array param)`, with fwd's attrs but its
    pass log, and `attrs[of_key]` listing the forward parameter index of each extra array."""
    fwd = copy_function(fwd)
    params = [Param(p.name, p.type) for p in fwd.params]
    extra, of = [], []
    for k, p in enumerate(fwd.params):
        if p.type.is_array and p.type.scalar.is_float:
            extra.append(Param(f"{prefix}{p.name}", p.type))
            of.append(k)
    fn = Function(f"{fwd.name}_{suffix}", params + extra, Region(), [], "kernel", fwd.loc)
    fn.attrs = {k: v for k, v in fwd.attrs.items() if k != "pass_log"}
    fn.attrs[of_key] = of
    return Derived(fwd, fn, {fwd.params[k].value.id: q.value for k, q in zip(of, extra)},
                   {p.value.id: q.value for p, q in zip(fwd.params, params)})
