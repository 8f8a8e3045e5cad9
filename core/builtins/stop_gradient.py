"""`stop_gradient`: a private primitive, the identity in value with no derivative. The matrix
decompositions (core/library/decompositions.py) run their iterations on stop_gradient values and add
`W - stop_gradient(W)` steps that carry only a derivative."""

from __future__ import annotations

from .table import Builtin, BuiltinTypeError, register


def _same_type(types, attrs):
    (t,) = types
    if t.is_array or t.is_struct or not t.scalar.is_float:
        raise BuiltinTypeError(f"stop_gradient() needs a float scalar, vector or matrix, got {t.name}")
    return t


register(Builtin(
    "stop_gradient", _same_type, eval=lambda x: x, arity=1, differentiable=False,
    doc="x, with no derivative: forward and reverse mode treat it as a constant",
    decompose=lambda b, args, comps, out_type, attrs: [b.prim("stop_gradient", c) for c in comps[0]],
    expand=lambda b, args, attrs: args[0]))
