"""Adjoints that store: `adjoint_gather_store` and `adjoint_store`, for gradients known to be zero (issue 43).

A gathering stencil adjoint (ad/gather.py) sums what every thread adds into a gathered gradient in
registers and adds it once into the thread's own element: a read, an add and a write of the whole
gradient array. When the gradient is known to be zero before this launch and nothing else adds into it
first (a freshly taken pool buffer, a gradient `tape.zero()` left to zero lazily: runtime/tape/fresh.py
decides), storing the sum gives the same values without zero-filling the array first and without
reading it — the adjoint then moves the bytes of the forward kernel, as JAX's adjoint does.

A plain adjoint's own-element adds (the adjoint of a reduction such as W4's loss, `adj_u[i, j] += 2 u
adj_loss`) are stored likewise (`adjoint_store`). The pass refuses an array (a gathering adjoint: refuses
them all, returning `fn` without a `stored` attribute) unless nothing reads it and its every write is
one unconditional, top-level exclusive add at the thread's own index per component, covering every
component, so each thread writes each of its elements exactly once; that every element has a thread
(the array's shape is the launch grid) is checked where the variant is chosen (runtime/tape/fresh.py).
"""

from __future__ import annotations

from ..core.ir import Function, copy_function
from ..core.ops import MEMORY, Op


def store_plan(fn: Function) -> tuple[int, ...] | None:
    """The parameter positions of the gradients `fn` (an adjoint) may store instead of add, or None. In a
    gathering adjoint these are its gathered arrays, each of which must qualify (else None); in a plain one,
    the arrays that qualify. An array qualifies when nothing reads it and its every write is an unconditional
    (top-level) exclusive add at the thread's own index, one per component, covering every component."""
    gathered = fn.attrs.get("gathered")
    candidates = set(gathered) if gathered else set(range(len(fn.params)))
    ids = {fn.params[k].value.id: k for k in candidates if fn.params[k].value.type.is_array}
    tids = {ins.attrs["axis"]: ins.result.id for ins in fn.body.body if ins.op == Op.TID}
    own = [tids.get(d) for d in range(len(tids))]
    top = {id(ins) for ins in fn.body.body}
    used = {a.id for ins in fn.walk() for a in ins.args} | \
        {y.id for ins in fn.walk() for r in ins.regions for y in r.yields}
    comps: dict[int, list] = {k: [] for k in ids}
    bad = set()
    for ins in fn.walk():
        if ins.op not in MEMORY or not ins.args or ins.args[0].id not in ids:
            continue
        idx = [a.id for a in ins.args[1:-1]]
        if ins.op != Op.ATOMIC or id(ins) not in top or ins.attrs.get("kind") != "add" or \
                not ins.attrs.get("exclusive") or idx != own or ins.result.id in used:
            bad.add(ins.args[0].id)
        else:
            comps[ins.args[0].id].append(ins.attrs.get("comp"))
    for vid, seen in comps.items():
        dtype = fn.params[ids[vid]].value.type.dtype
        want = [0] if dtype.ncomp == 1 else list(range(dtype.ncomp))
        if sorted(0 if c is None else c for c in seen) != want:
            bad.add(vid)
    if gathered and bad:
        return None
    out = tuple(sorted(k for vid, k in ids.items() if vid not in bad))
    return out or None


def store_gathered(fn: Function) -> Function:
    """`fn` with the own-element adds `store_plan` finds turned into stores (`attrs["stored"]`: their
    parameter positions); `fn` itself when it finds none."""
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
