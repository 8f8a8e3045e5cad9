"""Array access in generated OpenCL C: load/store/atomic (with debug bounds checks) and the work-group
reductions that replace contended atomics onto one element.

Arrays are `__global T*` of the scalar type, row-major, `ncomp` consecutive scalars per vector/matrix
element; bool elements are `uchar`. Float atomics are compare-and-swap loops (ops.HELPERS); integer
atomics are OpenCL's `atomic_*` (32-bit) and `atom_*` (64-bit, cl_khr_int64_*_atomics). An atomic
marked `exclusive` is a plain read-modify-write. Every form yields the element's old value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...backends.base import OUT_OF_BOUNDS
from ...core import types as T
from ...core.ir import Instr
from ...core.ops import Op
from .ops import ctype

if TYPE_CHECKING:
    from .codegen import ArrayInfo, Codegen

BASE_ATOMICS64 = "cl_khr_int64_base_atomics"
EXTENDED_ATOMICS64 = "cl_khr_int64_extended_atomics"
R = "@"   # placeholder for the result variable in emitted statements


def linear_index(info: ArrayInfo, idx: list[str], comp: int | None) -> str:
    """The flat scalar offset of element `idx`, component `comp`, in a row-major array."""
    lin = f"(long){idx[0]}"
    for k in range(1, info.type.ndim):
        lin = f"({lin} * {info.extents[k]} + {idx[k]})"
    ncomp = info.type.dtype.ncomp
    return f"({lin} * {ncomp} + {comp or 0})" if ncomp > 1 else lin


def emit_access(cg: Codegen, ins: Instr, d: int) -> None:
    """Emit one load/store/atomic; with `cg.debug`, check the index first and record a fault instead."""
    info = cg.arrays[ins.args[0].id]
    st = info.type.scalar
    idx = [cg.var(a) for a in ins.args[1:1 + info.type.ndim]]
    ptr = f"{info.name}[{linear_index(info, idx, ins.attrs.get('comp'))}]"
    res = ins.results[0] if ins.results else None
    wanted = res is not None and (ins.op == Op.LOAD or res.id in cg.used)
    if ins.op == Op.LOAD:
        stmts = [f"{R} = {ptr} != 0" if st.is_bool else f"{R} = {ptr}"]
    elif ins.op == Op.STORE:
        stmts = [f"{ptr} = {'(uchar)' if st.is_bool else ''}{cg.var(ins.args[-1])}"]
    else:
        stmts = atomic_statements(cg, ins, ptr, st, wanted)
    name = cg.var(res) if wanted else ""
    stmts = [s.replace(R, name) for s in stmts]
    if not cg.debug:
        if wanted and len(stmts) == 1 and stmts[0].startswith(f"{name} = "):
            cg.emit(d, f"const {cg.decl(res)} = {stmts[0][len(name) + 3:]};")
            return
        if wanted:
            cg.emit(d, f"{cg.decl(res)};")
        for s in stmts:
            cg.emit(d, s + ";")
        return
    if wanted:
        cg.emit(d, f"{cg.decl(res)} = 0;")       # an out-of-range load gives 0
    extents = [info.extents[k] for k in range(info.type.ndim)]
    checks = " && ".join(f"(ulong){i} < (ulong){n}" for i, n in zip(idx, extents))
    cg.emit(d, f"if ({checks}) {{")
    for s in stmts:
        cg.emit(d + 1, s + ";")
    cg.emit(d, "} else {")
    site = cg.sites[id(ins)]
    for k, (i, n) in enumerate(zip(idx, extents)):
        cg.emit(d + 1, f"{'else ' if k else ''}if ((ulong){i} >= (ulong){n}) "
                       f"gk_fault(gk_fault_rec, {OUT_OF_BOUNDS}, {site}, (long){i}, {n}, {k});")
    cg.emit(d, "}")


def atomic_statements(cg: Codegen, ins: Instr, ptr: str, st: T.ScalarType, wanted: bool) -> list[str]:
    """Statements performing the atomic; `R` stands for the variable receiving the old value."""
    kind, v = ins.attrs["kind"], cg.var(ins.args[-1])
    key = cg.reductions.get(id(ins))
    if key is not None:
        acc, _, acc_t = cg.accs[key]
        ref = f"*{acc}" if cg.split else acc      # a separate thread function receives it by pointer
        return [f"{ref} {'+=' if kind == 'add' else '-='} ({acc_t}){v}"]
    if st.is_bool:
        raise cg.error("atomics on bool arrays are not supported")
    if kind not in ("add", "sub", "min", "max", "xchg"):
        raise cg.error(f"unknown atomic kind '{kind}'")
    if ins.attrs.get("exclusive"):
        old = R if wanted else ptr
        new = {"add": f"{old} + {v}", "sub": f"{old} - {v}", "xchg": v,
               "min": f"{'fmin' if st.is_float else 'min'}({old}, {v})",
               "max": f"{'fmax' if st.is_float else 'max'}({old}, {v})"}[kind]
        return ([f"{R} = {ptr}"] if wanted else []) + [f"{ptr} = {new}"]
    take = f"{R} = " if wanted else ""
    if kind == "xchg":
        return [exchange(cg, take, ptr, v, st)]
    if st.is_float:
        if st is T.float64:
            require(cg, BASE_ATOMICS64, "float64 atomics")
        op, arg = ("add", f"-{v}") if kind == "sub" else (kind, v)
        return [f"{take}gk_atomic_{op}_{ctype(st)}(&{ptr}, {arg})"]
    if st is T.int64:
        require(cg, BASE_ATOMICS64 if kind in ("add", "sub") else EXTENDED_ATOMICS64, "int64 atomics")
        return [f"{take}atom_{kind}((volatile __global long*)&{ptr}, {v})"]
    return [f"{take}atomic_{kind}((volatile __global {ctype(st)}*)&{ptr}, {v})"]


def exchange(cg: Codegen, take: str, ptr: str, v: str, st: T.ScalarType) -> str:
    """An atomic exchange: core OpenCL for 32-bit types, 64-bit ones through atom_xchg on long bits."""
    if st.bits == 64:
        require(cg, BASE_ATOMICS64, "64-bit atomic exchange")
        bits = f"atom_xchg((volatile __global long*)&{ptr}, {'as_long' if st.is_float else '(long)'}({v}))"
        return f"{take}{'as_double' if st.is_float else ''}({bits})"
    return f"{take}atomic_xchg((volatile __global {ctype(st)}*)&{ptr}, {v})"


def require(cg: Codegen, extension: str, what: str) -> None:
    """Note that the code needs `extension`; a device without it cannot compile the kernel."""
    if extension not in cg.device_extensions:
        raise cg.error(f"{what} need the OpenCL extension {extension}, which this device lacks")
    cg.extensions.add(extension)


# --------------------------------------------------------------------------- work-group reductions

def declare_reductions(cg: Codegen) -> None:
    """One private accumulator per reduction element (float sums in double where the device has it)."""
    for ins in cg.fn.walk():
        key = cg.reductions.get(id(ins))
        if key is None or key in cg.accs:
            continue
        st = ins.args[0].type.scalar
        acc_t = ("double" if cg.fp64 else "float") if st.is_float else ctype(st)
        cg.accs[key] = (f"gk_acc{len(cg.accs)}", ins, acc_t)


def reduction_epilogue(cg: Codegen) -> None:
    """Sum each accumulator over the work-group in local memory, then one atomic per group. GPUs sum as
    a tree (log2(wg) barrier rounds); CPU devices let work-item 0 add the group's partials after a single
    barrier, since PoCL runs the work-items between two barriers as one loop (W2 on PoCL, 2^24 float32:
    about 30 ms with one barrier against 55-120 ms with a tree)."""
    wg = cg.workgroup
    for k, (acc, ins, acc_t) in enumerate(cg.accs.values()):
        info = cg.arrays[ins.args[0].id]
        st = info.type.scalar
        idx = [str(int(i.const_value)) for i in ins.args[1:1 + info.type.ndim]]
        ptr = f"{info.name}[{linear_index(info, idx, ins.attrs.get('comp'))}]"
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
