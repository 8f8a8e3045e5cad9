"""The typed core IR: SSA values, instructions and structured regions.

A kernel or function is a `Function` whose body is a `Region` (a list of
`Instr`). Control flow is structured (MLIR `scf` style), loop-carried values
are explicit region parameters, and every instruction keeps its `SourceLoc`.

Instruction ops (the vocabulary is `Op` in core/ops.py, with its trait groups; `prim` names are the
entries of core/builtins/, expanded ones such as `floordiv` rewritten by core/passes/expand.py):

    const                      attrs{value}                    -> scalar
    prim   *args               attrs{name}                     -> one value
    tid                        attrs{axis, ndim}               -> int32 (thread coordinate)
    shape  arr                 attrs{axis}                     -> int32 (array extent)
    load   arr, *idx           attrs{comp, final}              -> element (scalar after scalarize)
    store  arr, *idx, value    attrs{comp}                     -> ()
    atomic arr, *idx, value    attrs{kind: add|sub|min|max|xchg, comp, exclusive} -> old element value
    if     cond                regions[then, else]; each yields len(results) values
    for    start, stop, step, *init   regions[body]; body.params = [iv, *carried];
                               body yields new carried; results = final carried.
                               Python range semantics (step may be negative, never 0).
    while  *init               regions[cond, body]; cond.params = carried, cond yields [bool];
                               body.params = carried, body yields new carried; results = final carried
    call   *args               attrs{func: Function}           -> func's results (removed by inlining)
    push   value               attrs{stack}                    -> ()   reverse-pass value stack
    pop                        attrs{stack}                    -> value (LIFO partner of push)
    native *args               attrs{native, variant}          -> results of a user's @gk.func_native code

`final` on a load (adjoint kernels only) marks a read of the forward launch's result rather than of
the values it started from (atomic_min/max's winner test), so a tape knows which copy it needs.
`comp` on load/store/atomic is None for whole-element access (before
scalarize) or the flat component index into a vector/matrix element (after
scalarize, where every value is a scalar; the frontend also emits it for
component writes such as `v[i][1] = x`, which scalarize keeps as they are). `exclusive` on atomic marks an
update no other thread touches (a plain read-modify-write is enough).
`promoted` on a load/store marks one core/passes/promote.py moved out of a loop (the rule checks skip it).
Functions end by yielding their return values (`body.yields`); kernels yield nothing.

Function attrs (`Function.attrs`), each written by one stage and read by later ones; nothing else is kept
there (the runtime's own derived facts live in runtime/launch/kernel_facts.py, not in the IR):

    source_name       frontend, ad        the user's kernel name (variants carry it for messages)
    tid_ndim          frontend            how many coordinates gk.tid() unpacks into (1 when unused)
    n_user_params     frontend            parameters the user wrote (before struct/array splitting)
    weak_results      frontend            a @gk.func's results that are untyped literals, as (index, value)
    ret_array_params  frontend            a @gk.func's array results: the parameters they alias
    param_structs     frontend            ((index, name, struct type), ...) of struct parameters
    ret_struct        frontend            the struct type a @gk.func returns, if any
    param_split       scalarize           [(name, n)]: how many scalar parameters each parameter became
    pass_log          run_passes(keep_log) [(pass name, printed IR)] for the debugger (variant_log only)
    adj_of / dual_of  ad/derived.py       per gradient (tangent) parameter, the parameter it belongs to
    consumable        ad/reverse.py       adjoint parameters whose reset after an overwriting store was
                                          left out (ad/consume.py puts them back)
    stack_sites       ad/reverse.py       {stack site: SourceLoc} of the value-stack pushes (overflow text)
    uses_stack        ad/reverse.py       the adjoint uses the per-thread value stack
    gather_sources    ad/gather.py        parameters whose gradients a stencil adjoint gathers
    gather_margin     ad/gather.py        per-axis halo the gathered adjoint needs (interior-loop split)
    uniform_seeds     ad/uniform.py       adjoint parameters folded to one scalar each
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Iterable, Iterator

from .builtins import BUILTINS
from .errors import SourceLoc
from .ops import Op
from .types import ArrayType, Type
from .verify import IRError, verify  # noqa: F401  (re-exported: passes and backends import them from here)

_ids = itertools.count()


class Value:
    """An SSA value: produced once by an instruction or a region parameter."""

    __slots__ = ("type", "id", "hint", "const_value")

    def __init__(self, type: Type, hint: str = ""):
        self.type, self.hint, self.id = type, hint, next(_ids)
        self.const_value = None   # set for results of `const`, so passes can fold

    def __repr__(self) -> str:
        return f"%{self.hint}{self.id}" if self.hint else f"%{self.id}"


class Instr:
    """One IR instruction: op name, operands, results, attributes, nested regions, location."""

    __slots__ = ("op", "args", "results", "attrs", "regions", "loc")

    def __init__(self, op: str, args: list[Value], results: list[Value], attrs: dict | None = None,
                 regions: list[Region] | None = None, loc: SourceLoc | None = None):
        self.op, self.args, self.results = op, list(args), list(results)
        self.attrs, self.regions, self.loc = attrs or {}, regions or [], loc

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.op} has {len(self.results)} results"
        return self.results[0]

    @property
    def name(self) -> str:
        """The prim name for `prim`, else the op itself."""
        return self.attrs["name"] if self.op == Op.PRIM else self.op

    def __repr__(self) -> str:
        return format_instr(self, 0).strip()


class Region:
    """A block of instructions with parameters (block arguments) and yielded values."""

    __slots__ = ("params", "body", "yields")

    def __init__(self, params: list[Value] | None = None, body: list[Instr] | None = None,
                 yields: list[Value] | None = None):
        self.params = params or []
        self.body = body or []
        self.yields = yields or []

    def walk(self) -> Iterator[Instr]:
        """Every instruction in this region and nested regions, in program order (an explicit stack, not
        nested generators: each instruction costs the same however deep it sits)."""
        stack = [iter(self.body)]
        while stack:
            for ins in stack[-1]:
                yield ins
                if ins.regions:
                    stack.append(itertools.chain.from_iterable(r.body for r in ins.regions))
                    break
            else:
                stack.pop()


class Param:
    """A kernel or function parameter: name, type and the SSA value standing for it."""

    __slots__ = ("name", "type", "value")

    def __init__(self, name: str, type: Type):
        self.name, self.type = name, type
        self.value = Value(type, name)

    def __repr__(self) -> str:
        return f"{self.name}: {self.type.name}"


class Function:
    """A kernel (`kind='kernel'`) or device function (`kind='func'`) in core IR."""

    def __init__(self, name: str, params: list[Param], body: Region, ret_types: list[Type],
                 kind: str = "kernel", loc: SourceLoc | None = None):
        self.name, self.params, self.body = name, params, body
        self.ret_types, self.kind, self.loc = ret_types, kind, loc
        self.attrs: dict = {}   # stage-written notes: the table in this module's docstring

    @property
    def array_params(self) -> list[Param]:
        return [p for p in self.params if isinstance(p.type, ArrayType)]

    def walk(self) -> Iterator[Instr]:
        return self.body.walk()

    def __str__(self) -> str:
        return format_function(self)


class Builder:
    """Appends instructions to a region; the one way passes and the frontend create IR."""

    def __init__(self, region: Region, loc: SourceLoc | None = None):
        self.region, self.loc = region, loc

    def at(self, region: Region) -> Builder:
        """A builder for another region sharing this builder's current location."""
        return Builder(region, self.loc)

    def emit(self, op: str, args: Iterable[Value], result_types: Iterable[Type], attrs: dict | None = None,
             regions: list[Region] | None = None, hint: str = "") -> Instr:
        ins = Instr(op, list(args), [Value(t, hint) for t in result_types], attrs, regions, self.loc)
        self.region.body.append(ins)
        return ins

    def const(self, value, type: Type) -> Value:
        v = self.emit(Op.CONST, [], [type], {"value": value}).result
        v.const_value = value
        return v

    def prim(self, name: str, *args: Value, **attrs) -> Value:
        """Apply a builtin from the table; its type rule gives the result type."""
        rtype = BUILTINS[name].result_type([a.type for a in args], attrs)
        return self.emit(Op.PRIM, args, [rtype], {"name": name, **attrs}).result

    # Short forms used throughout the passes.
    def add(self, a, b): return self.prim("add", a, b)
    def sub(self, a, b): return self.prim("sub", a, b)
    def mul(self, a, b): return self.prim("mul", a, b)
    def div(self, a, b): return self.prim("div", a, b)
    def neg(self, a): return self.prim("neg", a)
    def select(self, c, a_true, b_false): return self.prim("where", c, a_true, b_false)
    def cast(self, a, to: Type): return a if a.type is to else self.prim("cast", a, to=to)

    def zero(self, type: Type) -> Value:
        return self.const(0 if not type.is_float else 0.0, type)

    def load(self, arr: Value, idx: list[Value], comp: int | None = None, type: Type | None = None) -> Value:
        rtype = type or (arr.type.dtype if comp is None else arr.type.dtype.scalar)
        return self.emit(Op.LOAD, [arr, *idx], [rtype], {"comp": comp}).result

    def store(self, arr: Value, idx: list[Value], value: Value, comp: int | None = None) -> None:
        self.emit(Op.STORE, [arr, *idx, value], [], {"comp": comp})

    def atomic(self, kind: str, arr: Value, idx: list[Value], value: Value, comp: int | None = None,
               exclusive: bool = False) -> Value:
        return self.emit(Op.ATOMIC, [arr, *idx, value], [value.type],
                         {"kind": kind, "comp": comp, "exclusive": exclusive}).result


# --------------------------------------------------------------------------- printing

class _Names:
    """Value names for printing: `%hint.N` numbered per function, so text is stable across processes."""

    def __init__(self) -> None:
        self.map: dict[int, str] = {}

    def __call__(self, v: Value) -> str:
        name = self.map.get(v.id)
        if name is None:
            name = f"%{v.hint}.{len(self.map)}" if v.hint else f"%{len(self.map)}"
            self.map[v.id] = name
        return name


def _fmt_attrs(ins: Instr) -> str:
    shown = {k: v for k, v in ins.attrs.items() if v is not None and k != "name" and v is not False}
    for k, v in list(shown.items()):
        if isinstance(v, Function):
            shown[k] = v.name
        elif isinstance(v, Type):
            shown[k] = v.name
        elif isinstance(v, SourceLoc):
            shown[k] = f"line {v.line}"
    return "[" + ", ".join(f"{k}={v}" for k, v in shown.items()) + "]" if shown else ""


def _line(ins: Instr) -> str:
    return f"  # line {ins.loc.line}" if ins.loc is not None else ""


def format_instr(ins: Instr, depth: int, names: _Names | None = None, locs: bool = True) -> str:
    names = names or _Names()
    pad = "  " * depth
    line = _line(ins) if locs else ""
    res = ", ".join(f"{names(r)}: {r.type.name}" for r in ins.results)
    lhs = f"{res} = " if res else ""
    if ins.op == Op.CONST:
        return f"{pad}{lhs}const {ins.attrs['value']!r}{line}\n"
    args = ", ".join(map(names, ins.args))
    head = f"{pad}{lhs}{ins.name}{_fmt_attrs(ins)} {args}".rstrip()
    if not ins.regions:
        return head + line + "\n"
    out = head + " {" + line + "\n"
    for k, r in enumerate(ins.regions):
        if k:
            out += f"{pad}}} {{\n"
        if r.params:
            out += f"{pad}  ^(" + ", ".join(f"{names(p)}: {p.type.name}" for p in r.params) + "):\n"
        for sub in r.body:
            out += format_instr(sub, depth + 1, names, locs)
        out += f"{pad}  yield " + ", ".join(map(names, r.yields)) + "\n"
    return out + f"{pad}}}\n"


def format_function(fn: Function, locs: bool = True) -> str:
    """The readable text of a function (what `kernel.ir()` prints)."""
    names = _Names()
    params = ", ".join(f"{names(p.value)}: {p.type.name}" for p in fn.params)
    rets = f" -> ({', '.join(t.name for t in fn.ret_types)})" if fn.ret_types else ""
    out = f"{fn.kind} {fn.name}({params}){rets}:\n"
    for ins in fn.body.body:
        out += format_instr(ins, 1, names, locs)
    if fn.body.yields:
        out += "  return " + ", ".join(map(names, fn.body.yields)) + "\n"
    return out


def fingerprint(fn: Function) -> str:
    """A SHA-256 of the function's text without source locations: stable across processes, for cache keys."""
    return hashlib.sha256(format_function(fn, locs=False).encode()).hexdigest()


# --------------------------------------------------------------------------- helpers

def local_ids(ins: Instr) -> set[int]:
    """Ids of the values defined inside an instruction's regions (region parameters and results)."""
    out = set()
    for r in ins.regions:
        out.update(p.id for p in r.params)
        for sub in r.walk():
            out.update(x.id for x in sub.results)
            for rr in sub.regions:
                out.update(p.id for p in rr.params)
    return out


def index_key(values: Iterable[Value]) -> tuple:
    """An array index for comparing accesses: constants by value (each branch makes its own copy of a
    constant), other values by identity."""
    return tuple(("c", v.const_value) if v.const_value is not None else ("v", v.id) for v in values)


def access_index(ins: Instr) -> list[Value]:
    """The index operands of a load, store or atomic."""
    return ins.args[1:] if ins.op == Op.LOAD else ins.args[1:-1]


def different_elements(a: tuple, b: tuple) -> bool:
    """Two `index_key`s that name different elements for one thread: different constants somewhere."""
    return any(x[0] == y[0] == "c" and x[1] != y[1] for x, y in zip(a, b))


def used_ids(fn: Function) -> set[int]:
    """Ids of every value some instruction or region yield uses."""
    used: set[int] = set()
    for ins in fn.walk():
        used.update(a.id for a in ins.args)
        for r in ins.regions:
            used.update(y.id for y in r.yields)
    return used


# --------------------------------------------------------------------------- copying

def copy_instr(ins: Instr, mapping: dict[int, Value], keep=None, edit=None) -> Instr:
    """A deep copy of `ins` with operands renamed through `mapping` (id → Value); records new results in it.
    `keep(sub)`: False leaves a nested instruction out of the copy; `edit(old, new)` is called on each copy."""
    regions = []
    for r in ins.regions:
        params = [Value(p.type, p.hint) for p in r.params]
        for old, new in zip(r.params, params):
            mapping[old.id] = new
        body = [copy_instr(sub, mapping, keep, edit) for sub in r.body if keep is None or keep(sub)]
        regions.append(Region(params, body, [mapping.get(y.id, y) for y in r.yields]))
    results = []
    for res in ins.results:
        new = Value(res.type, res.hint)
        new.const_value = res.const_value
        mapping[res.id] = new
        results.append(new)
    new = Instr(ins.op, [mapping.get(a.id, a) for a in ins.args], results, dict(ins.attrs), regions, ins.loc)
    if edit is not None:
        edit(ins, new)
    return new


def copy_function(fn: Function, name: str | None = None) -> Function:
    """An independent copy of a function (fresh values), so passes may rewrite it in place."""
    mapping: dict[int, Value] = {}
    params = []
    for p in fn.params:
        q = Param(p.name, p.type)
        mapping[p.value.id] = q.value
        params.append(q)
    body = Region([], [copy_instr(i, mapping) for i in fn.body.body], [mapping.get(y.id, y) for y in fn.body.yields])
    out = Function(name or fn.name, params, body, list(fn.ret_types), fn.kind, fn.loc)
    out.attrs = dict(fn.attrs)
    return out
