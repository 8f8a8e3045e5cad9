"""The `c` example's C dialect frozen at contract version 1: C99 with GNU `__atomic` builtins, spelling only
the primitives and atomic kinds version 1 had (no erf, idiv/irem, shifts, bit operations, fmod, exchange).
Anything else reaching it is a defect of gradkit's capability lowering, and raises."""

from __future__ import annotations

from gradkit.backends.capabilities import defaults
from gradkit.backends.cstyle import CStyleLanguage
from gradkit.core import types as T

V1 = defaults(1)

# Bit-cast helpers: memcpy is the defined way to reinterpret bits in C (it compiles to one register move).
_BITCASTS = (("uint32", "float32"), ("float32", "uint32"), ("uint64", "float64"), ("float64", "uint64"))


class CLanguage(CStyleLanguage):
    """The spelling the defaults give (C99, <stdint.h> types, no address spaces), plus float32 math through
    the `f`-suffixed C functions and GNU atomics."""

    name = "C"

    def math_name(self, fn: str, t: T.ScalarType) -> str:
        return fn + "f" if t is T.float32 else fn

    def fault_claim(self, rec: str, code: str) -> str:
        return f"gk_cas_u32((volatile uint32_t*){rec}, 0, (uint32_t){code})"

    def bitcast_helpers(self) -> dict[str, str]:
        out = {}
        for src, dst in _BITCASTS:
            s, d = self.type_names[src], self.type_names[dst]
            out[f"gk_as_{dst}"] = (f"static inline {d} gk_as_{dst}({s} x) {{ "
                                   f"{d} y; memcpy(&y, &x, sizeof y); return y; }}\n")
        return out

    def cas_helpers(self) -> dict[str, str]:
        """gk_cas_uN(p, expected, desired): one compare-and-swap, returning what *p held."""
        out = {}
        for bits in (32, 64):
            u = f"uint{bits}_t"
            out[f"gk_cas_u{bits}"] = (
                f"static inline {u} gk_cas_u{bits}(volatile {u}* p, {u} expected, {u} desired) {{\n"
                f"    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, "
                f"__ATOMIC_RELAXED);\n"
                f"    return expected;\n}}\n")
        return out

    def helper_table(self) -> dict[str, str]:
        return {**self.cas_helpers(), **self.bitcast_helpers(), **self.fault_helper(),
                **self.cas_loops(T.float32, "uint32_t", "gk_cas_u32"),
                **self.cas_loops(T.float64, "uint64_t", "gk_cas_u64"),
                **self.cas_loops(T.int32, "uint32_t", "gk_cas_u32", kinds=("min", "max")),
                **self.cas_loops(T.uint32, "uint32_t", "gk_cas_u32", kinds=("min", "max")),
                **self.cas_loops(T.int64, "uint64_t", "gk_cas_u64", kinds=("min", "max")),
                **self.floored_helpers()}

    def op_table(self) -> dict:
        """Only version 1's primitives: a later one arriving here raises (see `formatter`)."""
        return {name: fmt for name, fmt in super().op_table().items() if name in V1.primitives}

    def formatter(self, ops, name):
        if name not in V1.primitives:
            raise NotImplementedError(f"the contract-1 C dialect has no primitive '{name}': gradkit should "
                                      "have lowered it (core/passes/lower_capabilities.py)")
        return super().formatter(ops, name)

    def atomic(self, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
        """Atomic `kind` of `v` into lvalue `ptr`, giving the old value: GNU `__atomic` builtins on integers,
        compare-and-swap loops for float add/min/max and integer min/max (version 1 had no exchange)."""
        relaxed = "__ATOMIC_RELAXED"
        if kind not in V1.atomics:
            raise NotImplementedError(f"the contract-1 C dialect has no atomic '{kind}'")
        if st.is_float:
            op, arg = ("add", f"-{v}") if kind == "sub" else (kind, v)
            return f"gk_atomic_{op}_{self.ctype(st)}(&{ptr}, {arg})"
        if kind in ("add", "sub"):
            return f"__atomic_fetch_{kind}(&{ptr}, {v}, {relaxed})"
        return f"gk_atomic_{kind}_{self.ctype(st)}(&{ptr}, {v})"

    def cas_function(self, bits: int) -> str:
        """The compare-and-swap helper a plugin declaring the `cas` feature lends to missing atomics."""
        return f"gk_cas_u{bits}"
