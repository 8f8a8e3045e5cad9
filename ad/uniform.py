"""Adjoints seeded with one value for every element of a gradient (`launch(..., adjoint=True,
adj_outputs=[1.0])`): the seed is a scalar parameter instead of an array the caller fills and the adjoint
reads back, one pass over memory fewer (Dr.Jit folds `backward_from`'s 1 into its gradient kernel the same
way; JAX's XLA folds a ones cotangent).

A gradient folds when the adjoint only reads it, or resets it to zero after reading (an output the kernel
overwrites): each load becomes the parameter, each reset goes. Anything else — an adjoint that adds into
it (the array is also read by the kernel), asks its shape, or passes it on — raises NotUniform, and the
launch fills an array with the seed instead.
"""

from __future__ import annotations

from ..core.ir import Function, Region, Value, copy_function
from ..core.ops import Op


class NotUniform(ValueError):
    """The adjoint uses a gradient array as more than a value to read: the seed must be materialised."""


def uniform_adjoint(fn: Function, params: tuple[int, ...]) -> Function:
    """A copy of adjoint `fn` in which the array parameters at `params` (positions in fn.params, float
    arrays of scalars) are scalars: the value every element of that gradient holds."""
    out = copy_function(fn, fn.name)
    scalars: dict[int, Value] = {}
    for k in params:
        p = out.params[k]
        t = p.type
        if not (t.is_array and t.dtype.is_scalar and t.dtype.is_float):
            raise NotUniform(f"'{p.name}' is not an array of float scalars")
        old = p.value
        p.type = t.dtype
        p.value = Value(t.dtype, p.name)
        scalars[old.id] = p.value
    renamed: dict[int, Value] = {}
    _rewrite(out.body, scalars, renamed)
    out.attrs["uniform_seeds"] = tuple(params)
    return out


def _rewrite(region: Region, scalars: dict[int, Value], renamed: dict[int, Value]) -> None:
    body = []
    for ins in region.body:
        target = ins.args[0].id if ins.args else None
        if target in scalars and ins.op == Op.LOAD:
            renamed[ins.result.id] = scalars[target]
            continue
        if target in scalars and ins.op == Op.STORE and ins.args[-1].const_value == 0:
            continue                                        # the adjoint's reset of an overwritten output
        if any(a.id in scalars for a in ins.args):
            where = f" at {ins.loc}" if ins.loc else ""
            raise NotUniform(f"the adjoint's '{ins.name}'{where} uses the gradient as an array")
        ins.args = [renamed.get(a.id, a) for a in ins.args]
        for r in ins.regions:
            _rewrite(r, scalars, renamed)
        body.append(ins)
    region.body = body
    region.yields = [renamed.get(y.id, y) for y in region.yields]
