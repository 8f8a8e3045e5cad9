"""C99 (GNU C for its `__atomic` builtins) as a dialect of gradkit's C-style emitter: `sinf` for float32
math, bit casts through `memcpy`, atomics as GCC `__atomic` builtins and compare-and-swap loops."""

from __future__ import annotations

from gradkit.backends.cstyle import CStyleLanguage
from gradkit.core import types as T

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

    def atomic(self, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
        """Atomic `kind` of `v` into lvalue `ptr`, giving the old value: GNU `__atomic` builtins on integers,
        compare-and-swap loops for float add/min/max and integer min/max, exchanges on the bits of floats."""
        relaxed = "__ATOMIC_RELAXED"
        if kind == "xchg":
            if st.is_float:
                u, w = ("uint32", "float32") if st is T.float32 else ("uint64", "float64")
                pointer = f"(volatile {self.type_names[u]}*)&{ptr}"
                bits = f"__atomic_exchange_n({pointer}, {self.bitcast(v, u)}, {relaxed})"
                return self.bitcast(bits, w)
            return f"__atomic_exchange_n(&{ptr}, {v}, {relaxed})"
        if st.is_float:
            op, arg = ("add", f"-{v}") if kind == "sub" else (kind, v)
            return f"gk_atomic_{op}_{self.ctype(st)}(&{ptr}, {arg})"
        if kind in ("add", "sub"):
            return f"__atomic_fetch_{kind}(&{ptr}, {v}, {relaxed})"
        return f"gk_atomic_{kind}_{self.ctype(st)}(&{ptr}, {v})"
