"""Lowered core IR → OpenCL C source for one kernel.

One work-item per thread over a 1-D NDRange: the linear thread id is `get_global_id(0)`, guarded by
`gid < n` because the global size is rounded up to the work-group size; multi-dimensional `tid`
decomposes it row-major using the launch extents passed as kernel arguments. Every SSA value is a C
variable; structured regions become C blocks; loop-carried values and region results are variables
assigned before the loop and at the end of each iteration (no gotos). Memory access, atomics and the
work-group reductions are emitted by access.py; scalar ops come from the table in ops.py.

Kernel arguments, in order: the fault record (only when the kernel can fault: debug bounds checks or
a value stack), the thread count `gk_n`, the launch extents `gk_d0..` (only for multi-dimensional
`tid`), then for each *used* parameter either its buffer followed by the extents the code needs, or
its scalar value. `Generated.args` says how to fill them from launch arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...backends.analysis import reduction_sites
from ...backends.base import STACK_OVERFLOW, bounds_sites
from ...core import types as T
from ...core.errors import CompileError
from ...core.ir import Function, Instr, Region, Value, used_ids
from ...core.ops import MEMORY, Op
from . import access, native
from .ops import ARGTYPE, CODE_FOR_OP, MEMTYPE, ctype, formatter, helpers_for, literal


@dataclass
class ArrayInfo:
    """How generated code names an array parameter and which of its extents it receives."""

    name: str
    type: T.ArrayType
    extents: dict[int, str] = field(default_factory=dict)    # axis -> C name of the extent argument


@dataclass
class Generated:
    """The generated kernel: source text and the plan for binding launch arguments."""

    name: str
    source: str
    args: list[tuple]          # per kernel argument after the fixed ones: ("buffer", p) | ("extent", p, axis)
                               # | ("scalar", p, numpy dtype); p indexes fn.params
    can_fault: bool            # takes a fault record (first argument) that the launch reads back
    ndims: int                 # launch extents passed as gk_d0.. (0 when tid is 1-D or absent)
    workgroup: int


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)[:24]


class Codegen:
    """Emits one kernel. Args: fn (lowered IR), name (the C kernel name), debug (bounds checks),
    stack_size (value-stack slots), fp64 (the device has float64), device_extensions (its OpenCL
    extension names, for 64-bit atomics), workgroup (the work-group size launches use; a power of two),
    tree_reduction (sum work-group partials as a tree: GPUs; else serially after one barrier: CPUs),
    ptx_atomics (float atomic adds as inline PTX `atom.global.add`: NVIDIA devices that pass the probe),
    ops (the prim table, ops.op_table(...) for the device; default ops.CODE_FOR_OP)."""

    def __init__(self, fn: Function, name: str, *, debug: bool, stack_size: int, fp64: bool,
                 device_extensions: frozenset, workgroup: int, tree_reduction: bool = True,
                 ptx_atomics: bool = False,
                 ops: dict | None = None):
        self.fn, self.name, self.debug, self.stack_size = fn, name, debug, stack_size
        self.fp64, self.device_extensions, self.workgroup = fp64, device_extensions, workgroup
        self.tree_reduction = tree_reduction
        self.ptx_atomics = ptx_atomics
        self.native_defs: dict[str, str] = {}  # @gk.func_native snippets as functions (native.py)
        self.ops = ops if ops is not None else CODE_FOR_OP
        self.kernel_name = fn.attrs.get("source_name", fn.name)
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.arrays: dict[int, ArrayInfo] = {}
        self.used = used_ids(fn)
        self.sites = {id(ins): k for k, ins in enumerate(bounds_sites(fn))} if debug else {}
        self.uses_stack = any(ins.op == Op.PUSH for ins in fn.walk())
        self.can_fault = debug or self.uses_stack
        self.reductions = {} if debug else reduction_sites(fn)
        self.accs: dict = {}                  # reduction key -> (accumulator name, instruction, C type)
        self.extensions: set[str] = set()     # OpenCL extensions the emitted code needs
        self.tid_ndims = {ins.attrs["ndim"] for ins in fn.walk() if ins.op == Op.TID}
        self.split = False                    # thread body in its own function (see build)

    # ------------------------------------------------------------------ naming
    def var(self, v: Value) -> str:
        name = self.names.get(v.id)
        if name is None:
            name = self.names[v.id] = f"v{len(self.names)}" + (f"_{_ident(v.hint)}" if v.hint else "")
        return name

    def decl(self, v: Value) -> str:
        return f"{ctype(v.type)} {self.var(v)}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def error(self, message: str) -> CompileError:
        return CompileError(f"in kernel '{self.kernel_name}': {message}")

    # ------------------------------------------------------------------ the kernel
    def uses_float64(self) -> bool:
        for p in self.fn.params:
            if p.value.id in self.used and (p.type.scalar if p.type.is_array else p.type) is T.float64:
                return True
        for ins in self.fn.walk():
            values = ins.results + [p for r in ins.regions for p in r.params]
            if any(v.type is T.float64 for v in values):
                return True
        return False

    def signature(self) -> tuple[list[str], list[tuple]]:
        """Kernel parameter declarations and the argument-binding plan (see Generated.args)."""
        decls = ["__global long* gk_fault_rec"] if self.can_fault else []
        decls.append("long gk_n")
        ndims = max(self.tid_ndims, default=1)
        decls += [f"long gk_d{k}" for k in range(ndims)] if ndims > 1 else []
        plan: list[tuple] = []
        need_axes: dict[int, set] = {}
        for ins in self.fn.walk():
            if ins.op in MEMORY:
                nd = ins.args[0].type.ndim
                need_axes.setdefault(ins.args[0].id, set()).update(range(0 if self.debug else 1, nd))
            elif ins.op == Op.SHAPE:
                need_axes.setdefault(ins.args[0].id, set()).add(ins.attrs["axis"])
        for k, p in enumerate(self.fn.params):
            if p.value.id not in self.used:
                continue
            name = f"p{k}_{_ident(p.name)}"
            self.names[p.value.id] = name
            if p.type.is_array:
                info = self.arrays[p.value.id] = ArrayInfo(name, p.type)
                decls.append(f"__global {MEMTYPE[p.type.scalar.name]}* {name}")
                plan.append(("buffer", k))
                for axis in sorted(need_axes.get(p.value.id, ())):
                    info.extents[axis] = f"{name}_n{axis}"
                    decls.append(f"long {name}_n{axis}")
                    plan.append(("extent", k, axis))
            else:
                decls.append(f"{ARGTYPE[p.type.name]} {name}{'_arg' if p.type.is_bool else ''}")
                plan.append(("scalar", k, p.type.np_dtype if not p.type.is_bool else "uint8"))
        return decls, plan

    def build(self) -> Generated:
        if self.uses_float64() and not self.fp64:
            raise self.error("this OpenCL device lacks float64 support (no cl_khr_fp64 extension); "
                             "use float32 data or another device")
        decls, plan = self.signature()
        access.declare_reductions(self)
        # A kernel with work-group reductions has barriers. If it also has a value stack, the thread body
        # goes into its own (noinline) function: a CPU runtime like PoCL keeps private variables that live
        # across a barrier once per work-item, and stack_size x 8 bytes per work-item overflows its thread
        # stack (4096 slots x 512 work-items crashed PoCL; as a function it runs). Without a stack the
        # body stays inline, where PoCL vectorises it (W2: 20 ms inline against 30-47 ms as a call).
        split = self.split = bool(self.accs) and self.uses_stack
        depth = 1 if split else 2
        self.lines = []
        for p in self.fn.params:
            if p.type is T.bool_ and p.value.id in self.used:
                self.emit(depth, f"const bool {self.var(p.value)} = {self.var(p.value)}_arg != 0;")
        self.coordinates(depth)
        if self.uses_stack:
            self.emit(depth, f"ulong gk_stack[{self.stack_size}];   /* reverse-pass value stack */")
            self.emit(depth, "int gk_sp = 0;")
        self.region(self.fn.body, depth)
        thread = "\n".join(self.lines)
        self.lines = []
        access.reduction_epilogue(self)
        epilogue = self.lines
        accs = list(self.accs.values())
        kernel = ["    const long gk_gid = get_global_id(0);"]
        kernel += [f"    {acc_t} {name} = 0;" for name, _, acc_t in accs]
        if split:
            params = ", ".join(["long gk_gid", *decls] + [f"{acc_t}* {name}" for name, _, acc_t in accs])
            call_args = ", ".join(["gk_gid", *(d.split()[-1].split("*")[-1] for d in decls)] +
                                  [f"&{name}" for name, _, _ in accs])
            pre = (f"/* one thread's work; the work-group reductions' accumulators are passed by pointer */\n"
                   f"__attribute__((noinline))\nvoid {self.name}_thread({params})\n{{\n{thread}\n}}\n\n")
            kernel.append(f"    if (gk_gid < gk_n) {self.name}_thread({call_args});")
        else:
            pre = ""
            kernel += ["    if (gk_gid < gk_n) {", thread, "    }"]
        body = "\n".join(kernel + epilogue)
        head = [f"/* gradkit kernel '{self.kernel_name}': OpenCL C generated from lowered IR */",
                "#pragma OPENCL FP_CONTRACT OFF"]
        if self.uses_float64() or "double" in body or "double" in thread:
            head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        for ext in sorted(self.extensions):
            head.append(f"#pragma OPENCL EXTENSION {ext} : enable")
        if self.ptx_atomics:
            head.append("#define GK_PTX_ATOMICS 1     /* float atomic adds as native PTX atom.global.add */")
        natives = "".join(f"/* @gk.func_native */\n{code}\n" for code in self.native_defs.values())
        source = ("\n".join(head) + "\n\n" + helpers_for(thread + body) + "\n" + natives + pre +
                  f"__kernel void __attribute__((reqd_work_group_size({self.workgroup}, 1, 1)))\n"
                  f"{self.name}({', '.join(decls)})\n{{\n{body}\n}}\n")
        ndims = max(self.tid_ndims, default=1)
        return Generated(self.name, source, plan, self.can_fault, ndims if ndims > 1 else 0, self.workgroup)

    def coordinates(self, d: int) -> None:
        """Row-major coordinates of the linear thread id for each multi-dimensional tid in the kernel."""
        for nd in sorted(n for n in self.tid_ndims if n > 1):
            self.emit(d, f"long gk_rest{nd} = gk_gid;")
            for axis in range(nd - 1, 0, -1):
                self.emit(d, f"const int gk_c{nd}_{axis} = (int)(gk_rest{nd} % gk_d{axis}); "
                             f"gk_rest{nd} /= gk_d{axis};")
            self.emit(d, f"const int gk_c{nd}_0 = (int)gk_rest{nd};")

    # ------------------------------------------------------------------ regions and instructions
    def region(self, region: Region, depth: int) -> list[str]:
        for ins in region.body:
            self.instr(ins, depth)
        return [self.var(y) for y in region.yields]

    def instr(self, ins: Instr, d: int) -> None:
        op = ins.op
        if op == Op.CONST:
            self.emit(d, f"const {self.decl(ins.result)} = {literal(ins.attrs['value'], ins.result.type)};")
        elif op == Op.PRIM:
            self.emit(d, f"const {self.decl(ins.result)} = {self.prim(ins)};")
        elif op == Op.TID:
            nd, axis = ins.attrs["ndim"], ins.attrs["axis"]
            coord = "(int)gk_gid" if nd == 1 else f"gk_c{nd}_{axis}"
            self.emit(d, f"const {self.decl(ins.result)} = {coord};")
        elif op == Op.SHAPE:
            info = self.arrays[ins.args[0].id]
            self.emit(d, f"const {self.decl(ins.result)} = (int){info.extents[ins.attrs['axis']]};")
        elif op in MEMORY:
            access.emit_access(self, ins, d)
        elif op == Op.IF:
            self.if_(ins, d)
        elif op == Op.FOR:
            self.for_(ins, d)
        elif op == Op.WHILE:
            self.while_(ins, d)
        elif op == Op.PUSH:
            v = ins.args[0]
            self.emit(d, f"if (gk_sp < {self.stack_size}) gk_stack[gk_sp++] = {self.to_bits(self.var(v), v.type)};")
            self.emit(d, f"else gk_fault(gk_fault_rec, {STACK_OVERFLOW}, {int(ins.attrs['stack'])}, 0, 0, 0);")
        elif op == Op.POP:
            raw = "(gk_sp > 0 ? gk_stack[--gk_sp] : 0UL)"
            self.emit(d, f"const {self.decl(ins.result)} = {self.from_bits(raw, ins.result.type)};")
        elif op == Op.NATIVE:
            native.emit_native(self, ins, d)
        else:
            raise self.error(f"the OpenCL backend cannot compile IR op '{op}' (is the IR lowered?)")

    def prim(self, ins: Instr) -> str:
        name = ins.attrs["name"]
        fmt = formatter(self.ops, name)
        if fmt is None:
            raise self.error(f"the OpenCL backend has no code for builtin '{name}'")
        t = ins.args[0].type if ins.args else ins.result.type
        if name == "where":
            t = ins.args[1].type
        return fmt([self.var(a) for a in ins.args], t, ins.attrs)

    def results_decl(self, results: list[Value], inits: list[str] | None, d: int) -> list[str]:
        """Declare a mutable C variable per region result / carried value (zero or `inits`)."""
        for k, r in enumerate(results):
            self.emit(d, f"{self.decl(r)} = {inits[k] if inits is not None else '0'};")
        return [self.var(r) for r in results]

    def assign(self, targets: list[str], values: list[str], d: int) -> None:
        for t, v in zip(targets, values):
            if t != v:
                self.emit(d, f"{t} = {v};")

    def bind_params(self, params: list[Value], values: list[str], d: int) -> None:
        for p, v in zip(params, values):
            self.emit(d, f"const {self.decl(p)} = {v};")

    def if_(self, ins: Instr, d: int) -> None:
        out = self.results_decl(ins.results, None, d)
        then, other = ins.regions
        self.emit(d, f"if ({self.var(ins.args[0])}) {{")
        self.assign(out, self.region(then, d + 1), d + 1)
        if other.body or out:
            self.emit(d, "} else {")
            self.assign(out, self.region(other, d + 1), d + 1)
        self.emit(d, "}")

    def for_(self, ins: Instr, d: int) -> None:
        start, stop, step, *inits = [self.var(a) for a in ins.args]
        (body,) = ins.regions
        acc = self.results_decl(ins.results, inits, d)
        iv = body.params[0]
        s = ins.args[2].const_value
        cond = (f"{self.var(iv)} < {stop}" if s > 0 else f"{self.var(iv)} > {stop}") if s is not None else \
            f"({step} > 0 ? {self.var(iv)} < {stop} : {self.var(iv)} > {stop})"
        self.emit(d, f"for ({self.decl(iv)} = {start}; {cond}; {self.var(iv)} += {step}) {{")
        self.bind_params(body.params[1:], acc, d + 1)
        self.assign(acc, self.region(body, d + 1), d + 1)
        self.emit(d, "}")

    def while_(self, ins: Instr, d: int) -> None:
        cond, body = ins.regions
        acc = self.results_decl(ins.results, [self.var(a) for a in ins.args], d)
        self.emit(d, "for (;;) {")
        self.bind_params(cond.params, acc, d + 1)
        (c,) = self.region(cond, d + 1)
        self.emit(d + 1, f"if (!{c}) break;")
        self.bind_params(body.params, acc, d + 1)
        self.assign(acc, self.region(body, d + 1), d + 1)
        self.emit(d, "}")

    # ------------------------------------------------------------------ value stack slots (8 bytes)
    @staticmethod
    def to_bits(x: str, t: T.ScalarType) -> str:
        if t is T.float64:
            return f"as_ulong({x})"
        if t is T.float32:
            return f"(ulong)as_uint({x})"
        return f"(ulong)({x})"

    @staticmethod
    def from_bits(raw: str, t: T.ScalarType) -> str:
        if t is T.float64:
            return f"as_double({raw})"
        if t is T.float32:
            return f"as_float((uint){raw})"
        if t.is_bool:
            return f"({raw} != 0UL)"
        return f"({ctype(t)}){raw}"
