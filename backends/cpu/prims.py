"""Scalar primitives → LLVM instructions: one table from prim name to an emitter (`CODE_FOR_OP`), plus a
libm call for every builtin that names its C math function (`Builtin.cmath`)."""

from __future__ import annotations

from llvmlite import ir

from ...core import types as T
from ...core.builtins import BUILTINS
from .lltypes import I1, llvm_type

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


def _float_or_int(on_float, on_int):
    return lambda cg, b, a, t, ins: on_float(cg, b, a) if t.is_float else on_int(cg, b, a)


def _addsub(name):
    """Loop sums may reassociate (vectorised partial sums); other float arithmetic keeps its order."""
    def emit(cg, b, a, t, ins):
        if not t.is_float:
            return (b.add if name == "add" else b.sub)(*a)
        flags = FAST if cg.fast_math else ("reassoc", "nsz") if ins.result.id in cg.loop_sums else ()
        return (b.fadd if name == "add" else b.fsub)(*a, flags=flags)
    return emit


def _intrinsic_call(name, fast=False):
    return lambda cg, b, a, t, ins: b.call(_intrinsic(cg, f"llvm.{name}", a[0]), a, fastmath=_fast(cg) if fast else ())


def _compare(op):
    def emit(cg, b, a, t, ins):
        if t.is_float:
            return b.fcmp_unordered(op, *a) if op == "!=" else b.fcmp_ordered(op, *a)
        return b.icmp_unsigned(op, *a) if t is T.uint32 or t.is_bool else b.icmp_signed(op, *a)
    return emit


def _int_division(signed, unsigned):
    """C's truncating / and % (the expand pass guarantees a divisor that is neither 0 nor -1 with MIN)."""
    return lambda cg, b, a, t, ins: getattr(b, unsigned if t is T.uint32 else signed)(*a)


def _shift(signed, unsigned):
    """x << n / x >> n with n taken modulo the bit width (as OpenCL C): LLVM leaves larger counts undefined."""
    def emit(cg, b, a, t, ins):
        n = b.and_(a[1], _const(a[1], t.bits - 1))
        return getattr(b, unsigned if t is T.uint32 else signed)(a[0], n)
    return emit


# prim name -> emitter(codegen, builder, operand values, operand type, instruction). Primitives with an
# `expand` rule (floored // and %, clamp, sign, integer abs) arrive expanded; `cmath` ones call libm.
CODE_FOR_OP = {
    "add": _addsub("add"), "sub": _addsub("sub"),
    "mul": _float_or_int(lambda cg, b, a: b.fmul(*a, flags=_fast(cg)), lambda cg, b, a: b.mul(*a)),
    "div": lambda cg, b, a, t, ins: b.fdiv(*a, flags=_fast(cg)),
    "idiv": _int_division("sdiv", "udiv"), "irem": _int_division("srem", "urem"),
    "neg": _float_or_int(lambda cg, b, a: b.fneg(a[0]), lambda cg, b, a: b.sub(_const(a[0], 0), a[0])),
    "min": lambda cg, b, a, t, ins: cg.minmax(b, "min", *a, t),
    "max": lambda cg, b, a, t, ins: cg.minmax(b, "max", *a, t),
    "abs": _intrinsic_call("fabs"),
    "floor": _intrinsic_call("floor"), "ceil": _intrinsic_call("ceil"), "round": _intrinsic_call("round"),
    "sqrt": _intrinsic_call("sqrt", fast=True),
    "where": lambda cg, b, a, t, ins: a[1] if cg.inside(ins) else b.select(*a),
    **{name: _compare(op) for name, op in _CMP.items()},
    "and": lambda cg, b, a, t, ins: b.and_(*a),
    "or": lambda cg, b, a, t, ins: b.or_(*a),
    "not": lambda cg, b, a, t, ins: b.xor(a[0], ir.Constant(I1, 1)),
    "cast": lambda cg, b, a, t, ins: _cast(b, a[0], t, ins.attrs["to"]),
    "bit_and": lambda cg, b, a, t, ins: b.and_(*a), "bit_or": lambda cg, b, a, t, ins: b.or_(*a),
    "bit_xor": lambda cg, b, a, t, ins: b.xor(*a), "bit_not": lambda cg, b, a, t, ins: b.not_(a[0]),
    "shl": _shift("shl", "shl"), "shr": _shift("ashr", "lshr"),
}


def emit_prim(cg, ins, b):
    name = ins.attrs["name"]
    args = [cg.v(a) for a in ins.args]
    t = ins.args[0].type if ins.args else ins.result.type
    emit = CODE_FOR_OP.get(name)
    if emit is not None:
        return emit(cg, b, args, t, ins)
    entry = BUILTINS.get(name)
    if entry is not None and entry.cmath is not None:
        return cg.math.call(b, entry.cmath, args)
    raise NotImplementedError(f"cpu backend: prim '{name}'")
