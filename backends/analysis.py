"""Analyses of lowered IR that backends share: which atomics are reductions onto one element, and which
arrays a kernel only ever scatter-adds into. Both let a backend replace contended atomics."""

from __future__ import annotations

from ..core.ir import Function, used_ids


def scatter_arrays(fn: Function) -> set:
    """Float arrays a kernel only ever scatter-adds into (atomic add/sub, old value unused, no other
    access): each worker thread adds into its own buffer without atomics, summed after the launch."""
    used = used_ids(fn)
    index = {p.value.id: k for k, p in enumerate(fn.params)}
    ok, bad = set(), set()
    scatter = False
    for ins in fn.walk():
        if ins.op == "native":          # opaque code: its arrays are not privatised
            bad.update(index[a.id] for a in ins.args if a.id in index)
            continue
        if ins.op not in ("load", "store", "atomic") or ins.args[0].id not in index:
            continue
        k = index[ins.args[0].id]
        fine = (ins.op == "atomic" and ins.attrs["kind"] in ("add", "sub")
                and ins.args[0].type.scalar.is_float and ins.result.id not in used
                and not all(i.const_value is not None for i in ins.args[1:1 + ins.args[0].type.ndim]))
        (ok if fine else bad).add(k)
        scatter |= fine and not ins.attrs.get("exclusive")
    return (ok - bad) if scatter else set()


def reduction_sites(fn: Function) -> dict:
    """Atomic adds/subs whose element is fixed (constant indices) and whose old value is unused: they
    become partial sums (float32 summed in float64) plus one atomic per chunk of threads.

    Only arrays the kernel touches in no other way qualify: then no thread can observe that its
    contribution is deferred to the end of its chunk (`atomic_add(loss, 0, v); seen[i] = loss[0]` must
    see its own add), and summing per chunk only reassociates a sum whose order atomics leave open.
    Returns id(instruction) -> (array value id, constant index, component)."""
    used = used_ids(fn)
    params = {p.value.id for p in fn.params}
    out = {}
    for ins in fn.walk():
        if ins.op != "atomic" or ins.attrs["kind"] not in ("add", "sub") or ins.attrs.get("exclusive"):
            continue
        arr = ins.args[0]
        idx = ins.args[1:1 + arr.type.ndim]
        if arr.id not in params or ins.result.id in used or any(i.const_value is None for i in idx):
            continue
        out[id(ins)] = (arr.id, tuple(i.const_value for i in idx), ins.attrs["comp"])
    touched_otherwise = {ins.args[0].id for ins in fn.walk()
                         if ins.op in ("load", "store", "atomic") and id(ins) not in out}
    touched_otherwise.update(a.id for ins in fn.walk() if ins.op == "native" for a in ins.args)
    return {k: key for k, key in out.items() if key[0] not in touched_otherwise}
