"""The print op on the CPU backend: one call of the C library's `printf` per print (the format a private
constant of the module, float operands widened to double as C's varargs do), then `fflush(NULL)`, so the
text reaches the process's stdout (file descriptor 1) before the launch returns. The replay and adjoint
variants print nothing (core/builtins/printing.py)."""

from __future__ import annotations

import hashlib

from llvmlite import ir

from .lltypes import F32, F64, I8, I32

PTR = ir.PointerType(I8)


def _function(module, name: str, fnty):
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name=name)


def _string(module, text: bytes, hint: str):
    """A private constant NUL-terminated string; one per distinct text in the module."""
    name = f"gk_print_{hint}_{hashlib.sha256(text).hexdigest()[:12]}"     # stable across processes
    g = module.globals.get(name)
    if g is None:
        data = bytearray(text + b"\0")
        arr = ir.ArrayType(I8, len(data))
        g = ir.GlobalVariable(module, arr, name=name)
        g.linkage, g.global_constant, g.initializer = "private", True, ir.Constant(arr, data)
    return g.bitcast(PTR)


def _c_bytes(fmt: str) -> bytes:
    """The bytes a C string literal's text stands for (core/builtins/printing.py writes escapes for C sources)."""
    return fmt.encode("latin-1").decode("unicode_escape").encode("latin-1")


def emit_print(cg, ins, b) -> None:
    """printf(format, operands...) and fflush(NULL) for a forward print; nothing for the other variants."""
    if ins.attrs["variant"] != "forward":
        return
    spec = ins.attrs["native"]
    module = cg.module
    printf = _function(module, "printf", ir.FunctionType(I32, [PTR], var_arg=True))
    fflush = _function(module, "fflush", ir.FunctionType(I32, [PTR]))
    fmt, used = spec.c_format("c")
    args = [_string(module, _c_bytes(fmt), "fmt")]
    for k in used:
        v, t = cg.v(ins.args[k]), spec.types[k]
        if t.is_bool:           # an operand used by `%s` is a bool printed True / False; by `%d`, 0 / 1
            conv = next(p.conv for p in spec.pieces if getattr(p, "arg", None) == k)
            if conv == "b":
                v = b.select(v, _string(module, b"True", "s"), _string(module, b"False", "s"))
            else:
                v = b.zext(v, I32)
        elif v.type == F32:
            v = b.fpext(v, F64)
        args.append(v)
    b.call(printf, args)
    b.call(fflush, [ir.Constant(PTR, None)])
