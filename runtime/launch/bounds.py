"""Out-of-bounds indices found at launch, for the price of a few integer operations per launch, not per
element: an access the kernel makes unconditionally (at the top level of its body) at an index affine in
one thread coordinate (`x[i]`, `x[i + 1]`, `x[2 * i - 1]`, `x[3]`) touches exactly the range its extreme
threads touch, so comparing those two ends with the array's shape proves the whole launch in bounds or
names the access that is not (IndexError with kernel, array, line), before anything runs. Guarded or
data-dependent indices are left to `gk.config.debug`'s per-access checks."""

from __future__ import annotations

from dataclasses import dataclass

from ...backends.base import bounds_sites
from ...core.ir import Function
from ...core.ops import MEMORY, Op


@dataclass(frozen=True, slots=True)
class Access:
    """One unconditional array access: parameter position, which index of the array, and the index as
    scale * tid[axis] + offset (axis None: a constant)."""

    param: int
    dim: int
    axis: int | None
    scale: int
    offset: int
    line: str


def _affine(v, defs: dict) -> tuple | None:
    """(tid axis or None, scale, offset) for an int32 index value, or None when it is not affine."""
    ins = defs.get(v.id)
    if ins is None or not v.type.is_scalar or not v.type.is_int:
        return None
    if ins.op == Op.TID:
        return (ins.attrs["axis"], 1, 0)
    if ins.op == Op.CONST:
        return (None, 0, int(ins.attrs["value"]))
    if ins.op != Op.PRIM or ins.attrs["name"] not in ("add", "sub", "mul", "neg"):
        return None
    args = [_affine(a, defs) for a in ins.args]
    if any(a is None for a in args):
        return None
    name = ins.attrs["name"]
    if name == "neg":
        axis, s, c = args[0]
        return (axis, -s, -c)
    (ax, sa, ca), (bx, sb, cb) = args
    if name == "mul":
        if ax is not None and bx is not None:
            return None
        k, (axis, s, c) = (ca, args[1]) if ax is None else (cb, args[0])
        return (axis, s * k, c * k) if axis is not None else (None, 0, ca * cb)
    sign = 1 if name == "add" else -1
    if ax is not None and bx is not None and ax != bx:
        return None
    axis = ax if ax is not None else bx
    return (axis, sa + sign * sb, ca + sign * cb)


def scan(fn: Function) -> tuple[tuple[Access, ...], frozenset]:
    """The unconditional affine index forms of a lowered kernel, each checked at launch, and the positions
    in bounds_sites(fn) of the accesses all of whose indices are among them: a launch proves those whole,
    so `gk.config.debug`'s per-access checks can leave them out (CompileOptions.proven)."""
    params = {p.value.id: k for k, p in enumerate(fn.params) if p.type.is_array}
    defs = {r.id: ins for ins in fn.body.body for r in ins.results}
    site = {id(ins): k for k, ins in enumerate(bounds_sites(fn))}
    found, whole = [], set()
    for ins in fn.body.body:
        if ins.op not in MEMORY or ins.args[0].id not in params:
            continue
        k = params[ins.args[0].id]
        idx = ins.args[1:] if ins.op == Op.LOAD else ins.args[1:-1]
        if len(idx) != fn.params[k].type.ndim:
            continue
        line = f"{ins.loc.file}:{ins.loc.line}" if ins.loc is not None else "an unknown line"
        forms = [_affine(v, defs) for v in idx]
        found.extend(Access(k, d, *form, line) for d, form in enumerate(forms) if form is not None)
        if all(form is not None for form in forms):
            whole.add(site[id(ins)])
    return tuple(found), frozenset(whole)


def plan(found: tuple[Access, ...]) -> tuple[tuple, tuple[Access, ...]]:
    """Split accesses for the launch's hot path: `x[i + c]` (scale 1, c >= 0: the common case) becomes one
    requirement `(param, dim, axis, c)`, meaning extent >= grid[axis] + c, merged per array axis; every
    other access is checked in full by `check` each launch."""
    need: dict[tuple, int] = {}
    rest = []
    ends: dict[tuple, list] = {}        # (param, dim) -> [lowest, highest] constant index access
    for a in found:
        if a.axis is not None and a.scale == 1 and a.offset >= 0:
            key = (a.param, a.dim, a.axis)
            need[key] = max(need.get(key, 0), a.offset)
        elif a.axis is None:
            # constant indices (`x[3]`, ti.static-unrolled `w[i, j]`): the two extremes per array axis decide
            # for all of them (`check` is given the full list to name the first one out of range)
            end = ends.get((a.param, a.dim))
            if end is None:
                ends[(a.param, a.dim)] = end = [a, a]
                rest.append(end)
            elif a.offset < end[0].offset:
                end[0] = a
            elif a.offset > end[1].offset:
                end[1] = a
        else:
            rest.append(a)
    out = []
    for a in rest:
        out.extend(dict.fromkeys(a) if isinstance(a, list) else (a,))
    return tuple((*k, c) for k, c in need.items()), tuple(out)


def check(kernel_name: str, fn: Function, checks: tuple[Access, ...], dims: tuple, args, full=None) -> None:
    """Raise IndexError for the first access that leaves its array on this launch grid; with `full` (the
    kernel's whole list of accesses, `checks` being a summary of them), for the first of `full`."""
    if full is not None:
        try:
            check(kernel_name, fn, checks, dims, args)
        except IndexError:
            check(kernel_name, fn, full, dims, args)
            raise
        return
    for a in checks:
        if a.axis is None:
            lo = hi = a.offset
        else:
            if a.axis >= len(dims):
                continue
            last = a.scale * (dims[a.axis] - 1) + a.offset
            lo, hi = (a.offset, last) if a.scale >= 0 else (last, a.offset)
        size = args[a.param].shape[a.dim]
        if lo < 0 or hi >= size:
            name = fn.params[a.param].name
            bad = lo if lo < 0 else hi
            raise IndexError(
                f"kernel '{kernel_name}': index {bad} out of range for axis {a.dim} of array '{name}' with extent "
                f"{size} at {a.line} (found before the launch, on the grid {tuple(dims)}: nothing ran); launch "
                "over the array's shape, or guard the access")
