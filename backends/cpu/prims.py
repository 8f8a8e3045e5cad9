"""Scalar primitives → LLVM instructions: one table from prim name to an emitter."""

from __future__ import annotations

from llvmlite import ir

from ...core import types as T
from .lltypes import F32, F64, I1, llvm_type

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


# LLVM fast-math flags under gk.config.fast_math: all but nnan/ninf, so isnan/isinf tests and NaN checks
# keep working while sums reassociate, multiply-adds fuse and x / sqrt(y) may use rsqrt estimates
FAST = ("reassoc", "nsz", "arcp", "contract", "afn")


def _fast(cg) -> tuple:
    return FAST if cg.fast_math else ()


def _intrinsic(cg, name, x):
    return cg.module.declare_intrinsic(name, [x.type])


def _const(x, value):
    return ir.Constant(x.type, value)


def _int_divmod(b, a, d, t, want: str):
    """Python floored // and % for ints; division by zero gives 0 and INT_MIN // -1 wraps (no trap)."""
    zero, one = _const(a, 0), _const(a, 1)
    if t is T.uint32:
        safe = b.select(b.icmp_unsigned("==", d, zero), one, d)
        r = b.udiv(a, safe) if want == "div" else b.urem(a, safe)
        return b.select(b.icmp_unsigned("==", d, zero), zero, r)
    minus1 = _const(a, -1)
    is_m1 = b.icmp_signed("==", d, minus1)
    safe = b.select(b.or_(b.icmp_signed("==", d, zero), is_m1), one, d)
    q = b.sdiv(a, safe)
    r = b.srem(a, safe)
    adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("!=", b.icmp_signed("<", r, zero),
                                                                 b.icmp_signed("<", safe, zero)))
    if want == "div":
        out = b.select(adjust, b.sub(q, one), q)
        out = b.select(is_m1, b.sub(zero, a), out)
    else:
        out = b.select(adjust, b.add(r, safe), r)
        out = b.select(is_m1, zero, out)
    return b.select(b.icmp_signed("==", d, zero), zero, out)


def _cast(b, x, src: T.ScalarType, dst: T.ScalarType):
    if src is dst:
        return x
    to = llvm_type(dst)
    if dst.is_bool:
        return b.fcmp_unordered("!=", x, _const(x, 0.0)) if src.is_float else b.icmp_unsigned("!=", x, _const(x, 0))
    if src.is_bool:
        return b.uitofp(x, to) if dst.is_float else b.zext(x, to)
    if src.is_float and dst.is_float:
        return b.fpext(x, to) if dst.bits > src.bits else b.fptrunc(x, to)
    if src.is_float:
        return b.fptoui(x, to) if dst is T.uint32 else b.fptosi(x, to)
    if dst.is_float:
        return b.uitofp(x, to) if src is T.uint32 else b.sitofp(x, to)
    if dst.bits > src.bits:
        return b.zext(x, to) if src is T.uint32 else b.sext(x, to)
    if dst.bits < src.bits:
        return b.trunc(x, to)
    return x


def emit_prim(cg, ins, b):
    name = ins.attrs["name"]
    args = [cg.v(a) for a in ins.args]
    t = ins.args[0].type if ins.args else ins.result.type
    flt = t.is_scalar and t.is_float
    x = args[0]
    if name in ("add", "sub") and flt:
        # loop sums may reassociate (vectorised partial sums); other float arithmetic keeps its order
        flags = FAST if cg.fast_math else ("reassoc", "nsz") if ins.result.id in cg.loop_sums else ()
        return (b.fadd if name == "add" else b.fsub)(*args, flags=flags)
    if name == "add":
        return b.add(*args)
    if name == "sub":
        return b.sub(*args)
    if name == "mul":
        return b.fmul(*args, flags=_fast(cg)) if flt else b.mul(*args)
    if name == "div":
        return b.fdiv(*args, flags=_fast(cg))
    if name in ("floordiv", "mod"):
        if flt:
            q = b.call(_intrinsic(cg, "llvm.floor", x), [b.fdiv(*args)])
            return q if name == "floordiv" else b.fsub(x, b.fmul(args[1], q))
        return _int_divmod(b, x, args[1], t, "div" if name == "floordiv" else "mod")
    if name == "neg":
        return b.fneg(x) if flt else b.sub(_const(x, 0), x)
    if name in ("min", "max"):
        return cg.minmax(b, name, x, args[1], t)
    if name == "abs":
        if flt:
            return b.call(_intrinsic(cg, "llvm.fabs", x), [x])
        return x if t is T.uint32 else b.select(b.icmp_signed("<", x, _const(x, 0)), b.sub(_const(x, 0), x), x)
    if name == "sign":
        if flt:
            pos = b.fcmp_ordered(">", x, _const(x, 0.0))
            neg = b.fcmp_ordered("<", x, _const(x, 0.0))
            return b.select(pos, _const(x, 1.0), b.select(neg, _const(x, -1.0), _const(x, 0.0)))
        if t is T.uint32:
            return b.select(b.icmp_unsigned(">", x, _const(x, 0)), _const(x, 1), _const(x, 0))
        pos = b.icmp_signed(">", x, _const(x, 0))
        return b.select(pos, _const(x, 1), b.select(b.icmp_signed("<", x, _const(x, 0)), _const(x, -1), _const(x, 0)))
    if name in ("floor", "ceil", "round", "sqrt"):
        return b.call(_intrinsic(cg, f"llvm.{name}", x), [x], fastmath=_fast(cg) if name == "sqrt" else ())
    if name == "clamp":
        return cg.minmax(b, "min", cg.minmax(b, "max", x, args[1], t), args[2], t)
    if name == "where":
        return b.select(*args)
    if name in _CMP:
        op = _CMP[name]
        if flt:
            return b.fcmp_unordered(op, *args) if name == "ne" else b.fcmp_ordered(op, *args)
        if t is T.uint32 or t.is_bool:
            return b.icmp_unsigned(op, *args)
        return b.icmp_signed(op, *args)
    if name == "and":
        return b.and_(*args)
    if name == "or":
        return b.or_(*args)
    if name == "not":
        return b.xor(x, ir.Constant(I1, 1))
    if name == "cast":
        return _cast(b, x, t, ins.attrs["to"])
    if name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp", "log", "log2", "log10",
                "atan2", "pow"):
        return cg.math.call(b, name, args)
    raise NotImplementedError(f"cpu backend: prim '{name}'")


__all__ = ["emit_prim", "F32", "F64"]
