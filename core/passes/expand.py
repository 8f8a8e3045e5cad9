"""Write primitives in other primitives where the builtins table says how (`Builtin.expand`).

Python's floored `//` and `%`, `clamp`, `sign` and integer `abs` are defined once, in IR, instead of in
every code generator. The pass runs on scalar IR after differentiation (derivatives are declared on the
original primitive) and before a backend compiles; a backend that implements a primitive itself lists it
in `native_prims` and the pass leaves it alone (the NumPy reference backend does, so the fuzz oracle
checks the expansions against the table's own NumPy semantics).
"""

from __future__ import annotations

from ..builtins import BUILTINS
from ..ir import Builder, Function, Region, Value
from ..ops import Op


def expandable(name: str, keep: frozenset = frozenset()) -> bool:
    entry = BUILTINS.get(name)
    return entry is not None and entry.expand is not None and name not in keep


def _region(region: Region, keep: frozenset, mapping: dict[int, Value]) -> bool:
    """Expand in place; `mapping` sends replaced result ids to their new values. True if anything changed."""
    out, changed = [], False
    for ins in region.body:
        if mapping:
            ins.args = [mapping.get(a.id, a) for a in ins.args]
        for sub in ins.regions:
            changed |= _region(sub, keep, mapping)
        if ins.op == Op.PRIM and expandable(ins.attrs["name"], keep):
            entry = BUILTINS[ins.attrs["name"]]
            tmp = Region()
            attrs = {k: v for k, v in ins.attrs.items() if k != "name"}
            value = entry.expand(Builder(tmp, ins.loc), ins.args, attrs)
            if value is not None:                # (a mistyped expansion fails verify after this pass)
                out.extend(tmp.body)
                mapping[ins.result.id] = value
                value.hint = value.hint or ins.result.hint
                changed = True
                continue
        out.append(ins)
    region.body = out
    if mapping:
        region.yields = [mapping.get(y.id, y) for y in region.yields]
    return changed


def expand(fn: Function, keep: frozenset = frozenset()) -> Function:
    """Replace every call of an expandable primitive (not in `keep`) by its expansion."""
    _region(fn.body, frozenset(keep), {})
    return fn


def needs_expansion(fn: Function, keep: frozenset = frozenset()) -> bool:
    return any(ins.op == Op.PRIM and expandable(ins.attrs["name"], keep) for ins in fn.walk())
