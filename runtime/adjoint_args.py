"""The extra arguments of adjoint and tangent launches: one gradient (or dual) array per float array parameter."""

from __future__ import annotations

from ..core.passes.scalarize import user_params


def _source_params(spec, key: str) -> list[int]:
    """For each extra parameter, the index of the user-level parameter it belongs to."""
    cached = spec.fn.attrs.get("_src_" + key)
    if cached is not None:
        return cached
    user = user_params(spec.fn)
    out = [user[k] for k in spec.fn.attrs[key]]
    spec.fn.attrs["_src_" + key] = out
    return out


def _zeros_like(a):
    from .creation import zeros
    return zeros(a.shape, dtype=a.dtype, device=a.device)


def adjoint_arguments(kernel, spec, bound, n_inputs, adj_inputs, adj_outputs, device) -> list:
    """Gradient arrays for an adjoint launch: given adjoints, else each array's `.grad`, else scratch zeros."""
    given = None
    if adj_inputs is not None or adj_outputs is not None:
        ins = list(adj_inputs) if adj_inputs is not None else [None] * n_inputs
        outs = list(adj_outputs) if adj_outputs is not None else [None] * (len(bound) - n_inputs)
        if len(ins) != n_inputs or len(outs) != len(bound) - n_inputs:
            raise ValueError(f"kernel '{kernel.key}': adj_inputs/adj_outputs must have one entry per input/output "
                             f"({n_inputs} and {len(bound) - n_inputs}), got {len(ins)} and {len(outs)}")
        given = ins + outs
    names = [n for n, _ in kernel.params]
    out = []
    for j in _source_params(spec, "adj_of"):
        a = bound[j]
        g = given[j] if given is not None else None
        if g is None:
            g = a.grad if a.grad is not None else _zeros_like(a)
        elif getattr(g, "shape", None) != a.shape or getattr(g, "dtype", None) is not a.dtype:
            raise ValueError(f"kernel '{kernel.key}': adjoint of parameter '{names[j]}' must be a gk.array of "
                             f"shape {a.shape} and dtype {a.dtype.name}")
        out.append(g)
    return out


def tangent_arguments(kernel, spec, args, device) -> list:
    """Dual arrays for a tangent launch (`args` = every array the kernel takes, adjoints included):
    inside gk.ForwardMode the mode allocates/zeroes them on first touch; else `.dual` or scratch zeros."""
    from .state import current as state
    fmode = state.forward_mode
    out = []
    for k in spec.fn.attrs["dual_of"]:
        a = args[k]
        if fmode is not None:
            out.append(fmode.dual_of(a))
        else:
            out.append(a.dual if a.dual is not None else _zeros_like(a))
    return out
