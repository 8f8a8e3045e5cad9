"""Lowered core IR → OpenCL C. One work-item per thread (a 1-D NDRange over the linear thread id; the
grid is passed as arguments for multi-dimensional `tid`). Structured regions become C blocks; every SSA
value is a C variable `v<N>`; loop-carried values are variables assigned at the end of each iteration."""

from __future__ import annotations

import struct

from ...backends.analysis import reduction_sites
from ...backends.base import OUT_OF_BOUNDS, STACK_OVERFLOW, bounds_sites
from ...core import types as T
from ...core.errors import CompileError
from ...core.ir import Function, Instr, Region, Value

CTYPE = {"float32": "float", "float64": "double", "int32": "int", "int64": "long", "uint32": "uint", "bool": "bool"}
STORE = dict(CTYPE, bool="uchar")
UNARY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "log2": "log2", "log10": "log10", "sin": "sin", "cos": "cos",
         "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
         "floor": "floor", "ceil": "ceil", "round": "round"}
WORKGROUP = 64   # default work-group size (CPU devices); GPUs get 256 (see backend.workgroup_size)
CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}

FAULT_HELPER = r"""
inline int gk_fault(__global int* f, int code, int site, int value, int extent, int axis) {
    if (atomic_cmpxchg((volatile __global int*)f, 0, code) == 0) { f[1] = site; f[2] = value; f[3] = extent; f[4] = axis; }
    return 0;
}
"""


def _float_atomics(ctype: str, suffix: str, bits: str, cmpxchg: str) -> str:
    """Float atomics as compare-and-swap loops on the value's bit pattern (add, min, max)."""
    out = ""
    for op, expr in (("add", "old.f + v"), ("min", "fmin(old.f, v)"), ("max", "fmax(old.f, v)")):
        out += (f"inline {ctype} gk_atomic_{op}{suffix}(volatile __global {ctype}* p, {ctype} v) {{\n"
                f"    union {{ {bits} u; {ctype} f; }} old, nw;\n"
                f"    do {{ old.f = *p; nw.f = {expr}; }} while ({cmpxchg}((volatile __global {bits}*)p, old.u, nw.u) "
                f"!= old.u);\n    return old.f;\n}}\n")
    return out


HELPERS = FAULT_HELPER + _float_atomics("float", "f", "uint", "atomic_cmpxchg")
HELPERS64 = "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n" + \
    _float_atomics("double", "d", "ulong", "atom_cmpxchg")


def literal(value, t: T.ScalarType) -> str:
    if t.is_bool:
        return "true" if value else "false"
    if t is T.float32:
        if value != value:
            return "NAN"
        if value in (float("inf"), float("-inf")):
            return "INFINITY" if value > 0 else "(-INFINITY)"
        return f"({float(struct.unpack('f', struct.pack('f', value))[0]).hex()}f)"
    if t is T.float64:
        if value != value:
            return "((double)NAN)"
        if value in (float("inf"), float("-inf")):
            return "((double)INFINITY)" if value > 0 else "(-(double)INFINITY)"
        return f"({float(value).hex()})"
    if t is T.int64:
        return f"({int(value)}L)"
    if t is T.uint32:
        return f"({int(value) & 0xFFFFFFFF}u)"
    v = int(value)
    return f"({v})" if v != -2**31 else "(-2147483647-1)"


class OpenCLCodegen:
    def __init__(self, fn: Function, name: str, debug: bool, stack_size: int, fp64: bool, workgroup: int = WORKGROUP):
        self.fn, self.name, self.debug, self.stack_size, self.fp64 = fn, name, debug, stack_size, fp64
        self.workgroup = workgroup      # a power of two; launches use exactly this work-group size
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.arrays: dict[int, tuple] = {}
        self.sites = {id(ins): k for k, ins in enumerate(bounds_sites(fn))} if debug else {}
        self.uses_stack = any(i.op in ("push", "pop") for i in fn.walk())
        self.counter = 0
        self.reductions = {} if debug else reduction_sites(fn)     # id(ins) -> key
        self.acc_names: dict = {}                                  # key -> (accumulator name, ins)

    def var(self, v: Value) -> str:
        name = self.names.get(v.id)
        if name is None:
            self.counter += 1
            name = self.names[v.id] = f"v{self.counter}"
        return name

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def uses_double(self) -> bool:
        types = [p.type.scalar if p.type.is_array else p.type for p in self.fn.params]
        for ins in self.fn.walk():
            types += [r.type for r in ins.results]
        return any(t is T.float64 for t in types)

    def build(self) -> str:
        if self.uses_double() and not self.fp64:
            raise CompileError(f"in kernel '{self.fn.attrs.get('source_name', self.fn.name)}': this OpenCL device "
                               "has no float64 support (cl_khr_fp64); use float32 arrays or another device")
        params = ["__global int* gk_fault_rec", "long gk_n", "long gk_d0", "long gk_d1", "long gk_d2", "long gk_d3"]
        for p in self.fn.params:
            name = self.var(p.value)
            if p.type.is_array:
                params.append(f"__global {STORE[p.type.scalar.name]}* restrict_{name}".replace("restrict_", ""))
                extents = [f"{name}_s{k}" for k in range(p.type.ndim)]
                params += [f"long {e}" for e in extents]
                self.arrays[p.value.id] = (name, extents, p.type)
            else:
                params.append(f"{CTYPE[p.type.name]} {name}")
        head = ""
        if self.uses_double():
            head += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + HELPERS64
        body_start = len(self.lines)
        self.emit(1, "const long gk_tid = get_global_id(0);")
        for ins in self.fn.walk():
            key = self.reductions.get(id(ins))
            if key is not None and key not in self.acc_names:
                st = ins.args[0].type.scalar
                acc_t = ("double" if self.fp64 else "float") if st.is_float else CTYPE[st.name]
                name = f"gk_acc{len(self.acc_names)}"
                self.acc_names[key] = (name, ins, acc_t)
                self.emit(1, f"{acc_t} {name} = 0;")
        self.emit(1, "if (gk_tid < gk_n) {")
        if self.uses_stack:
            self.emit(2, f"ulong gk_stack[{self.stack_size}]; int gk_sp = 0;")
        self.region(self.fn.body, 2)
        self.emit(1, "}")
        self.reduction_epilogue()
        body = self.lines[body_start:]
        return (head + HELPERS + f"\n__kernel void {self.name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n")

    # ------------------------------------------------------------------ regions
    def region(self, region: Region, depth: int) -> list[str]:
        for ins in region.body:
            self.instr(ins, depth)
        return [self.var(y) for y in region.yields]

    def decl(self, v: Value) -> str:
        return f"{CTYPE[v.type.name]} {self.var(v)}"

    def instr(self, ins: Instr, d: int) -> None:
        op = ins.op
        if op == "const":
            self.emit(d, f"const {self.decl(ins.result)} = {literal(ins.attrs['value'], ins.result.type)};")
        elif op == "prim":
            self.emit(d, f"const {self.decl(ins.result)} = {self.prim(ins)};")
        elif op == "tid":
            self.emit(d, f"const {self.decl(ins.result)} = (int)({self.coordinate(ins.attrs['axis'], ins.attrs['ndim'])});")
        elif op == "shape":
            _, extents, _ = self.arrays[ins.args[0].id]
            self.emit(d, f"const {self.decl(ins.result)} = (int){extents[ins.attrs['axis']]};")
        elif op in ("load", "store", "atomic"):
            self.memory(ins, d)
        elif op == "if":
            for r in ins.results:
                self.emit(d, f"{self.decl(r)};")
            self.emit(d, f"if ({self.var(ins.args[0])}) {{")
            ys = self.region(ins.regions[0], d + 1)
            for r, y in zip(ins.results, ys):
                self.emit(d + 1, f"{self.var(r)} = {y};")
            self.emit(d, "} else {")
            ys = self.region(ins.regions[1], d + 1)
            for r, y in zip(ins.results, ys):
                self.emit(d + 1, f"{self.var(r)} = {y};")
            self.emit(d, "}")
        elif op == "for":
            self.for_(ins, d)
        elif op == "while":
            self.while_(ins, d)
        elif op == "push":
            v = ins.args[0]
            self.emit(d, f"if (gk_sp < {self.stack_size}) gk_stack[gk_sp++] = {self.to_bits(self.var(v), v.type)}; "
                         f"else gk_fault(gk_fault_rec, {STACK_OVERFLOW}, {ins.attrs['stack']}, 0, 0, 0);")
        elif op == "pop":
            r = ins.result
            self.emit(d, f"const {self.decl(r)} = {self.from_bits('(gk_sp > 0 ? gk_stack[--gk_sp] : 0UL)', r.type)};")
        else:
            raise NotImplementedError(f"opencl backend: op '{op}'")

    def coordinate(self, axis: int, ndim: int) -> str:
        if ndim == 1:
            return "gk_tid"
        inner = "*".join(f"gk_d{k}" for k in range(axis + 1, ndim)) or "1"
        expr = f"(gk_tid / ({inner}))"
        return f"({expr} % gk_d{axis})" if axis > 0 else expr

    def carried(self, results, inits, d) -> list[str]:
        names = []
        for r, init in zip(results, inits):
            self.emit(d, f"{self.decl(r)} = {init};")
            names.append(self.var(r))
        return names

    def for_(self, ins: Instr, d: int) -> None:
        start, stop, step, *inits = [self.var(a) for a in ins.args]
        body = ins.regions[0]
        acc = self.carried(ins.results, inits, d)
        iv = self.var(body.params[0])
        sc = ins.args[2].const_value
        cond = (f"{iv} < {stop}" if sc > 0 else f"{iv} > {stop}") if sc is not None else \
            f"({step} > 0 ? {iv} < {stop} : {iv} > {stop})"
        self.emit(d, f"for (int {iv} = {start}; {cond}; {iv} += {step}) {{")
        for p, a in zip(body.params[1:], acc):
            self.emit(d + 1, f"const {self.decl(p)} = {a};")
        ys = self.region(body, d + 1)
        for a, y in zip(acc, ys):
            self.emit(d + 1, f"{a} = {y};")
        self.emit(d, "}")

    def while_(self, ins: Instr, d: int) -> None:
        cond_r, body = ins.regions
        acc = self.carried(ins.results, [self.var(a) for a in ins.args], d)
        self.emit(d, "while (1) {")
        for p, a in zip(cond_r.params, acc):
            self.emit(d + 1, f"const {self.decl(p)} = {a};")
        (c,) = self.region(cond_r, d + 1)
        self.emit(d + 1, f"if (!{c}) break;")
        for p, a in zip(body.params, acc):
            self.emit(d + 1, f"const {self.decl(p)} = {a};")
        ys = self.region(body, d + 1)
        for a, y in zip(acc, ys):
            self.emit(d + 1, f"{a} = {y};")
        self.emit(d, "}")

    def to_bits(self, x: str, t) -> str:
        if t is T.float64:
            return f"as_ulong({x})"
        if t is T.float32:
            return f"(ulong)as_uint({x})"
        return f"(ulong)({x})"

    def from_bits(self, raw: str, t) -> str:
        if t is T.float64:
            return f"as_double({raw})"
        if t is T.float32:
            return f"as_float((uint){raw})"
        if t.is_bool:
            return f"({raw} != 0)"
        return f"({CTYPE[t.name]}){raw}"

    # ------------------------------------------------------------------ memory
    def memory(self, ins: Instr, d: int) -> None:
        arr = ins.args[0]
        name, extents, t = self.arrays[arr.id]
        idx = [self.var(a) for a in ins.args[1:1 + t.ndim]]
        lin = f"(long){idx[0]}"
        for k in range(1, t.ndim):
            lin = f"({lin} * {extents[k]} + (long){idx[k]})"
        ncomp = t.dtype.ncomp
        if ncomp > 1:
            lin = f"({lin} * {ncomp} + {ins.attrs['comp'] or 0})"
        ptr = f"{name}[{lin}]"
        st = t.scalar
        if ins.op == "load":
            expr = f"({ptr} != 0)" if st.is_bool else ptr
        elif ins.op == "store":
            v = self.var(ins.args[-1])
            expr = f"{ptr} = {'(uchar)' if st.is_bool else ''}{v}"
        else:
            expr = self.atomic(ins, f"&{ptr}", st)
        if self.debug:
            checks = " && ".join(f"(ulong){i} < (ulong){e}" for i, e in zip(idx, extents))
            bad_axis = "0"
            for k in range(t.ndim - 1, -1, -1):
                bad_axis = f"((ulong){idx[k]} >= (ulong){extents[k]} ? {k} : {bad_axis})"
            site = self.sites[id(ins)]
            fault = (f"gk_fault(gk_fault_rec, {OUT_OF_BOUNDS}, {site}, "
                     f"(int)({' '.join(f'{bad_axis} == {k} ? {i} :' for k, i in enumerate(idx))} 0), "
                     f"(int)({' '.join(f'{bad_axis} == {k} ? {e} :' for k, e in enumerate(extents))} 0), {bad_axis})")
            if ins.results:
                r = ins.result
                self.emit(d, f"const {self.decl(r)} = ({checks}) ? ({expr}) : ({CTYPE[r.type.name]})({fault});")
            else:
                self.emit(d, f"if ({checks}) {{ {expr}; }} else {{ {fault}; }}")
            return
        if ins.results:
            self.emit(d, f"const {self.decl(ins.result)} = {expr};")
        else:
            self.emit(d, f"{expr};")

    def reduction_epilogue(self) -> None:
        """Sum each reduction's per-work-item partials across the work-group, then one atomic per group."""
        for name, ins, acc_t in self.acc_names.values():
            arr = ins.args[0]
            aname, extents, t = self.arrays[arr.id]
            idx = [str(i.const_value) for i in ins.args[1:1 + t.ndim]]
            lin = f"(long){idx[0]}"
            for k in range(1, t.ndim):
                lin = f"({lin} * {extents[k]} + {idx[k]})"
            if t.dtype.ncomp > 1:
                lin = f"({lin} * {t.dtype.ncomp} + {ins.attrs['comp'] or 0})"
            st = t.scalar
            self.emit(1, f"__local {acc_t} {name}_red[{self.workgroup}];")
            self.emit(1, f"{{ const int lid = get_local_id(0); {name}_red[lid] = {name}; "
                         "barrier(CLK_LOCAL_MEM_FENCE);")
            self.emit(1, f"  for (int s = {self.workgroup // 2}; s > 0; s >>= 1) {{ if (lid < s) {name}_red[lid] += "
                         f"{name}_red[lid + s]; barrier(CLK_LOCAL_MEM_FENCE); }}")
            total = f"({STORE[st.name]}){name}_red[0]"
            if st.is_float:
                upd = f"gk_atomic_add{'f' if st is T.float32 else 'd'}(&{aname}[{lin}], {total})"
            elif st is T.int64:
                upd = f"atom_add((volatile __global long*)&{aname}[{lin}], {total})"
            else:
                upd = f"atomic_add((volatile __global {CTYPE[st.name]}*)&{aname}[{lin}], {total})"
            self.emit(1, f"  if (lid == 0) {upd}; }}")

    def atomic(self, ins: Instr, addr: str, st) -> str:
        kind = ins.attrs["kind"]
        v = self.var(ins.args[-1])
        key = self.reductions.get(id(ins))
        if key is not None:
            name, _, acc_t = self.acc_names[key]
            return f"({name} {'+=' if kind == 'add' else '-='} ({acc_t}){v})"
        if ins.attrs.get("exclusive"):
            target = addr[1:]
            if kind in ("add", "sub"):
                return f"({target} {'+=' if kind == 'add' else '-='} {v}) {'-' if kind == 'add' else '+'} {v}"
            fn = ("fmin" if kind == "min" else "fmax") if st.is_float else kind
            return f"({target} = {fn}({target}, {v}))"
        if st.is_float:
            suffix = "f" if st is T.float32 else "d"
            if kind == "sub":
                return f"gk_atomic_add{suffix}({addr}, -{v})"
            return f"gk_atomic_{kind}{suffix}({addr}, {v})"
        if st is T.int64:
            return f"atom_{kind}((volatile __global long*){addr}, {v})"
        cast = "uint" if st is T.uint32 else "int"
        return f"atomic_{kind}((volatile __global {cast}*){addr}, {v})"

    # ------------------------------------------------------------------ prims
    def prim(self, ins: Instr) -> str:
        from .prims import prim_expr
        return prim_expr(self, ins)
