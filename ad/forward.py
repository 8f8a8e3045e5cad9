"""Forward mode as an IR pass: lowered IR → tangent IR (value and tangent in one kernel).

Every float value is paired with its tangent, computed by the builtins' JVP
rules (derived from their declared partials). Arrays carry tangents in their
`.dual` arrays: the tangent kernel takes the forward parameters followed by one
`dual_<name>` array per float array parameter; loads read the dual, stores and
atomic adds write it. Loops carry the tangents of their carried values, and
branches yield them, so control flow needs no special cases beyond that.
"""

from __future__ import annotations

from ..core.builtins import BUILTINS
from ..core.errors import CompileError, compile_error
from ..core.ir import Builder, Function, Instr, Param, Region, Value, copy_function
from ..core.ops import STRUCTURED, WRITES, Op
from ..core.passes.simplify import simplify
from .derived import derived_kernel


def _is_float(v: Value) -> bool:
    return v.type.is_scalar and v.type.is_float


class Tangent:
    """One tangent function under construction: each forward value's new primal and its tangent."""

    def __init__(self, duals: dict[int, Value], name: str = ""):
        self.name = name                   # the kernel's name, for errors
        self.duals = duals                 # array param value id -> dual array Value
        self.map: dict[int, Value] = {}    # primal id -> new primal value
        self.tan: dict[int, Value] = {}    # primal id -> tangent value (absent = zero)

    def p(self, v: Value) -> Value:
        return self.map.get(v.id, v)

    def t(self, v: Value) -> Value | None:
        return self.tan.get(v.id)

    def t_or_zero(self, b: Builder, v: Value) -> Value:
        t = self.tan.get(v.id)
        return t if t is not None else b.const(0.0, v.type)

    def region(self, src: Region, dst: Region) -> None:
        b = Builder(dst)
        for ins in src.body:
            b.loc = ins.loc
            self.instr(ins, b)

    def instr(self, ins: Instr, b: Builder) -> None:
        op = ins.op
        if op in STRUCTURED:
            return self.structured(ins, b)
        if op == Op.NATIVE and (any(self.t(a) is not None for a in ins.args)
                               or any(a.id in self.duals for a in ins.args)):
            raise CompileError(f"@gk.func_native '{ins.attrs['native'].name}' (called at {ins.loc}) has no tangent "
                               "rule: forward mode cannot differentiate through native code")
        if op == Op.POP and _is_float(ins.result):
            # Tangents ride the value stack with their values: pushed after, so popped first.
            t = b.emit(Op.POP, [], [ins.result.type], {**ins.attrs, "pair": ("d", ins.attrs.get("pair"))}).result
            self.tan[ins.result.id] = t
        new = b.emit(op, [self.p(a) for a in ins.args], [r.type for r in ins.results], dict(ins.attrs))
        for r, n in zip(ins.results, new.results):
            n.const_value, n.hint = r.const_value, r.hint
            self.map[r.id] = n
        if op == Op.PRIM and _is_float(ins.result):
            entry = BUILTINS[ins.attrs["name"]]
            attrs = {k: v for k, v in ins.attrs.items() if k != "name"}
            tangents = [self.t(a) for a in ins.args]
            if any(t is not None for t in tangents):
                t = entry.apply_jvp(b, [self.p(a) for a in ins.args], tangents, new.result, attrs)
                if t is not None:
                    self.tan[ins.result.id] = t
        elif op == Op.LOAD:
            dual = self.duals.get(ins.args[0].id)
            if dual is not None and _is_float(ins.result):
                self.tan[ins.result.id] = b.load(dual, [self.p(a) for a in ins.args[1:]], comp=ins.attrs["comp"])
        elif op == Op.PUSH and _is_float(ins.args[0]):
            b.emit(Op.PUSH, [self.t_or_zero(b, ins.args[0])], [], {**ins.attrs, "pair": ("d", ins.attrs.get("pair"))})
        elif op in WRITES:
            dual = self.duals.get(ins.args[0].id)
            value = ins.args[-1]
            if dual is None or not _is_float(value):
                return
            idx = [self.p(a) for a in ins.args[1:-1]]
            comp = ins.attrs["comp"]
            kind = ins.attrs.get("kind")
            if op == Op.STORE:
                b.store(dual, idx, self.t_or_zero(b, value), comp=comp)
            elif kind in ("add", "sub") and self.t(value) is not None:
                b.atomic(kind, dual, idx, self.t(value), comp=comp, exclusive=ins.attrs.get("exclusive"))
            elif kind == "xchg":           # reverse mode's claim of an adjoint (forward-over-reverse)
                self.tan[ins.result.id] = b.atomic("xchg", dual, idx, self.t_or_zero(b, value), comp=comp,
                                                   exclusive=ins.attrs.get("exclusive"))
            elif kind in ("min", "max"):
                # The winner's tangent would have to be stored together with its value in one atomic step.
                raise compile_error(self.name, ins.loc, f"forward mode cannot differentiate atomic_{kind} on a float "
                                    "array (which thread's tangent wins is only known after every thread ran); "
                                    "use reverse mode (gk.Tape) for this kernel")

    def structured(self, ins: Instr, b: Builder) -> None:
        op = ins.op
        float_res = [k for k, r in enumerate(ins.results) if _is_float(r)]
        if op == Op.IF:
            regions = []
            for r in ins.regions:
                nr = Region()
                self.region(r, nr)
                rb = Builder(nr, ins.loc)
                nr.yields = [self.p(y) for y in r.yields] + [self.t_or_zero(rb, r.yields[k]) for k in float_res]
                regions.append(nr)
            args = [self.p(ins.args[0])]
        else:
            is_for = op == Op.FOR
            inits = ins.args[3:] if is_for else ins.args
            args = [self.p(a) for a in ins.args] + [self.t_or_zero(b, inits[k]) for k in float_res]
            regions = []
            for k_region, r in enumerate(ins.regions):
                carried = r.params[1:] if is_for else r.params
                params = [Value(p.type, p.hint) for p in r.params]
                tparams = [Value(carried[k].type, "d" + carried[k].hint) for k in float_res]
                for old, new in zip(r.params, params):
                    self.map[old.id] = new
                for k, tp in zip(float_res, tparams):
                    self.tan[carried[k].id] = tp
                nr = Region(params + tparams)
                self.region(r, nr)
                rb = Builder(nr, ins.loc)
                if op == Op.WHILE and k_region == 0:    # regions[cond, body]: the condition yields its bool only
                    nr.yields = [self.p(y) for y in r.yields]
                else:
                    nr.yields = [self.p(y) for y in r.yields] + [self.t_or_zero(rb, r.yields[k]) for k in float_res]
                regions.append(nr)
        types = [r.type for r in ins.results] + [ins.results[k].type for k in float_res]
        new = b.emit(op, args, types, regions=regions)
        n = len(ins.results)
        for r, v in zip(ins.results, new.results[:n]):
            self.map[r.id] = v
            v.hint = r.hint
        for k, v in zip(float_res, new.results[n:]):
            self.tan[ins.results[k].id] = v


def tangent_function(fwd: Function) -> Function:
    """The tangent (JVP) kernel: forward params + one `dual_<name>` array per float array param."""
    d = derived_kernel(fwd, "tangent", "dual_", "dual_of")
    tg = Tangent(d.extra, d.fwd.attrs.get("source_name", d.fwd.name))
    tg.map.update(d.primal)
    tg.region(d.fwd.body, d.fn.body)
    simplify(d.fn)
    return d.fn


def tangent_of_func(fn: Function) -> tuple[Function, list[int]]:
    """JVP of a scalar device function: params (primals..., tangents of float primals...) →
    (results..., tangents of float results...). Returns the function and the float-param indices."""
    fwd = copy_function(fn)
    params = [Param(p.name, p.type) for p in fwd.params]
    float_params = [k for k, p in enumerate(fwd.params) if p.type.is_scalar and p.type.is_float]
    tparams = [Param(f"d_{fwd.params[k].name}", fwd.params[k].type) for k in float_params]
    out = Function(f"jvp_{fwd.name}", params + tparams, Region(), [], "func", fwd.loc)
    tg = Tangent({}, fwd.name)
    for p, q in zip(fwd.params, params):
        tg.map[p.value.id] = q.value
    for k, tp in zip(float_params, tparams):
        tg.tan[fwd.params[k].value.id] = tp.value
    tg.region(fwd.body, out.body)
    b = Builder(out.body, fwd.loc)
    ys = fwd.body.yields
    float_rets = [k for k, y in enumerate(ys) if _is_float(y)]
    out.body.yields = [tg.p(y) for y in ys] + [tg.t_or_zero(b, ys[k]) for k in float_rets]
    out.ret_types = [y.type for y in out.body.yields]
    out.attrs = {"source_name": fwd.attrs.get("source_name", fwd.name)}
    return out, float_params
