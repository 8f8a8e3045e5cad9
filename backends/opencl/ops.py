"""Scalar ops → OpenCL C: C type names, exact literals, and one table from prim name to a formatter.

`CODE_FOR_OP[name](args, t, attrs)` returns a C expression, where `args` are C expressions (variable
names or literals) for the operands, `t` is the operand type (the first argument's) and `attrs` the
instruction's attributes. Semantics follow backends/base.py: casts truncate toward zero, `round` is
half away from zero (OpenCL's `round` already is). Every builtin that names its C math function
(`Builtin.cmath`) calls the OpenCL built-in of that name; floored `//` and `%`, clamp, sign and integer
abs arrive written in other primitives (core/passes/expand.py). Helpers the generated code calls
(atomics, fault records) live in `HELPERS` and are pasted into a kernel's source only when used.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...core import types as T
from ...core.builtins import BUILTINS

CTYPE = {"float32": "float", "float64": "double", "int32": "int", "int64": "long", "uint32": "uint",
         "bool": "bool"}
MEMTYPE = dict(CTYPE, bool="uchar")   # element type inside arrays (bool is one byte)
ARGTYPE = dict(CTYPE, bool="uchar")   # kernel scalar arguments (OpenCL C forbids `bool` kernel arguments)
UNSIGNED = {"int": "uint", "long": "ulong"}


def ctype(t: T.ScalarType) -> str:
    return CTYPE[t.name]


def literal(value, t: T.ScalarType) -> str:
    """An exact C literal of type `t`: hex floats (`f` suffix for float32), suffixed 64-bit/unsigned ints."""
    if t.is_bool:
        return "true" if value else "false"
    if t.is_float:
        x = float(value)
        if t is T.float32:
            with np.errstate(over="ignore"):
                x = float(np.float32(x))      # the float32 nearest the value (overflow gives inf)
        if math.isnan(x):
            return "NAN" if t is T.float32 else "((double)NAN)"
        if abs(x) == float("inf"):
            inf = "INFINITY" if t is T.float32 else "((double)INFINITY)"
            return inf if x > 0 else f"(-{inf})"
        mant, exp = x.hex().split("p")
        text = mant.rstrip("0").rstrip(".") + "p" + exp      # 0x1.8000000000000p+1 -> 0x1.8p+1 (exact)
        return f"({text}f)" if t is T.float32 else f"({text})"
    v = int(value)
    if t is T.uint32:
        return f"({v & 0xFFFFFFFF}u)"
    if t is T.int64:
        v = (v + 2**63) % 2**64 - 2**63
        return f"({v}L)" if v != -2**63 else "(-9223372036854775807L-1L)"
    v = (v + 2**31) % 2**32 - 2**31
    return f"({v})" if v != -2**31 else "(-2147483647-1)"


# --------------------------------------------------------------------------- the op table

Formatter = Callable[[list, T.ScalarType, dict], str]


def _infix(op: str) -> Formatter:
    return lambda a, t, at: f"({a[0]} {op} {a[1]})"


def _call(fn: str) -> Formatter:
    return lambda a, t, at: f"{fn}({', '.join(a)})"


def _minmax(fn: str) -> Formatter:
    """min/max: NaN-propagating on floats, as NumPy's minimum/maximum (OpenCL's fmin/fmax drop a NaN)."""
    def fmt(a, t, at):
        if not t.is_float:
            return f"{fn}({a[0]}, {a[1]})"
        return f"((isnan({a[0]}) || isnan({a[1]})) ? ({a[0]} + {a[1]}) : f{fn}({a[0]}, {a[1]}))"
    return fmt


def _neg(a, t, at):
    """-x; signed integers negate through unsigned arithmetic, so MIN wraps to MIN (C leaves it undefined)."""
    if t.is_float or t is T.uint32:
        return f"(-{a[0]})"
    c = ctype(t)
    return f"(({c})(({UNSIGNED[c]})0 - ({UNSIGNED[c]}){a[0]}))"


def _cast(a, t, at):
    to: T.ScalarType = at["to"]
    if to is t:
        return a[0]
    if to.is_bool:
        return f"({a[0]} != 0)"
    return f"(({ctype(to)}){a[0]})"


def _shift(op: str) -> Formatter:
    """x << n and x >> n with n taken modulo the bit width; << goes through unsigned (C leaves shifting a
    negative signed value undefined), >> of a signed type is arithmetic."""
    def fmt(a, t, at):
        c = ctype(t)
        n = f"({a[1]} & {t.bits - 1})"
        if op == "<<" and c in UNSIGNED:
            return f"(({c})(({UNSIGNED[c]}){a[0]} << {n}))"
        return f"({a[0]} {op} {n})"
    return fmt


CODE_FOR_OP: dict[str, Formatter] = {
    "add": _infix("+"), "sub": _infix("-"), "mul": _infix("*"), "div": _infix("/"), "neg": _neg,
    "idiv": _infix("/"), "irem": _infix("%"),      # truncating; the expansion of // and % guards the divisor
    "min": _minmax("min"), "max": _minmax("max"),
    "where": lambda a, t, at: f"({a[0]} ? {a[1]} : {a[2]})",
    "lt": _infix("<"), "le": _infix("<="), "gt": _infix(">"), "ge": _infix(">="),
    "eq": _infix("=="), "ne": _infix("!="),
    "and": _infix("&&"), "or": _infix("||"), "not": lambda a, t, at: f"(!{a[0]})",
    "cast": _cast,
    "bit_and": _infix("&"), "bit_or": _infix("|"), "bit_xor": _infix("^"), "bit_not": lambda a, t, at: f"(~{a[0]})",
    "shl": _shift("<<"), "shr": _shift(">>"),
}


def _via_double(fn: str) -> Formatter:
    """float32 `fn` computed in float64 and rounded (more accurate; on some CPU runtimes also faster)."""
    return lambda a, t, at: f"(float){fn}((double){a[0]})" if t is T.float32 else f"{fn}({a[0]})"


# PoCL 3 on x86 CPUs (2^24 float32, 2 cores): sin 249 -> 158 ms, cos 293 -> 196, tan 311 -> 165,
# log10 360 -> 187 through double; every other function was as fast or faster in float32.
CPU_FP64_OVERRIDES: dict[str, Formatter] = {name: _via_double(name) for name in ("sin", "cos", "tan", "log10")}


def formatter(ops: dict[str, Formatter], name: str) -> Formatter | None:
    """The formatter of prim `name`: the table's entry, else a call of the builtin's C math function."""
    fmt = ops.get(name)
    if fmt is None:
        entry = BUILTINS.get(name)
        if entry is not None and entry.cmath is not None:
            return _call(entry.cmath)
    return fmt


def op_table(cpu_with_fp64: bool) -> dict[str, Formatter]:
    """The op table for a device: CODE_FOR_OP, with CPU_FP64_OVERRIDES merged in on CPU devices with fp64."""
    return {**CODE_FOR_OP, **CPU_FP64_OVERRIDES} if cpu_with_fp64 else CODE_FOR_OP


# --------------------------------------------------------------------------- helpers (pasted on demand)

# NVIDIA's OpenCL compiler accepts inline PTX: a native float add in L2 instead of a compare-and-swap loop
# (W2's 65536 per-group adds onto one address: 90 ms with CAS on an H100). Defined when the device passed
# the probe in devices.py.
_PTX_ADD = {"float": ("f32", "f"), "double": ("f64", "d")}


def _float_atomics(c: str, bits: str, cmpxchg: str) -> dict[str, str]:
    """Float atomics as compare-and-swap loops on the value's bit pattern (add natively where the device
    takes inline PTX, GK_PTX_ATOMICS); each returns the old value."""
    out = {}
    for op, expr in (("add", "old.f + v"), ("min", "fmin(old.f, v)"), ("max", "fmax(old.f, v)")):
        skip = "" if op == "add" else "        if (upd.u == old.u) return old.f;   /* nothing to write */\n"
        native = ""
        if op == "add":
            ptx, reg = _PTX_ADD[c]
            native = (f"#ifdef GK_PTX_ATOMICS\n"
                      f"    {c} r;\n"
                      f"    asm volatile(\"atom.global.add.{ptx} %0, [%1], %2;\" : \"={reg}\"(r) : \"l\"(p), \"{reg}\"(v) : \"memory\");\n"
                      f"    return r;\n"
                      f"#else\n")
        out[f"gk_atomic_{op}_{c}"] = (
            f"inline {c} gk_atomic_{op}_{c}(volatile __global {c}* p, {c} v) {{\n{native}"
            f"    union {{ {bits} u; {c} f; }} old, upd;\n"
            f"    old.f = *p;\n"
            f"    for (;;) {{\n"
            f"        upd.f = {expr};\n{skip}"
            f"        const {bits} seen = {cmpxchg}((volatile __global {bits}*)p, old.u, upd.u);\n"
            f"        if (seen == old.u) return old.f;\n"
            f"        old.u = seen;\n"
            f"    }}\n" + ("#endif\n" if native else "") + "}\n")
    return out


FAULT_HELPER = {
    "gk_fault": (
        "/* Record a fault (first one wins): code in the low 32 bits of rec[0], then site, value, extent, axis. */\n"
        "inline void gk_fault(__global long* rec, int code, long site, long value, long extent, long axis) {\n"
        "    if (atomic_cmpxchg((volatile __global int*)rec, 0, code) == 0) {\n"
        "        rec[1] = site; rec[2] = value; rec[3] = extent; rec[4] = axis;\n"
        "    }\n}\n"),
}

HELPERS: dict[str, str] = {
    **FAULT_HELPER,
    **_float_atomics("float", "uint", "atomic_cmpxchg"),
    **_float_atomics("double", "ulong", "atom_cmpxchg"),
}


def helpers_for(body: str) -> str:
    """The helper definitions `body` calls, in a fixed order."""
    return "".join(code for name, code in HELPERS.items() if f"{name}(" in body)
