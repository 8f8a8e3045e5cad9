"""OpenCL C as a dialect of the C-style emitter (backends/cstyle.py): its type names, `__global` pointers,
overloaded math functions and `as_T` bit casts, the prim table, and the helpers pasted into a kernel's
source only when it calls them (fault records, float atomics as compare-and-swap loops).

`CODE_FOR_OP[name](args, t, attrs)` returns a C expression (see cstyle.py). Semantics follow
backends/base.py: casts truncate toward zero, `round` is half away from zero (OpenCL's `round` already
is). Every builtin that names its C math function (`Builtin.cmath`) calls the OpenCL built-in of that name;
floored `//` and `%`, clamp, sign and integer abs arrive written in other primitives (core/passes/expand.py).
"""

from __future__ import annotations

from typing import ClassVar

from ...core import types as T
from ..cstyle import CStyleLanguage, Formatter

# NVIDIA's OpenCL compiler accepts inline PTX: a native float add in L2 instead of a compare-and-swap loop
# (W2's 65536 per-group adds onto one address: 90 ms with CAS on an H100). Defined when the device passed
# the probe in devices.py.
_PTX_ADD = {"float": ("f32", "f"), "double": ("f64", "d")}


class OpenCLLanguage(CStyleLanguage):
    """OpenCL C 1.2: its own scalar type names, `__global` memory, overloaded built-ins (min, max, sin)."""

    name = "OpenCL"
    type_names: ClassVar[dict[str, str]] = {
        "float32": "float", "float64": "double", "int32": "int", "int64": "long", "uint32": "uint",
        "bool": "bool", "uint64": "ulong", "uint8": "uchar"}
    memory_type_names: ClassVar[dict[str, str]] = {"bool": "uchar"}   # bool elements are one byte
    unsigned_names: ClassVar[dict[str, str]] = {"int32": "uint", "int64": "ulong"}
    global_qualifier = "__global "
    function_prefix = "inline"
    int64_suffix = "L"

    def int_minmax(self, kind: str, a: str, b: str) -> str:
        return f"{kind}({a}, {b})"

    def bitcast(self, x: str, to: str) -> str:
        return f"as_{self.type_names[to]}({x})"

    def fault_claim(self, rec: str, code: str) -> str:
        return f"atomic_cmpxchg((volatile __global int*){rec}, 0, {code})"

    def native_atomic(self, kind: str, t: T.ScalarType) -> str:
        """Float adds as native PTX `atom.global.add` where the device passed the probe (GK_PTX_ATOMICS)."""
        if kind != "add":
            return ""
        c = self.ctype(t)
        ptx, reg = _PTX_ADD[c]
        return (f"#ifdef GK_PTX_ATOMICS\n"
                f"    {c} r;\n"
                f"    asm volatile(\"atom.global.add.{ptx} %0, [%1], %2;\" : \"={reg}\"(r) : "
                f"\"l\"(p), \"{reg}\"(v) : \"memory\");\n"
                f"    return r;\n"
                f"#else\n")

    def helper_table(self) -> dict[str, str]:
        return {**self.fault_helper(),
                **self.cas_loops(T.float32, "uint", "atomic_cmpxchg"),
                **self.cas_loops(T.float64, "ulong", "atom_cmpxchg"),
                **self.floored_helpers()}


OPENCL = OpenCLLanguage()
CTYPE = OPENCL.type_names
MEMTYPE = dict(CTYPE, bool="uchar")   # element type inside arrays (bool is one byte)
ARGTYPE = dict(CTYPE, bool="uchar")   # kernel scalar arguments (OpenCL C forbids `bool` kernel arguments)
CODE_FOR_OP: dict[str, Formatter] = OPENCL.code_for_op
HELPERS: dict[str, str] = OPENCL.helpers
ctype = OPENCL.ctype
literal = OPENCL.literal
helpers_for = OPENCL.helpers_for


def formatter(ops: dict[str, Formatter], name: str) -> Formatter | None:
    """The formatter of prim `name`: the table's entry, else a call of the builtin's C math function."""
    return OPENCL.formatter(ops, name)


def _via_double(fn: str) -> Formatter:
    """float32 `fn` computed in float64 and rounded (more accurate; on some CPU runtimes also faster)."""
    return lambda a, t, at: f"(float){fn}((double){a[0]})" if t is T.float32 else f"{fn}({a[0]})"


# PoCL 3 on x86 CPUs (2^24 float32, 2 cores): sin 249 -> 158 ms, cos 293 -> 196, tan 311 -> 165,
# log10 360 -> 187 through double; every other function was as fast or faster in float32.
CPU_FP64_OVERRIDES: dict[str, Formatter] = {name: _via_double(name)
                                           for name in ("sin", "cos", "tan", "log10")}


def op_table(cpu_with_fp64: bool) -> dict[str, Formatter]:
    """The op table for a device: CODE_FOR_OP, with CPU_FP64_OVERRIDES merged in on CPU devices with fp64."""
    return {**CODE_FOR_OP, **CPU_FP64_OVERRIDES} if cpu_with_fp64 else CODE_FOR_OP
