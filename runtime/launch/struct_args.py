"""Struct arguments of a launch: a kernel parameter of a `@gk.struct` type is compiled as one parameter
per field (`b.pos`, `b.forces`, ...), so a launch passes a struct instance as its field values — arrays
by reference, so gradients land in the struct's array fields (`b.forces.grad`, also `b.grad.forces`)."""

from __future__ import annotations

from ...core.struct import flatten, instance
from ..arrays.struct_array import StructArray


def flatten_struct_args(structs, n_flat, inputs, outputs, adj_inputs=None, adj_outputs=None):
    """(inputs, outputs, adj_inputs, adj_outputs) with each struct argument at a position in `structs`
    ((user parameter index, name, StructType), ...) replaced by its field values; an adjoint list may
    hold, at a struct's position, that struct's gradients (an instance, e.g. `b.grad`) or None.
    Arguments already flat (`n_flat` of them, no struct instance where one goes: a tape replaying a
    recorded launch) pass through."""
    at = {k: (name, t) for k, name, t in structs}
    n_in = len(inputs)
    args = [*inputs, *outputs]
    if len(args) == n_flat and not any(k < len(args) and _whole(args[k], t) for k, _, t in structs):
        return inputs, outputs, adj_inputs, adj_outputs

    def expand(values, offset, adjoint=False):
        if values is None:
            return None
        out = []
        for j, v in enumerate(values):
            name, t = at.get(j + offset, (None, None))
            if t is None:
                out.append(v)
            elif adjoint and v is None:
                out += [None] * len((t.dtype if t.is_array else t).flat(name))
            elif t.is_array:
                if not _whole(v, t):
                    raise TypeError(f"{'adjoint of ' if adjoint else ''}parameter '{name}' must be a {t.ndim}-D "
                                    f"gk.array(dtype={t.dtype.name}), got {_describe(v)}")
                out += v.flat_arrays()
            else:
                out += flatten(v, t, f"{'adjoint of ' if adjoint else ''}parameter '{name}'")
        return out
    return (expand(inputs, 0), expand(outputs, n_in), expand(adj_inputs, 0, True),
            expand(adj_outputs, n_in, True))


def _whole(v, t) -> bool:
    """v is what a struct (or array of structs) parameter of type t takes, before flattening."""
    if t.is_array:
        return isinstance(v, StructArray) and v.dtype is t.dtype and v.ndim == t.ndim
    return isinstance(instance(v, t), t.cls)      # an instance, or an object standing for one (a grid)


def _describe(v) -> str:
    if isinstance(v, StructArray):
        return f"a {v.ndim}-D array of {v.dtype.name}"
    return type(v).__name__
