"""A reusable C-style source emitter for lowered core IR: how a C dialect spells scalar code
(`CStyleLanguage`: type names, literals, the prim op table, the helper prelude) and the walk over one
kernel that writes it (`CStyleKernel`: variables, structured control flow, memory access with debug
bounds checks, the value stack, native snippets, reduction accumulators).

A dialect subclasses both and overrides only what it spells differently: type names, the address-space
qualifier of array pointers, atomics, bit casts, math function names (`sinf` in C, overloaded `sin` in
OpenCL C), the thread index and the kernel signature. The OpenCL backend (backends/opencl/) and the
`c` example plugin (examples/c_backend/) are the two dialects gradkit ships.

The op table maps each `prim` name to a formatter `(args, t, attrs) -> C expression`, where `args` are C
expressions (variable names or literals, so repeating one has no side effect), `t` the operand type and
`attrs` the instruction's attributes; a builtin missing from the table calls its C math function
(`Builtin.cmath`). The table also spells the expandable prims (floored `//` and `%`, clamp, sign, integer
abs, rsqrt), which reach a backend only when it lists them in `native_prims`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ..core import types as T
from ..core.builtins import BUILTINS

Formatter = Callable[[list, T.ScalarType, dict], str]


class CStyleLanguage:
    """The spelling of one C dialect; the defaults are C99 with <stdint.h> types. Subclass and override
    what differs; `op_table()` subclasses merge entries into `super().op_table()`."""

    name = "C"                                 # the dialect, as messages name it
    # scalar type name -> C type; "uint64" and "uint8" name the value stack's slots and bool elements
    type_names: ClassVar[dict[str, str]] = {
        "float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "uint32": "uint32_t",
        "bool": "bool", "uint64": "uint64_t", "uint8": "uint8_t"}
    # array elements whose type differs from type_names (bool: one byte)
    memory_type_names: ClassVar[dict[str, str]] = {"bool": "uint8_t"}
    # same-width unsigned twins of the signed types, for wrapping arithmetic
    unsigned_names: ClassVar[dict[str, str]] = {"int32": "uint32_t", "int64": "uint64_t"}
    global_qualifier = ""                      # address space of array pointers ("__global " in OpenCL C)
    function_prefix = "static inline"          # of helper and native-snippet functions
    int64_suffix = "LL"

    def __init__(self) -> None:
        self.code_for_op: dict[str, Formatter] = self.op_table()
        self.helpers: dict[str, str] = {**self.helper_table(), **self.cas_fallbacks()}

    # ------------------------------------------------------------------ types and literals
    def ctype(self, t: T.ScalarType) -> str:
        return self.type_names[t.name]

    def memtype(self, t: T.ScalarType) -> str:
        """The C type of an array element of scalar type `t`."""
        return self.memory_type_names.get(t.name, self.type_names[t.name])

    def literal(self, value, t: T.ScalarType) -> str:
        """An exact literal of type `t`: hex floats (`f` suffix for float32), suffixed 64-bit/unsigned
        ints."""
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
            s = self.int64_suffix
            return f"({v}{s})" if v != -2**63 else f"(-9223372036854775807{s}-1{s})"
        v = (v + 2**31) % 2**32 - 2**31
        return f"({v})" if v != -2**31 else "(-2147483647-1)"

    # ------------------------------------------------------------------ spellings a dialect overrides
    def math_name(self, fn: str, t: T.ScalarType) -> str:
        """The C function computing math function `fn` on type `t` (C dialects with overloads keep `fn`)."""
        return fn

    def int_minmax(self, kind: str, a: str, b: str) -> str:
        """Integer min/max of two side-effect-free expressions."""
        return f"({a} {'<' if kind == 'min' else '>'} {b} ? {a} : {b})"

    def plain_minmax(self, kind: str, a: str, b: str, t: T.ScalarType) -> str:
        """min/max as atomics compute it (C's fmin/fmax on floats: a NaN operand is dropped)."""
        return f"{self.math_name('f' + kind, t)}({a}, {b})" if t.is_float else self.int_minmax(kind, a, b)

    def bitcast(self, x: str, to: str) -> str:
        """Reinterpret the bits of `x` as type `to` (a type_names key: uint32, float32, uint64, float64)."""
        return f"gk_as_{to}({x})"

    def to_bits(self, x: str, t: T.ScalarType) -> str:
        """A scalar as the 64-bit slot of the value stack (floats bit for bit)."""
        u64 = self.type_names["uint64"]
        if t is T.float64:
            return self.bitcast(x, "uint64")
        if t is T.float32:
            return f"({u64}){self.bitcast(x, 'uint32')}"
        return f"({u64})({x})"

    def from_bits(self, raw: str, t: T.ScalarType) -> str:
        """The scalar of type `t` held in a value-stack slot."""
        if t is T.float64:
            return self.bitcast(raw, "float64")
        if t is T.float32:
            return self.bitcast(f"({self.type_names['uint32']}){raw}", "float32")
        if t.is_bool:
            return f"({raw} != 0UL)"
        return f"({self.ctype(t)}){raw}"

    def fault_claim(self, rec: str, code: str) -> str:
        """An expression atomically setting the low 32 bits of rec[0] to `code` if they are 0; its value is
        what they held (0: this fault is the first)."""
        raise NotImplementedError(f"the {self.name} dialect must spell fault_claim (a compare-and-swap)")

    # ------------------------------------------------------------------ the op table
    def infix(self, op: str) -> Formatter:
        return lambda a, t, at: f"({a[0]} {op} {a[1]})"

    def call(self, fn: str) -> Formatter:
        """A call of C math function `fn`, named for the operand type."""
        return lambda a, t, at: f"{self.math_name(fn, t)}({', '.join(a)})"

    def minmax(self, kind: str) -> Formatter:
        """min/max: NaN-propagating on floats, as NumPy's minimum/maximum (C's fmin/fmax drop a NaN)."""
        def fmt(a, t, at):
            if not t.is_float:
                return self.int_minmax(kind, a[0], a[1])
            return (f"((isnan({a[0]}) || isnan({a[1]})) ? ({a[0]} + {a[1]}) : "
                    f"{self.math_name('f' + kind, t)}({a[0]}, {a[1]}))")
        return fmt

    def neg(self, a, t, at) -> str:
        """-x; signed integers negate through unsigned arithmetic, so MIN wraps to MIN (C leaves it
        undefined)."""
        if t.is_float or t is T.uint32:
            return f"(-{a[0]})"
        c, u = self.ctype(t), self.unsigned_names[t.name]
        return f"(({c})(({u})0 - ({u}){a[0]}))"

    def cast(self, a, t, at) -> str:
        """Float → int truncates toward zero (C's conversion); → bool is `!= 0`."""
        to: T.ScalarType = at["to"]
        if to is t:
            return a[0]
        if to.is_bool:
            return f"({a[0]} != 0)"
        return f"(({self.ctype(to)}){a[0]})"

    def shift(self, op: str) -> Formatter:
        """x << n and x >> n with n taken modulo the bit width; << goes through unsigned (C leaves shifting a
        negative signed value undefined), >> of a signed type is arithmetic."""
        def fmt(a, t, at):
            n = f"({a[1]} & {t.bits - 1})"
            if op == "<<" and t.name in self.unsigned_names:
                c, u = self.ctype(t), self.unsigned_names[t.name]
                return f"(({c})(({u}){a[0]} << {n}))"
            return f"({a[0]} {op} {n})"
        return fmt

    def floored(self, want: str) -> Formatter:
        """Python's floored `//` (want="div") or `%` ("mod"), with x // 0 == x % 0 == 0 on integers."""
        def fmt(a, t, at):
            x, d = a
            if t.is_float:
                q = f"{self.math_name('floor', t)}(({x} / {d}))"
                return q if want == "div" else f"({x} - {d} * {q})"
            if t is T.uint32:
                return f"({d} == 0u ? 0u : {x} {'/' if want == 'div' else '%'} {d})"
            return f"gk_floor{want}_{t.name}({x}, {d})"
        return fmt

    def c_rem(self, a, t, at) -> str:
        """C's truncated `%` (floats: fmod), with x % 0 == x % -1 == 0 on integers (never a trap)."""
        x, d = a
        if t.is_float:
            return f"{self.math_name('fmod', t)}({x}, {d})"
        zero = self.literal(0, t)
        bad = f"{d} == {zero}" if t is T.uint32 else f"{d} == {zero} || {d} == {self.literal(-1, t)}"
        return f"(({bad}) ? {zero} : {x} % {d})"

    def sign(self, a, t, at) -> str:
        """-1, 0 or 1 as NumPy's sign: NaN stays NaN, -0.0 gives +0.0."""
        x, one, zero = a[0], self.literal(1, t), self.literal(0, t)
        if t is T.uint32:
            return f"({x} > {zero} ? {one} : {zero})"
        rest = f"({x} != {x} ? {x} : {zero})" if t.is_float else zero
        return f"({x} > {zero} ? {one} : ({x} < {zero} ? {self.literal(-1, t)} : {rest}))"

    def abs_(self, a, t, at) -> str:
        if t.is_float:
            return f"{self.math_name('fabs', t)}({a[0]})"
        if t is T.uint32:
            return a[0]
        return f"({a[0]} < {self.literal(0, t)} ? {self.neg(a, t, at)} : {a[0]})"

    def op_table(self) -> dict[str, Formatter]:
        """prim name → formatter. Subclasses merge overrides: `{**super().op_table(), "sin": ...}`."""
        mn, mx = self.minmax("min"), self.minmax("max")
        return {
            "add": self.infix("+"), "sub": self.infix("-"), "mul": self.infix("*"), "div": self.infix("/"),
            "neg": self.neg,
            "idiv": self.infix("/"), "irem": self.infix("%"),    # truncating; the divisor is never 0 here
            "min": mn, "max": mx,
            "where": lambda a, t, at: f"({a[0]} ? {a[1]} : {a[2]})",
            "lt": self.infix("<"), "le": self.infix("<="), "gt": self.infix(">"), "ge": self.infix(">="),
            "eq": self.infix("=="), "ne": self.infix("!="),
            "and": self.infix("&&"), "or": self.infix("||"), "not": lambda a, t, at: f"(!{a[0]})",
            "cast": self.cast,
            "bit_and": self.infix("&"), "bit_or": self.infix("|"), "bit_xor": self.infix("^"),
            "bit_not": lambda a, t, at: f"(~{a[0]})",
            "shl": self.shift("<<"), "shr": self.shift(">>"),
            # expandable prims: they arrive only where a backend lists them in native_prims
            "floordiv": self.floored("div"), "mod": self.floored("mod"), "rem": self.c_rem,
            "clamp": lambda a, t, at: mn([mx(a[:2], t, at), a[2]], t, at),
            "sign": self.sign, "abs": self.abs_,
            "rsqrt": lambda a, t, at: f"({self.literal(1, t)} / {self.math_name('sqrt', t)}({a[0]}))",
            "stop_gradient": lambda a, t, at: a[0],
        }

    def formatter(self, ops: dict[str, Formatter], name: str) -> Formatter | None:
        """The formatter of prim `name`: the table's entry, else a call of the builtin's C math function."""
        fmt = ops.get(name)
        if fmt is None:
            entry = BUILTINS.get(name)
            if entry is not None and entry.cmath is not None:
                return self.call(entry.cmath)
        return fmt

    # ------------------------------------------------------------------ the helper prelude
    def fault_helper(self) -> dict[str, str]:
        i32, i64, g = self.type_names["int32"], self.type_names["int64"], self.global_qualifier
        return {"gk_fault": (
            "/* Record a fault (first one wins): code in the low 32 bits of rec[0], then site, value, "
            "extent, axis. */\n"
            f"{self.function_prefix} void gk_fault({g}{i64}* rec, {i32} code, {i64} site, {i64} value, "
            f"{i64} extent, {i64} axis) {{\n"
            f"    if ({self.fault_claim('rec', 'code')} == 0) {{\n"
            "        rec[1] = site; rec[2] = value; rec[3] = extent; rec[4] = axis;\n"
            "    }\n}\n")}

    def cas_loops(self, t: T.ScalarType, bits: str, cmpxchg: str,
                  kinds=("add", "min", "max"), prefix: str = "gk_atomic") -> dict[str, str]:
        """Atomic read-modify-writes of `t` as compare-and-swap loops on its bit pattern (`bits`, the unsigned
        type of its width; `cmpxchg(p, expected, desired)` returns what *p held); each returns the old
        value."""
        c, g = self.ctype(t), self.global_qualifier
        out = {}
        for kind in kinds:
            expr = {"add": "old.f + v", "sub": "old.f - v", "xchg": "v"}.get(kind) or \
                self.plain_minmax(kind, "old.f", "v", t)
            skip = "" if kind in ("add", "sub", "xchg") else \
                "        if (upd.u == old.u) return old.f;   /* nothing to write */\n"
            native = self.native_atomic(kind, t) if prefix == "gk_atomic" else ""
            name = f"{prefix}_{kind}_{c}"
            out[name] = (
                f"{self.function_prefix} {c} {name}(volatile {g}{c}* p, {c} v) {{\n{native}"
                f"    union {{ {bits} u; {c} f; }} old, upd;\n"
                f"    old.f = *p;\n"
                f"    for (;;) {{\n"
                f"        upd.f = {expr};\n{skip}"
                f"        const {bits} seen = {cmpxchg}((volatile {g}{bits}*)p, old.u, upd.u);\n"
                f"        if (seen == old.u) return old.f;\n"
                f"        old.u = seen;\n"
                f"    }}\n" + ("#endif\n" if native else "") + "}\n")
        return out

    def cas_function(self, bits: int) -> str | None:
        """The name of this dialect's compare-and-swap helper on `bits`-wide unsigned words
        (`f(p, expected, desired)` returning what *p held), or None: then atomics the backend does not
        declare cannot be written as CAS loops (core/passes/lower_capabilities.py marks them `cas`)."""
        return None

    def cas_fallbacks(self) -> dict[str, str]:
        """`gk_casloop_<kind>_<type>` helpers: every atomic kind on every numeric type as a CAS loop over the
        dialect's `cas_function`, for atomics the lowering marked `cas` (those the backend lacks)."""
        out: dict[str, str] = {}
        for t in (T.float32, T.float64, T.int32, T.int64, T.uint32):
            fn = self.cas_function(t.bits)
            if fn is None:
                continue
            bits = self.unsigned_names.get(t.name) or self.unsigned_names.get(
                "int32" if t.bits == 32 else "int64")
            out.update(self.cas_loops(t, bits, fn, kinds=("add", "sub", "min", "max", "xchg"),
                                      prefix="gk_casloop"))
        return out

    def cas_atomic(self, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
        """Atomic `kind` of `v` into lvalue `ptr` as a compare-and-swap loop, giving the old value."""
        if self.cas_function(st.bits) is None:
            raise NotImplementedError(f"the {self.name} dialect has no compare-and-swap for atomic {kind}")
        return f"gk_casloop_{kind}_{self.ctype(st)}(&{ptr}, {v})"

    def native_atomic(self, kind: str, t: T.ScalarType) -> str:
        """Code opening a CAS-loop helper that may do the update natively instead: `#ifdef X ... #else`
        (closed by the helper), or "" for none."""
        return ""

    def floored_helpers(self) -> dict[str, str]:
        """Signed integer floored // and % (x // 0 == x % 0 == 0, MIN // -1 wraps) for native floordiv
        and mod."""
        out = {}
        for t in (T.int32, T.int64):
            c, u, f = self.ctype(t), self.unsigned_names[t.name], self.function_prefix
            adjust = "(r != 0 && ((r < 0) != (d < 0)))"
            out[f"gk_floordiv_{t.name}"] = (
                f"{f} {c} gk_floordiv_{t.name}({c} x, {c} d) {{\n"
                f"    if (d == 0) return 0;\n"
                f"    if (d == -1) return ({c})(({u})0 - ({u})x);\n"
                f"    const {c} q = x / d, r = x % d;\n"
                f"    return {adjust} ? q - 1 : q;\n}}\n")
            out[f"gk_floormod_{t.name}"] = (
                f"{f} {c} gk_floormod_{t.name}({c} x, {c} d) {{\n"
                f"    if (d == 0 || d == -1) return 0;\n"
                f"    const {c} r = x % d;\n"
                f"    return {adjust} ? r + d : r;\n}}\n")
        return out

    def helper_table(self) -> dict[str, str]:
        """name → definition; a kernel's source gets the ones it calls, in this order (dependencies
        first)."""
        return {**self.fault_helper(), **self.floored_helpers()}

    def helpers_for(self, body: str) -> str:
        """The helper definitions `body` calls, directly or through other helpers, in table order."""
        used: set[str] = set()
        text, grew = body, True
        while grew:
            grew = False
            for name, code in self.helpers.items():
                if name not in used and f"{name}(" in text:
                    used.add(name)
                    text += code
                    grew = True
        return "".join(code for name, code in self.helpers.items() if name in used)


# the kernel walker lives beside this module; a dialect imports both from here
from .cstyle_kernel import ArrayInfo, CStyleKernel, ident

__all__ = ["ArrayInfo", "CStyleKernel", "CStyleLanguage", "Formatter", "ident"]
