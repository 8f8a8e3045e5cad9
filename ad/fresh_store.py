"""Gathering adjoints that store: `adjoint_gather_store`, for gradients known to be zero (issue 43).

A gathering stencil adjoint (ad/gather.py) sums what every thread adds into a gathered gradient in
registers and adds it once into the thread's own element: a read, an add and a write of the whole
gradient array. When the gradient is known to be zero before this launch and nothing else adds into it
first (a freshly taken pool buffer, a gradient `tape.zero()` left to zero lazily: runtime/tape/fresh.py
decides), storing the sum gives the same values without zero-filling the array first and without
reading it — the adjoint then moves the bytes of the forward kernel, as JAX's adjoint does.

The pass only changes the gathered adds; it refuses (returns `fn`, no `stored` attribute) unless each
gathered array's every write is one unconditional, top-level exclusive add at the thread's own index
per component, covering every component, so each thread of the grid (the gathered arrays' shape, checked
at launch) writes each of its elements exactly once.
"""

from __future__ import annotations

from ..core.ir import Function, copy_function
from ..core.ops import WRITES, Op


def store_plan(fn: Function) -> tuple[int, ...] | None:
    """The parameter positions of the gathered gradients of `fn` (an `adjoint_gather` function) whose
    every write is a top-level own-element add over all components, or None when any is not."""
    gathered = fn.attrs.get("gathered")
    if not gathered:
        return None
    ids = {fn.params[k].value.id: k for k in gathered}
    tids = {ins.attrs["axis"]: ins.result.id for ins in fn.body.body if ins.op == Op.TID}
    own = [tids.get(d) for d in range(len(tids))]
    top = {id(ins) for ins in fn.body.body}
    used = {a.id for ins in fn.walk() for a in ins.args} | \
        {y.id for ins in fn.walk() for r in ins.regions for y in r.yields}
    comps: dict[int, list] = {k: [] for k in ids}
    for ins in fn.walk():
        if ins.op not in WRITES or ins.args[0].id not in ids:
            continue
        idx = [a.id for a in ins.args[1:-1]]
        if id(ins) not in top or ins.op != Op.ATOMIC or ins.attrs.get("kind") != "add" or \
                not ins.attrs.get("exclusive") or idx != own or ins.result.id in used:
            return None
        comps[ins.args[0].id].append(ins.attrs.get("comp"))
    for vid, seen in comps.items():
        dtype = fn.params[ids[vid]].value.type.dtype
        want = [0] if dtype.ncomp == 1 else list(range(dtype.ncomp))
        if sorted(0 if c is None else c for c in seen) != want:
            return None
    return tuple(sorted(gathered))


def store_gathered(fn: Function) -> Function:
    """`fn` with its gathered own-element adds turned into stores (`attrs["stored"]`: their parameter
    positions); `fn` itself when `store_plan` refuses."""
    positions = store_plan(fn)
    if positions is None:
        return fn
    out = copy_function(fn)
    ids = {out.params[k].value.id for k in positions}
    for ins in out.body.body:
        if ins.op == Op.ATOMIC and ins.args[0].id in ids:
            ins.op, ins.results = Op.STORE, []
            ins.attrs = {"comp": ins.attrs.get("comp")}
    out.attrs["stored"] = positions
    return out
