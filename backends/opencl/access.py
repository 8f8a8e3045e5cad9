"""OpenCL C atomics and the work-group reductions that replace contended atomics onto one element.

Arrays are `__global T*` of the scalar type, row-major, `ncomp` consecutive scalars per vector/matrix
element; bool elements are `uchar` (loads, stores and bounds checks: backends/cstyle.py). Float atomics are
compare-and-swap loops (ops.HELPERS); integer atomics are OpenCL's `atomic_*` (32-bit) and `atom_*`
(64-bit, cl_khr_int64_*_atomics). Every form yields the element's old value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import types as T
from .ops import ctype

if TYPE_CHECKING:
    from .codegen import Codegen

BASE_ATOMICS64 = "cl_khr_int64_base_atomics"
EXTENDED_ATOMICS64 = "cl_khr_int64_extended_atomics"


def atomic(cg: Codegen, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
    """An expression applying atomic `kind` with `v` to element `ptr` and giving its old value."""
    if kind == "xchg":
        return exchange(cg, ptr, v, st)
    if st.is_float:
        if st is T.float64:
            require(cg, BASE_ATOMICS64, "float64 atomics")
        op, arg = ("add", f"-{v}") if kind == "sub" else (kind, v)
        return f"gk_atomic_{op}_{ctype(st)}(&{ptr}, {arg})"
    if st is T.int64:
        require(cg, BASE_ATOMICS64 if kind in ("add", "sub") else EXTENDED_ATOMICS64, "int64 atomics")
        return f"atom_{kind}((volatile __global long*)&{ptr}, {v})"
    return f"atomic_{kind}((volatile __global {ctype(st)}*)&{ptr}, {v})"


def exchange(cg: Codegen, ptr: str, v: str, st: T.ScalarType) -> str:
    """An atomic exchange: core OpenCL for 32-bit types, 64-bit ones through atom_xchg on long bits."""
    if st.bits == 64:
        require(cg, BASE_ATOMICS64, "64-bit atomic exchange")
        bits = f"atom_xchg((volatile __global long*)&{ptr}, {'as_long' if st.is_float else '(long)'}({v}))"
        return f"{'as_double' if st.is_float else ''}({bits})"
    return f"atomic_xchg((volatile __global {ctype(st)}*)&{ptr}, {v})"


def require(cg: Codegen, extension: str, what: str) -> None:
    """Note that the code needs `extension`; a device without it cannot compile the kernel."""
    if extension not in cg.device_extensions:
        raise cg.error(f"{what} need the OpenCL extension {extension}, which this device lacks")
    cg.extensions.add(extension)


# --------------------------------------------------------------------------- work-group reductions

def reduction_epilogue(cg: Codegen) -> None:
    """Sum each accumulator over the work-group in local memory, then one atomic per group. GPUs sum as
    a tree (log2(wg) barrier rounds); CPU devices let work-item 0 add the group's partials after a single
    barrier, since PoCL runs the work-items between two barriers as one loop (W2 on PoCL, 2^24 float32:
    about 30 ms with one barrier against 55-120 ms with a tree)."""
    wg = cg.workgroup
    for k, (acc, ins, acc_t) in enumerate(cg.accs.values()):
        st = ins.args[0].type.scalar
        ptr = cg.reduction_target(ins)
        total = f"({ctype(st)})gk_sum{k}"
        if st.is_float:
            if st is T.float64:
                require(cg, BASE_ATOMICS64, "float64 atomics")
            update = f"gk_atomic_add_{ctype(st)}(&{ptr}, {total})"
        elif st is T.int64:
            require(cg, BASE_ATOMICS64, "int64 atomics")
            update = f"atom_add((volatile __global long*)&{ptr}, {total})"
        else:
            update = f"atomic_add((volatile __global {ctype(st)}*)&{ptr}, {total})"
        cg.emit(1, f"/* {acc}: work-group sum, then one atomic per group */")
        cg.emit(1, f"__local {acc_t} gk_red{k}[{wg}];")
        cg.emit(1, "{")
        cg.emit(2, "const int lid = get_local_id(0);")
        cg.emit(2, f"gk_red{k}[lid] = {acc};")
        cg.emit(2, "barrier(CLK_LOCAL_MEM_FENCE);")
        if cg.tree_reduction:
            cg.emit(2, f"for (int s = {wg // 2}; s > 0; s >>= 1) {{")
            cg.emit(3, f"if (lid < s) gk_red{k}[lid] += gk_red{k}[lid + s];")
            cg.emit(3, "barrier(CLK_LOCAL_MEM_FENCE);")
            cg.emit(2, "}")
            cg.emit(2, f"if (lid == 0) {{ const {acc_t} gk_sum{k} = gk_red{k}[0]; {update}; }}")
        else:
            cg.emit(2, "if (lid == 0) {")
            cg.emit(3, f"{acc_t} gk_sum{k} = 0;")
            cg.emit(3, f"for (int s = 0; s < {wg}; s++) gk_sum{k} += gk_red{k}[s];")
            cg.emit(3, f"{update};")
            cg.emit(2, "}")
        cg.emit(1, "}")
