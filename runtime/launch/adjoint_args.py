"""The extra arguments of adjoint and tangent launches: one gradient (or dual) array per float array parameter."""

from __future__ import annotations

import numpy as np



def _zeros_like(a):
    from ..arrays.creation import zeros
    return zeros(a.shape, dtype=a.dtype, device=a.device)


def _full_like(a, value):
    from ..arrays.creation import full
    return full(a.shape, value, dtype=a.dtype, device=a.device)


def given_adjoints(kernel, n_args, n_inputs, adj_inputs, adj_outputs) -> list | None:
    """The adjoints the caller gave, one entry (or None) per user-level parameter; None when none given."""
    if adj_inputs is None and adj_outputs is None:
        return None
    ins = list(adj_inputs) if adj_inputs is not None else [None] * n_inputs
    outs = list(adj_outputs) if adj_outputs is not None else [None] * (n_args - n_inputs)
    if len(ins) != n_inputs or len(outs) != n_args - n_inputs:
        raise ValueError(f"kernel '{kernel.key}': adj_inputs/adj_outputs must have one entry per input/output "
                         f"({n_inputs} and {n_args - n_inputs}), got {len(ins)} and {len(outs)}")
    return ins + outs


def is_seed(g) -> bool:
    """A number given as an array's adjoint: every element's gradient is that value."""
    return isinstance(g, (int, float, np.integer, np.floating)) and not isinstance(g, (bool, np.bool_))


def adjoint_arguments(kernel, spec, bound, given: list | None) -> list:
    """Gradient arrays for an adjoint launch: the `given` adjoints (given_adjoints), else each array's
    `.grad`, else scratch zeros. A number given for an array is its every element's gradient: a scalar
    argument where the variant folded it, else an array filled with it."""
    names = [n for n, _ in kernel.params]
    sources = spec.adjoint_sources
    first = len(spec.fn.params) - len(sources)
    out = []
    for m, j in enumerate(sources):
        a = bound[j]
        g = given[j] if given is not None else None
        if g is None:
            g = a.grad if a.grad is not None else _zeros_like(a)
        elif is_seed(g):
            t = spec.fn.params[first + m].type
            g = t.np_dtype.type(g) if t.is_scalar else _full_like(a, g)
        elif getattr(g, "shape", None) != a.shape or getattr(g, "dtype", None) is not a.dtype:
            raise ValueError(f"kernel '{kernel.key}': adjoint of parameter '{names[j]}' must be a gk.array of "
                             f"shape {a.shape} and dtype {a.dtype.name}, or a number (every element's gradient)")
        out.append(g)
    return out


def tangent_arguments(kernel, spec, args, device) -> list:
    """Dual arrays for a tangent launch (`args` = every array the kernel takes, adjoints included):
    inside gk.ForwardMode the mode allocates/zeroes them on first touch; else `.dual` or scratch zeros."""
    from ..state import current as state
    fmode = state.forward_mode
    out = []
    for k in spec.fn.attrs["dual_of"]:
        a = args[k]
        if fmode is not None:
            out.append(fmode.dual_of(a))
        else:
            out.append(a.dual if a.dual is not None else _zeros_like(a))
    return out
