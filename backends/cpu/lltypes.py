"""LLVM types of gradkit's scalar types, shared by the CPU code generator's modules."""

from __future__ import annotations

from llvmlite import ir

from ...core import types as T

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()


def llvm_type(t: T.ScalarType):
    return {"float32": F32, "float64": F64, "int32": I32, "int64": I64, "uint32": I32, "bool": I1}[t.name]


def storage_type(t: T.ScalarType):
    return I8 if t.is_bool else llvm_type(t)
