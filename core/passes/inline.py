"""Inline every `call` of a @gk.func (except those with custom gradients or native code)."""

from __future__ import annotations

from ..ir import Function, Instr, Region, Value, copy_instr
from ..ops import Op


def has_custom_rules(ins: Instr) -> bool:
    """A call the AD passes must see (custom gradient or replay), so lowering keeps it."""
    callee = ins.attrs.get("callee")
    return callee is not None and (callee.custom_grad is not None or callee.custom_replay is not None)


_keep = has_custom_rules


def inline_region(region: Region, renames: dict[int, Value], keep=_keep) -> None:
    """Inline the calls in `region` that `keep` does not keep (results renamed through `renames`)."""
    out: list[Instr] = []
    for ins in region.body:
        ins.args = [_resolve(a, renames) for a in ins.args]
        for r in ins.regions:
            inline_region(r, renames, keep)
        if ins.op != Op.CALL or keep(ins):
            out.append(ins)
            continue
        callee: Function = ins.attrs["func"]
        mapping: dict[int, Value] = {p.value.id: a for p, a in zip(callee.params, ins.args)}
        body = Region([], [copy_instr(sub, mapping) for sub in callee.body.body])
        inline_region(body, renames, keep)
        for sub in body.walk():
            sub.loc = sub.loc or ins.loc
        out.extend(body.body)
        for res, y in zip(ins.results, callee.body.yields):
            renames[res.id] = _resolve(mapping.get(y.id, y), renames)
    region.body = out
    region.yields = [_resolve(y, renames) for y in region.yields]


def _resolve(v: Value, renames: dict[int, Value]) -> Value:
    while v.id in renames:
        v = renames[v.id]
    return v


def inline_calls(fn: Function) -> Function:
    """Replace calls by the callee's body (program order guarantees results are renamed before use)."""
    inline_region(fn.body, {})
    return fn
