"""Split vector and matrix values into scalars.

After this pass every SSA value is a scalar: vector/matrix builtins are
replaced by their `decompose` rules, loads/stores/atomics of vector elements
become one access per component (`comp`; an access the frontend already made
single-component, such as `v[i][k] = x`, stays one access), region parameters and results are
flattened, and vector/matrix parameters become one scalar parameter per
component (`fn.attrs["param_split"]` records how, for argument packing).
"""

from __future__ import annotations

from ..builtins import BUILTINS
from ..ir import Builder, Function, Instr, Param, Region, Value
from ..ops import MEMORY, STRUCTURED, Op


def _ncomp(t) -> int:
    return 1 if t.is_scalar else t.ncomp


class Scalarizer:
    def __init__(self) -> None:
        self.comps: dict[int, list[Value]] = {}

    def get(self, v: Value) -> list[Value]:
        return self.comps.get(v.id, [v])

    def flat(self, values) -> list[Value]:
        return [c for v in values for c in self.get(v)]

    def region(self, region: Region, params: list[Value] | None = None) -> Region:
        out = Region(params if params is not None else self.split_params(region.params))
        b = Builder(out)
        for ins in region.body:
            b.loc = ins.loc
            self.instr(ins, b)
        out.yields = self.flat(region.yields)
        return out

    def split_params(self, params: list[Value]) -> list[Value]:
        out = []
        for p in params:
            if p.type.is_scalar:
                out.append(p)
            else:
                parts = [Value(p.type.scalar, f"{p.hint}_{k}" if p.hint else "") for k in range(p.type.ncomp)]
                self.comps[p.id] = parts
                out.extend(parts)
        return out

    def instr(self, ins: Instr, b: Builder) -> None:
        op = ins.op
        if op == Op.PRIM:
            args_scalar = all(a.type.is_scalar for a in ins.args)
            if args_scalar and ins.result.type.is_scalar:
                ins.args = self.flat(ins.args)
                b.region.body.append(ins)
                return
            entry = BUILTINS[ins.attrs["name"]]
            attrs = {k: v for k, v in ins.attrs.items() if k != "name"}
            args = [self.get(a)[0] if a.type.is_scalar else a for a in ins.args]
            parts = entry.decompose(b, args, [self.get(a) for a in ins.args], ins.result.type, attrs)
            self.set(ins.result, parts)
            return
        if op in MEMORY and ins.attrs.get("comp") is not None:
            ins.args = self.flat(ins.args)     # already one component (v[i][k] = x): keep it so
            if op == Op.STORE:
                ins.attrs["whole"] = False     # a write of part of an element, not one of a whole one's parts
            b.region.body.append(ins)
            return
        if op in MEMORY:
            arr, *rest = ins.args
            nidx = arr.type.ndim
            idx = self.flat(rest[:nidx])
            n = _ncomp(arr.type.dtype)
            if op == Op.LOAD:
                parts = [b.load(arr, idx, comp=k) for k in range(n)]
                self.set(ins.result, parts)
            elif op == Op.STORE:
                for k, v in enumerate(self.get(rest[nidx])):
                    b.store(arr, idx, v, comp=k)
            else:
                parts = [b.atomic(ins.attrs["kind"], arr, idx, v, comp=k, exclusive=ins.attrs.get("exclusive", False))
                         for k, v in enumerate(self.get(rest[nidx]))]
                self.set(ins.result, parts)
            return
        if op in STRUCTURED:
            ins.args = self.flat(ins.args)
            ins.regions = [self.region(r) for r in ins.regions]
            new_results = self.split_params(ins.results)
            ins.results = new_results
            b.region.body.append(ins)
            return
        ins.args = self.flat(ins.args)
        if op == Op.CALL:        # kept for AD (custom grad/replay): its vector results become components
            ins.results = self.split_params(ins.results)
        b.region.body.append(ins)

    def set(self, v: Value, parts: list[Value]) -> None:
        if v.type.is_scalar:
            self.comps[v.id] = parts
            if parts and parts[0] is not v:
                self.comps[v.id] = parts
        else:
            self.comps[v.id] = parts


def user_params(fn: Function) -> list[int]:
    """For each of fn's leading lowered parameters, the index of the user-level parameter it came from
    (a vector/matrix parameter is split into one scalar parameter per component; see `param_split`)."""
    split = fn.attrs.get("param_split", [(p.name, 1) for p in fn.params])
    return [u for u, (_, n) in enumerate(split) for _ in range(n)][:len(fn.params)]


def scalarize(fn: Function) -> Function:
    s = Scalarizer()
    params, split = [], []
    for p in fn.params:
        if p.type.is_scalar or p.type.is_array:
            params.append(p)
            split.append((p.name, 1))
            continue
        parts = [Param(f"{p.name}_{k}", p.type.scalar) for k in range(p.type.ncomp)]
        s.comps[p.value.id] = [q.value for q in parts]
        params.extend(parts)
        split.append((p.name, p.type.ncomp))
    fn.params = params
    fn.attrs["param_split"] = split
    fn.body = s.region(fn.body, params=[])
    return fn
