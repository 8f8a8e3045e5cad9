"""Constant folding, algebraic identities, common-subexpression elimination and
dead-code elimination on lowered (scalar) IR."""

from __future__ import annotations

import numpy as np

from ..builtins import BUILTINS
from ..ir import Builder, Function, Instr, Region, Value, different_elements, index_key
from ..ops import EFFECTS, LOOPS, VALUE, WRITES, Op

_NO_FOLD = {"div", "floordiv", "mod", "idiv", "irem"}   # integer division by zero must keep backend semantics


def _safe_int_division(name: str, a, b, t) -> bool:
    """Integer //, % of constants fold when the result is defined the same on every backend: a nonzero
    divisor, and not the one overflowing case (the type's minimum // -1)."""
    if name == "div" or b == 0:
        return False
    return not (b == -1 and t.kind == "int" and a == -(2 ** (t.bits - 1)))


def _is_positive_zero(c) -> bool:
    return c == 0 and not np.signbit(c)


def _const(v: Value):
    return v.const_value


def _fold(ins: Instr, b: Builder) -> Value | None:
    """A replacement for a prim whose operands are constants, or an identity (x*1, x+0, ...)."""
    name = ins.attrs["name"]
    args = ins.args
    t = ins.result.type
    consts = [_const(a) for a in args]
    if all(c is not None for c in consts) and name not in ("construct", "extract", "insert", "identity"):
        if name in _NO_FOLD and t.is_int and not _safe_int_division(name, consts[0], consts[-1], t):
            return None
        entry = BUILTINS[name]
        attrs = {k: v for k, v in ins.attrs.items() if k != "name"}
        with np.errstate(all="ignore"):
            vals = [np.asarray(c, dtype=a.type.np_dtype) for c, a in zip(consts, args)]
            r = np.asarray(entry.eval(*vals, **attrs)).astype(t.np_dtype)
        return b.const(r.item(), t)
    if name == "where" and consts[0] is not None:
        return args[1] if consts[0] else args[2]
    if name == "where" and args[1] is args[2]:
        return args[1]
    if name == "mul":
        for x, c in ((args[0], consts[1]), (args[1], consts[0])):
            if c is not None and c == 1:
                return x
            if c is not None and c == 0 and t.is_int:
                return b.const(0, t)
    if name == "add":
        for x, c in ((args[0], consts[1]), (args[1], consts[0])):
            if c is not None and c == 0 and t.is_int:
                return x
    if name == "sub" and consts[1] is not None and consts[1] == 0 and (t.is_int or _is_positive_zero(consts[1])):
        return args[0]                    # x - 0.0 is x for every float, -0.0 and NaN included
    if name == "div" and consts[1] is not None and consts[1] == 1 and t.is_float:
        return args[0]
    if name == "floordiv" and consts[1] is not None and consts[1] == 1 and t.is_int:
        return args[0]
    if name == "cast" and args[0].type is ins.attrs["to"]:
        return args[0]
    return None


class Simplifier:
    def __init__(self) -> None:
        self.rename: dict[int, Value] = {}
        self.writes: dict[int, tuple] = {}    # id(instr with regions) -> (instr, arrays its regions may write)

    def written_arrays(self, ins: Instr) -> set[int]:
        """Arrays the regions of `ins` may write, computed once per instruction bottom-up (nested regions
        reuse their own result: linear in the kernel's size, not quadratic in its nesting)."""
        hit = self.writes.get(id(ins))
        if hit is not None and hit[0] is ins:       # holding the instr keeps its id from being reused
            return hit[1]
        out = set()
        for r in ins.regions:
            for s in r.body:
                if s.op in WRITES:
                    out.add(s.args[0].id)
                elif s.op == Op.NATIVE:
                    out.update(a.id for a in s.args if a.type.is_array)
                if s.regions:
                    out |= self.written_arrays(s)
        self.writes[id(ins)] = (ins, out)
        return out

    def r(self, v: Value) -> Value:
        while v.id in self.rename:
            v = self.rename[v.id]
        return v

    def region(self, region: Region, cse: dict) -> None:
        cse = dict(cse)
        out = Region(region.params)
        b = Builder(out)
        for ins in region.body:
            ins.args = [self.r(a) for a in ins.args]
            b.loc = ins.loc
            if ins.op == Op.PRIM:
                rep = _fold(ins, b)
                if rep is not None:
                    self.rename[ins.result.id] = rep
                    continue
            if ins.op == Op.IF and _const(ins.args[0]) is not None:
                taken = ins.regions[0 if ins.args[0].const_value else 1]
                self.region(taken, cse)
                out.body.extend(taken.body)
                for res, y in zip(ins.results, taken.yields):
                    self.rename[res.id] = self.r(y)
                continue
            if ins.regions:
                written = self.written_arrays(ins)
                if ins.op in LOOPS:
                    _invalidate(cse, written)
                for sub in ins.regions:
                    self.region(sub, cse)
                _invalidate(cse, written)
            if ins.op == Op.ATOMIC:
                _invalidate(cse, {ins.args[0].id})
            if ins.op == Op.STORE:
                _invalidate_aliases(cse, ins)
                # Store-to-load forwarding: a later load of the same element in this thread reads the value
                # just stored. Besides saving a load, the adjoint's replay (which skips stores and would
                # read the array's final contents) then sees the value the forward pass saw.
                arr, *idx, value = ins.args
                cse[("load", arr.id, ins.attrs["comp"], index_key(self.r(a) for a in idx))] = self.r(value)
            if ins.op == Op.NATIVE:
                _invalidate(cse, {a.id for a in ins.args if a.type.is_array})
            if ins.op == Op.LOAD:
                key = ("load", ins.args[0].id, ins.attrs["comp"], index_key(ins.args[1:]))
                if ins.attrs.get("final"):      # reverse mode's read of a launch's result: kept apart
                    key += ("final",)
                hit = cse.get(key)
                if hit is not None:
                    self.rename[ins.result.id] = hit
                    continue
                cse[key] = ins.result
            if ins.op in VALUE:
                key = (ins.op, tuple(sorted((k, _hashable(v)) for k, v in ins.attrs.items())),
                       ins.result.type, tuple(a.id for a in ins.args))
                hit = cse.get(key)
                if hit is not None:
                    self.rename[ins.result.id] = hit
                    continue
                cse[key] = ins.result
            out.body.append(ins)
        region.body = out.body
        region.yields = [self.r(y) for y in region.yields]


def _invalidate(cse: dict, arrays: set[int]) -> None:
    """Forget loads of arrays that may have been written."""
    if arrays:
        for key in [k for k in cse if k[0] == "load" and k[1] in arrays]:
            del cse[key]


def _invalidate_aliases(cse: dict, store: Instr) -> None:
    """Forget loads a store may have changed: of its array, unless provably another element for this
    thread (the same index with another component, or different constants at some index position)."""
    arr, *idx, _ = store.args
    comp, mine = store.attrs["comp"], index_key(idx)
    for key in [k for k in cse if k[0] == "load" and k[1] == arr.id]:
        other = key[3]
        if other == mine and key[2] != comp:
            continue
        if len(other) == len(mine) and different_elements(other, mine):
            continue
        del cse[key]


def _hashable(v):
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return id(v)


def _has_effects(ins: Instr) -> bool:
    return ins.op in EFFECTS or any(_has_effects(s) for r in ins.regions for s in r.body)


def dce(region: Region, used: set[int]) -> None:
    """Remove instructions whose results are unused and that have no side effects (backwards walk)."""
    for y in region.yields:
        used.add(y.id)
    keep = []
    for ins in reversed(region.body):
        live = any(r.id in used for r in ins.results) or _has_effects(ins) or ins.op == Op.CALL
        if not live:
            continue
        if ins.op in LOOPS:
            # Loop regions see their own yields as uses on the next iteration: mark everything they yield.
            for r in ins.regions:
                dce(r, used)
        else:
            for r in ins.regions:
                dce(r, used)
        keep.append(ins)
        for a in ins.args:
            used.add(a.id)
    region.body = keep[::-1]


def simplify(fn: Function) -> Function:
    s = Simplifier()
    s.region(fn.body, {})
    dce(fn.body, set())
    return fn
