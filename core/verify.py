"""IR verification: the invariants every pass must leave behind, checked after each one (core/passes).

`verify` checks the op vocabulary, SSA dominance, region arity and types: a `prim`'s result is what its
builtin's type rule gives, memory accesses move the array's element type (a component's scalar when
`comp` is set), and structured ops' regions take and yield their results' types. It runs after every
pass of every compile, so it is one walk with the common cases inline, and asks a builtin's type rule
once per signature.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

from . import types as T
from .builtins import BUILTINS, BuiltinTypeError
from .ops import ALL as OPS, MEMORY, STRUCTURED, Op

if TYPE_CHECKING:
    from .ir import Function, Instr, Region


class IRError(AssertionError):
    """The IR broke an invariant: a bug in a pass, never the user's fault."""


# A prim's (name, *argument types), or (*attrs items, *argument types) when it has more attributes than its
# name -> result type: type rules are pure, and the prims of a kernel repeat a few signatures (a dict hit
# costs a fraction of a rule's call).
_RULES: dict[tuple, T.Type] = {}
_PRIM, _CONST = Op.PRIM, Op.CONST
_TYPE = attrgetter("type")


def verify(fn: Function, scalar_only: bool = False) -> None:
    """Check `fn`'s invariants (see the module docstring); with `scalar_only`, also that every value is a
    scalar (after scalarize). Raises IRError naming the function and the offending instruction."""
    _Verifier(fn, scalar_only).region(fn.body, {p.value.id for p in fn.params})
    if fn.kind == "func":
        got = [y.type for y in fn.body.yields]
        # scalarize splits returned vectors into components but keeps the declared (user-level) types
        if got != list(fn.ret_types) and got != [t.scalar for t in fn.ret_types for _ in range(t.ncomp)]:
            raise IRError(f"{fn.name}: returns ({_names(fn.body.yields)}), declared ({_types(fn.ret_types)})")


def _names(values) -> str:
    return ", ".join(v.type.name for v in values)


def _types(types) -> str:
    return ", ".join(t.name for t in types)


class _Verifier:
    """One verification: the function (for messages) and whether values must be scalar."""

    def __init__(self, fn: Function, scalar_only: bool):
        self.fn, self.scalar_only = fn, scalar_only

    def fail(self, ins: Instr | None, what: str) -> IRError:
        where = f" in {ins!r}" if ins is not None else ""
        return IRError(f"{self.fn.name}: {what}{where}")

    def region(self, region: Region, visible: set[int]) -> None:
        visible = visible | {p.id for p in region.params}
        scalar_only, rules = self.scalar_only, _RULES
        for ins in region.body:
            op = ins.op
            for a in ins.args:
                if a.id not in visible:
                    raise self.fail(ins, f"{a} used before definition")
            if op == _PRIM:       # most instructions: checked inline, their rule's answer memoised
                args, attrs = ins.args, ins.attrs
                if len(attrs) == 1 and len(args) == 2:      # the common case, without building lists
                    key = (attrs.get("name"), args[0].type, args[1].type)
                elif len(attrs) == 1 and len(args) == 1:
                    key = (attrs.get("name"), args[0].type)
                else:
                    key = (*attrs.items(), *map(_TYPE, args))
                try:
                    want = rules[key]
                except (KeyError, TypeError):       # not seen yet, or an unhashable attribute
                    want = self.rule(ins, key)
                res = ins.results
                if len(res) != 1 or res[0].type is not want:
                    raise self.fail(ins, f"prim {ins.attrs['name']} gives ({_names(res)}), its type rule "
                                         f"{want.name}")
            elif op in MEMORY:
                self.memory(ins)
            elif op == _CONST:
                if len(ins.results) != 1 or not ins.results[0].type.is_scalar:
                    raise self.fail(ins, "const must give one scalar")
            elif op not in OPS:
                raise self.fail(ins, f"unknown op {op!r}")
            elif ins.regions or op in STRUCTURED:
                self.structured(ins)
                for r in ins.regions:
                    self.region(r, visible)
            for res in ins.results:
                if scalar_only and not res.type.is_scalar:
                    raise self.fail(ins, f"non-scalar value {res} after scalarize")
                visible.add(res.id)
        for y in region.yields:
            if y.id not in visible:
                raise self.fail(None, f"{y} yielded before definition")

    def rule(self, ins: Instr, key: tuple) -> T.Type:
        """What the prim's builtin says its result type is (memoised under `key` when it is hashable)."""
        attrs = ins.attrs
        name = attrs.get("name")
        entry = BUILTINS.get(name)
        if entry is None:
            raise self.fail(ins, f"unknown prim {name!r}")
        types = [a.type for a in ins.args]
        try:
            want = entry.result_type(types, attrs)
        except BuiltinTypeError as exc:
            raise self.fail(ins, f"prim {name} refuses its arguments ({exc})") from None
        try:
            _RULES[key] = want
        except TypeError:
            pass
        return want

    def memory(self, ins: Instr) -> None:
        """load arr, *idx -> element; store arr, *idx, value; atomic arr, *idx, value -> element."""
        arr = ins.args[0].type if ins.args else None
        if arr is None or not arr.is_array:
            raise self.fail(ins, f"{ins.op} needs an array operand")
        elem = arr.dtype if ins.attrs.get("comp") is None else arr.dtype.scalar
        nidx = len(ins.args) - (1 if ins.op == Op.LOAD else 2)
        if nidx != arr.ndim:
            raise self.fail(ins, f"{ins.op} into {arr.name} with {nidx} indices")
        if ins.op != Op.LOAD and ins.args[-1].type is not elem:
            raise self.fail(ins, f"{ins.op} of a {ins.args[-1].type.name} into elements of {elem.name}")
        if ins.op != Op.STORE and (len(ins.results) != 1 or ins.results[0].type is not elem):
            raise self.fail(ins, f"{ins.op} gives ({_names(ins.results)}) from elements of {elem.name}")

    def structured(self, ins: Instr) -> None:
        """if: both branches yield the results' types; for: body params (int index, carried) and yields,
        and the init operands, match the results; while: cond yields one bool, regions take the carried."""
        op, results = ins.op, [r.type for r in ins.results]
        if op == Op.IF:
            if len(ins.args) != 1 or len(ins.regions) != 2 or any(r.params for r in ins.regions):
                raise self.fail(ins, "malformed if (one condition, two regions without parameters)")
            if ins.args[0].type is not T.bool_:
                raise self.fail(ins, f"if on a {ins.args[0].type.name}, not bool")
            for k, r in enumerate(ins.regions):
                if [y.type for y in r.yields] != results:
                    raise self.fail(ins, f"if's {('then', 'else')[k]} branch yields ({_names(r.yields)}), "
                                         f"its results are ({_types(results)})")
        elif op == Op.FOR:
            if len(ins.regions) != 1 or len(ins.args) < 3 or not all(a.type.is_int for a in ins.args[:3]):
                raise self.fail(ins, "malformed for (int start, stop, step; one region)")
            (body,) = ins.regions
            if len(body.params) != len(results) + 1 or not body.params[0].type.is_int:
                raise self.fail(ins, "malformed for (body params: an int index, then the carried values)")
            self.carried(ins, "body", body.params[1:], body.yields, ins.args[3:], results)
        elif op == Op.WHILE:
            if len(ins.regions) != 2:
                raise self.fail(ins, "malformed while (regions cond, body)")
            cond, body = ins.regions
            if len(cond.yields) != 1 or cond.yields[0].type is not T.bool_:
                raise self.fail(ins, f"while's cond yields ({_names(cond.yields)}), not one bool")
            if [p.type for p in cond.params] != results:
                raise self.fail(ins, f"while's cond takes ({_names(cond.params)}), its results are "
                                     f"({_types(results)})")
            self.carried(ins, "body", body.params, body.yields, ins.args, results)
        else:
            raise self.fail(ins, f"{op} has regions")

    def carried(self, ins: Instr, what: str, params, yields, inits, results) -> None:
        for label, values in (("takes", params), ("yields", yields), ("starts from", inits)):
            if [v.type for v in values] != results:
                raise self.fail(ins, f"{ins.op}'s {what} {label} ({_names(values)}), its results are "
                                     f"({_types(results)})")
