"""Lowered core IR → OpenCL C source for one kernel.

One work-item per thread over a 1-D NDRange: the linear thread id is `get_global_id(0)`, guarded by
`gid < n` because the global size is rounded up to the work-group size; multi-dimensional `tid`
decomposes it row-major using the launch extents passed as kernel arguments. Every SSA value is a C
variable; structured regions become C blocks; loop-carried values and region results are variables
assigned before the loop and at the end of each iteration (no gotos). Memory access, atomics and the
work-group reductions are emitted by access.py; scalar ops come from the table in ops.py. Atomic adds
onto an element every work-item of a group adds to together (uniform.py) are queued and summed over the
group by aggregate.py; such a kernel holds its thread body twice, the queueing copy for full work-groups
and a plain-atomic copy for the partial last one (`gk_full`).

Kernel arguments, in order: the fault record (only when the kernel can fault: debug bounds checks or
a value stack), the thread count `gk_n`, the launch extents `gk_d0..` (only for multi-dimensional
`tid`), then for each *used* parameter either its buffer followed by the extents the code needs, or
its scalar value. `Generated.args` says how to fill them from launch arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core import types as T
from ...core.ir import Function, Region
from ..cstyle import ArrayInfo, CStyleKernel, ident
from . import access, aggregate
from .ops import ARGTYPE, MEMTYPE, OPENCL, ctype, op_table
from .uniform import aggregable_atomics

__all__ = ["ArrayInfo", "Codegen", "Generated"]


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


class Codegen(CStyleKernel):
    """Emits one kernel. Args: fn (lowered IR), name (the C kernel name), debug (bounds checks),
    stack_size (value-stack slots), fp64 (the device has float64), device_extensions (its OpenCL
    extension names, for 64-bit atomics), workgroup (the work-group size launches use; a power of two),
    tree_reduction (sum work-group partials as a tree: GPUs; else serially after one barrier: CPUs),
    ptx_atomics (float atomic adds as inline PTX `atom.global.add`: NVIDIA devices that pass the probe),
    uniform_atomics (sum atomic adds onto a work-group-uniform element across the group first: uniform.py,
    aggregate.py), local_mem (the device's local memory in bytes, which bounds aggregate.py's queues),
    ops (the prim table, ops.op_table(...) for the device; default ops.CODE_FOR_OP)."""

    def __init__(self, fn: Function, name: str, *, debug: bool, stack_size: int, fp64: bool,
                 device_extensions: frozenset, workgroup: int, tree_reduction: bool = True,
                 ptx_atomics: bool = False, uniform_atomics: bool = True, local_mem: int = 32 << 10,
                 ops: dict | None = None, proven: frozenset = frozenset()):
        super().__init__(fn, name, lang=OPENCL, backend="opencl", debug=debug, stack_size=stack_size,
                         ops=ops if ops is not None else op_table(False), proven=proven)
        self.fp64, self.device_extensions, self.workgroup = fp64, device_extensions, workgroup
        self.tree_reduction = tree_reduction
        self.ptx_atomics = ptx_atomics
        self.extensions: set[str] = set()     # OpenCL extensions the emitted code needs
        self.split = False                    # thread body in its own function (see build)
        # atomics summed across the work-group before one global atomic (not under debug bounds checks, whose
        # faults are per work-item, nor with a value stack, whose private array would live across barriers)
        self.aggregated: set[int] = set()
        if uniform_atomics and not debug and not self.uses_stack:
            self.aggregated = aggregable_atomics(fn) - set(self.reductions)
        sites = [ins for ins in fn.walk() if id(ins) in self.aggregated]
        types = {ins.args[0].type.scalar for ins in sites}
        self.agg_rows = {ctype(st): aggregate.queue_length(workgroup, st.bits // 8, local_mem, len(types))
                         for st in types}             # C element type -> rows of its local queue
        if not all(self.agg_rows.values()):           # local memory too small for a queue: plain atomics
            self.aggregated, self.agg_rows = set(), {}
        self.agg_arrays: dict[str, list[int]] = {}   # C element type -> the arrays its queue adds onto
        for ins in sites:
            if self.agg_rows:
                arrays = self.agg_arrays.setdefault(ctype(ins.args[0].type.scalar), [])
                arrays += [] if ins.args[0].id in arrays else [ins.args[0].id]
        self.aggregating = False              # emitting the full groups' copy of the body (see build)
        self.agg_types: dict[str, T.ScalarType] = {}   # C element type -> scalar type, of the queued adds

    # ------------------------------------------------------------------ dialect hooks
    def atomic(self, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
        return access.atomic(self, kind, ptr, v, st)

    def coordinates(self, d: int) -> None:
        """Row-major coordinates of `gk_gid` as CStyleKernel.coordinates, in 32-bit unsigned arithmetic when the
        launch has under 2^32 threads (the usual case; a uniform branch): GPUs emulate 64-bit integer division
        in dozens of instructions, which a memory-bound 2-D stencil pays per thread."""
        for nd in sorted(n for n in self.tid_ndims if n > 1):
            names = ", ".join(f"gk_c{nd}_{axis}" for axis in range(nd))
            self.emit(d, f"int {names};")
            for wide, t in ((False, "uint"), (True, "long")):
                self.emit(d, "if (gk_n <= 0xffffffffL) {" if not wide else "} else {")
                self.emit(d + 1, f"{t} gk_rest = ({t})gk_gid;")
                for axis in range(nd - 1, 0, -1):
                    self.emit(d + 1, f"gk_c{nd}_{axis} = (int)(gk_rest % ({t})gk_d{axis}); gk_rest /= ({t})gk_d{axis};")
                self.emit(d + 1, f"gk_c{nd}_0 = (int)gk_rest;")
            self.emit(d, "}")

    def region(self, region: Region, depth: int) -> list[str]:
        """As CStyleKernel.region, but a run of consecutive aggregated atomics (uniform.py) of one element
        type is summed across the work-group together: one set of barriers for all of them."""
        body = region.body
        k = 0
        while k < len(body):
            ins = body[k]
            if not self.aggregating or id(ins) not in self.aggregated:
                self.instr(ins, depth)
                k += 1
                continue
            run = [ins]
            st = ins.args[0].type.scalar
            while (k + len(run) < len(body) and id(body[k + len(run)]) in self.aggregated
                   and body[k + len(run)].args[0].type.scalar is st):
                run.append(body[k + len(run)])
            aggregate.emit(self, run, depth)
            k += len(run)
        return [self.var(y) for y in region.yields]

    def accumulator_ref(self, acc: str) -> str:
        return f"*{acc}" if self.split else acc      # a separate thread function receives it by pointer

    def accumulator_type(self, st: T.ScalarType) -> str:
        return ("double" if self.fp64 else "float") if st.is_float else self.lang.ctype(st)

    # ------------------------------------------------------------------ the kernel
    def signature(self) -> tuple[list[str], list[tuple]]:
        """Kernel parameter declarations and the argument-binding plan (see Generated.args)."""
        decls = ["__global long* gk_fault_rec"] if self.can_fault else []
        decls.append("long gk_n")
        ndims = max(self.tid_ndims, default=1)
        decls += [f"long gk_d{k}" for k in range(ndims)] if ndims > 1 else []
        plan: list[tuple] = []
        need_axes = self.needed_extents()
        for k, p in enumerate(self.fn.params):
            if p.value.id not in self.used:
                continue
            name = f"p{k}_{ident(p.name)}"
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

    def thread_body(self, depth: int, aggregating: bool) -> str:
        """One work-item's code; with `aggregating`, uniform atomics are summed over the group (uniform.py)."""
        self.aggregating = aggregating
        self.lines = []
        for p in self.fn.params:
            if p.type is T.bool_ and p.value.id in self.used:
                self.emit(depth, f"const bool {self.var(p.value)} = {self.var(p.value)}_arg != 0;")
        self.coordinates(depth)
        if self.uses_stack:
            self.emit(depth, f"ulong gk_stack[{self.stack_size}];   /* reverse-pass value stack */")
            self.emit(depth, "int gk_sp = 0;")
        self.region(self.fn.body, depth)
        text = "\n".join(self.lines)
        self.lines = []
        return text

    def build(self) -> Generated:
        if self.uses_float64() and not self.fp64:
            raise self.error("this OpenCL device lacks float64 support (no cl_khr_fp64 extension); "
                             "use float32 data or another device")
        decls, plan = self.signature()
        self.declare_reductions()
        # A kernel with work-group reductions has barriers. If it also has a value stack, the thread body
        # goes into its own (noinline) function: a CPU runtime like PoCL keeps private variables that live
        # across a barrier once per work-item, and stack_size x 8 bytes per work-item overflows its thread
        # stack (4096 slots x 512 work-items crashed PoCL; as a function it runs). Without a stack the
        # body stays inline, where PoCL vectorises it (W2: 20 ms inline against 30-47 ms as a call).
        split = self.split = bool(self.accs) and self.uses_stack
        depth = 1 if split else 2
        thread = self.thread_body(depth, aggregating=False)
        plain = thread
        if self.aggregated:     # full groups sum uniform atomics (barriers); the partial last group does not
            thread = self.thread_body(depth, aggregating=True)
        access.reduction_epilogue(self)
        epilogue = self.lines
        accs = list(self.accs.values())
        kernel = ["    const long gk_gid = get_global_id(0);"]
        kernel += aggregate.prologue(self)
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
            kernel += aggregate.branches(self, thread, plain)
        body = "\n".join(kernel + epilogue)
        head = [f"/* gradkit kernel '{self.kernel_name}': OpenCL C generated from lowered IR */",
                "#pragma OPENCL FP_CONTRACT OFF"]
        if self.uses_float64() or "double" in body or "double" in thread or "double" in plain:
            head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        for ext in sorted(self.extensions):
            head.append(f"#pragma OPENCL EXTENSION {ext} : enable")
        if self.ptx_atomics:
            head.append("#define GK_PTX_ATOMICS 1     /* float atomic adds as native PTX atom.global.add */")
        natives = self.natives_source()
        source = ("\n".join(head) + "\n\n" + self.lang.helpers_for(thread + body) + "\n" + natives + pre +
                  f"__kernel void __attribute__((reqd_work_group_size({self.workgroup}, 1, 1)))\n"
                  f"{self.name}({', '.join(decls)})\n{{\n{body}\n}}\n")
        ndims = max(self.tid_ndims, default=1)
        return Generated(self.name, source, plan, self.can_fault, ndims if ndims > 1 else 0, self.workgroup)
