"""Lowered core IR → one C function per kernel, through gradkit's C-style emitter (backends/cstyle.py).

The kernel is `void name(const int64_t* gk_args, int64_t gk_lo, int64_t gk_hi)`: a loop over the linear
thread ids [gk_lo, gk_hi), split across threads by OpenMP (`#pragma omp parallel for`; without
`-fopenmp` the pragmas are ignored and it runs on one thread). `gk_args` is a block of 64-bit slots
(`Layout`): the fault record's address, the launch extents, then per parameter either [data address,
extent 0, ...] or one scalar slot (float32 in the low 32 bits, float64 as its bits, integers
sign-extended, bool 0/1). Reductions onto one element (backends.analysis.reduction_sites) are OpenMP
reductions of per-thread partial sums, float32 summed in double, then one atomic per call; the value stack
is one heap block per OpenMP thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gradkit.backends.cstyle import ArrayInfo, CStyleKernel, ident
from gradkit.core import types as T
from gradkit.core.ir import Function
from gradkit.core.ops import LOOPS

from .language import CLanguage

C = CLanguage()
HEADER = 5               # slots: fault record address, launch extents d0..d3
PARALLEL_BELOW = 1 << 15         # straight-line kernels with fewer threads run on one thread
PARALLEL_BELOW_LOOPS = 64        # kernels with loops do far more work per thread
INCLUDES = ["math.h", "stdbool.h", "stdint.h", "stdlib.h", "string.h"]


@dataclass
class Layout:
    """Where each parameter lives in the argument block: (slot, "array" | "scalar", type) per parameter."""

    slots: list = field(default_factory=list)
    size: int = HEADER


def layout_of(fn: Function) -> Layout:
    lay = Layout()
    for p in fn.params:
        lay.slots.append((lay.size, "array" if p.type.is_array else "scalar", p.type))
        lay.size += 1 + p.type.ndim if p.type.is_array else 1
    return lay


def _slot_value(raw: str, t: T.ScalarType) -> str:
    """The scalar of type `t` packed into 64-bit slot `raw`."""
    if t is T.float32:
        return C.bitcast(f"(uint32_t){raw}", "float32")
    if t is T.float64:
        return C.bitcast(f"(uint64_t){raw}", "float64")
    if t.is_bool:
        return f"({raw} != 0)"
    return f"({C.ctype(t)}){raw}"


class CKernel(CStyleKernel):
    """Emits one kernel as C. Args: fn (lowered IR), name (the C function name), debug (bounds checks),
    stack_size (value-stack slots per thread), backend (the registry name keying native snippets)."""

    def __init__(self, fn: Function, name: str, *, debug: bool, stack_size: int, backend: str = "c"):
        super().__init__(fn, name, lang=C, backend=backend, debug=debug, stack_size=stack_size)
        self.layout = layout_of(fn)
        self.loops = any(ins.op in LOOPS for ins in fn.walk())

    def atomic(self, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
        return C.atomic(kind, ptr, v, st)

    def stack_capacity(self) -> str:
        return "gk_stack_cap"

    def unpack(self) -> None:
        """Read the launch extents and the used parameters out of the argument block."""
        if self.can_fault:
            self.emit(1, "int64_t* gk_fault_rec = (int64_t*)(intptr_t)gk_args[0];")
        ndims = max(self.tid_ndims, default=1)
        for k in range(1, ndims if ndims > 1 else 0):
            self.emit(1, f"const int64_t gk_d{k} = gk_args[{1 + k}];")
        need = self.needed_extents()
        for k, (p, (slot, kind, t)) in enumerate(zip(self.fn.params, self.layout.slots)):
            if p.value.id not in self.used:
                continue
            name = self.names[p.value.id] = f"p{k}_{ident(p.name)}"
            if kind == "array":
                info = self.arrays[p.value.id] = ArrayInfo(name, t)
                elem = C.memtype(t.scalar)
                self.emit(1, f"{elem}* const {name} = ({elem}*)(intptr_t)gk_args[{slot}];")
                for axis in sorted(need.get(p.value.id, ())):
                    info.extents[axis] = f"{name}_n{axis}"
                    self.emit(1, f"const int64_t {name}_n{axis} = gk_args[{slot + 1 + axis}];")
            else:
                self.emit(1, f"const {C.ctype(t)} {name} = {_slot_value(f'gk_args[{slot}]', t)};")

    def build(self) -> str:
        """The whole translation unit: includes, the helpers it calls, native snippets, the kernel."""
        self.lines = []
        self.unpack()
        self.declare_reductions()
        accs = list(self.accs.values())
        for name, _, acc_t in accs:
            self.emit(1, f"{acc_t} {name} = 0;")
        below = PARALLEL_BELOW_LOOPS if self.loops else PARALLEL_BELOW
        self.emit(1, f"#pragma omp parallel if (gk_hi - gk_lo >= {below})")
        self.emit(1, "{")
        if self.uses_stack:
            self.emit(2, f"uint64_t* gk_stack = (uint64_t*)malloc({self.stack_size} * sizeof(uint64_t));"
                         "   /* reverse-pass value stack */")
            self.emit(2, f"const int gk_stack_cap = gk_stack != NULL ? {self.stack_size} : 0;")
        reduction = f" reduction(+: {', '.join(name for name, _, _ in accs)})" if accs else ""
        self.emit(2, f"#pragma omp for schedule({'dynamic, 16' if self.loops else 'static'}){reduction}")
        self.emit(2, "for (int64_t gk_gid = gk_lo; gk_gid < gk_hi; gk_gid++) {")
        if self.uses_stack:
            self.emit(3, "int gk_sp = 0;")
        self.coordinates(3)
        self.region(self.fn.body, 3)
        self.emit(2, "}")
        if self.uses_stack:
            self.emit(2, "free(gk_stack);")
        self.emit(1, "}")
        for name, ins, _ in accs:       # one atomic per call instead of one per thread
            st = ins.args[0].type.scalar
            self.emit(1, f"{C.atomic('add', self.reduction_target(ins), f'({C.ctype(st)}){name}', st)};")
        body = "\n".join(self.lines)
        head = [f"/* gradkit kernel '{self.kernel_name}': C generated from lowered IR */"]
        head += [f"#include <{h}>" for h in INCLUDES]
        if "printf(" in self.natives_source():      # a kernel's print (gradkit/core/builtins/printing.py)
            head.append("#include <stdio.h>")
        return ("\n".join(head) + "\n\n" + C.helpers_for(body) + "\n" + self.natives_source() +
                f"void {self.name}(const int64_t* gk_args, int64_t gk_lo, int64_t gk_hi)\n{{\n{body}\n}}\n")
