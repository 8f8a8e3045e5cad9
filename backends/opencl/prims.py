"""Scalar primitives → OpenCL C expressions (one table, semantics as in backends/base.py)."""

from __future__ import annotations

from ...core import types as T
from .codegen import CMP, CTYPE, UNARY, literal


def prim_expr(cg, ins) -> str:
    name = ins.attrs["name"]
    a = [cg.var(x) for x in ins.args]
    t = ins.args[0].type if ins.args else ins.result.type
    flt = t.is_float
    ct = CTYPE[t.name] if t.is_scalar else None
    if name in ("add", "sub", "mul", "div"):
        return f"({a[0]} {dict(add='+', sub='-', mul='*', div='/')[name]} {a[1]})"
    if name == "neg":
        return f"(-{a[0]})"
    if name in ("floordiv", "mod"):
        if flt:
            q = f"floor({a[0]} / {a[1]})"
            return q if name == "floordiv" else f"({a[0]} - {a[1]} * {q})"
        zero = literal(0, t)
        if t is T.uint32:
            op = "/" if name == "floordiv" else "%"
            return f"({a[1]} == {zero} ? {zero} : {a[0]} {op} {a[1]})"
        safe = f"(({a[1]} == {zero} || {a[1]} == ({ct})-1) ? ({ct})1 : {a[1]})"
        if name == "floordiv":
            q = f"({a[0]} / {safe})"
            r = f"({a[0]} % {safe})"
            fl = f"({q} - (({r} != 0) && (({r} < 0) != ({safe} < 0))))"
            return f"({a[1]} == {zero} ? {zero} : ({a[1]} == ({ct})-1 ? ({ct})(0 - {a[0]}) : {fl}))"
        r = f"({a[0]} % {safe})"
        fl = f"(({r} != 0 && (({r} < 0) != ({safe} < 0))) ? {r} + {safe} : {r})"
        return f"(({a[1]} == {zero} || {a[1]} == ({ct})-1) ? {zero} : {fl})"
    if name == "pow":
        return f"pow({a[0]}, {a[1]})"
    if name == "atan2":
        return f"atan2({a[0]}, {a[1]})"
    if name in ("min", "max"):
        return f"{'f' if flt else ''}{name}({a[0]}, {a[1]})"
    if name == "abs":
        return f"fabs({a[0]})" if flt else (a[0] if t is T.uint32 else f"({a[0]} < 0 ? -{a[0]} : {a[0]})")
    if name == "sign":
        one, zero, m1 = literal(1, t), literal(0, t), literal(-1, t) if t is not T.uint32 else literal(0, t)
        return f"({a[0]} > {zero} ? {one} : ({a[0]} < {zero} ? {m1} : {zero}))"
    if name == "clamp":
        f = "f" if flt else ""
        return f"{f}min({f}max({a[0]}, {a[1]}), {a[2]})"
    if name in UNARY:
        return f"{UNARY[name]}({a[0]})"
    if name == "where":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if name in CMP:
        return f"({a[0]} {CMP[name]} {a[1]})"
    if name == "and":
        return f"({a[0]} && {a[1]})"
    if name == "or":
        return f"({a[0]} || {a[1]})"
    if name == "not":
        return f"(!{a[0]})"
    if name == "cast":
        to = ins.attrs["to"]
        if to.is_bool:
            return f"({a[0]} != 0)"
        return f"(({CTYPE[to.name]}){a[0]})"
    raise NotImplementedError(f"opencl backend: prim '{name}'")
