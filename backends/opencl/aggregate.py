"""Atomic adds onto a work-group-uniform element (uniform.py) as one work-group sum and one global atomic.

Every work-item writes its value into local memory, the group sums them (a tree of log2(wg) barrier
rounds on GPUs; on CPU devices work-item 0 adds them up between two barriers, as access.py's reduction
epilogue does), and work-item 0 does the atomic. A run of consecutive such atomics shares the barriers.

Barriers need the whole group: the kernel holds two copies of the thread body (`branches`), one for groups
without padded work-items (`gk_full`, uniform across the group) that aggregates, and one with the plain
atomics for the last, partial group of a launch, whose padded work-items thus never meet a barrier. Float sums change order (a tree instead of the atomics' arrival
order), which atomics leave unspecified anyway; the tree is usually closer to the exact sum.

Portable OpenCL C 1.2: NVIDIA's OpenCL 3.0 reports neither work_group_reduce_add (OpenCL C 2.0
collectives) nor cl_khr_subgroups, so local memory and barriers are the path every device takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.ir import Instr
from .ops import ctype

if TYPE_CHECKING:
    from .codegen import Codegen


def prologue(cg: Codegen) -> list[str]:
    """Kernel-scope declarations the aggregated atomics need: local id, whether the group is full, and one
    local buffer per element type (OpenCL C declares `__local` variables at kernel scope only)."""
    if not cg.agg_width:
        return []
    wg = cg.workgroup
    lines = ["    const int gk_lid = (int)get_local_id(0);",
             "    /* no padded work-items in this group: it may sum uniform atomics across itself (barriers) */",
             f"    const bool gk_full = gk_gid - gk_lid + {wg} <= gk_n;"]
    lines += [f"    __local {t} gk_agg_{t}[{wg * c}];" for t, c in sorted(cg.agg_width.items())]
    return lines


def branches(cg: Codegen, full: str, plain: str) -> list[str]:
    """The kernel's thread body: `plain` alone, or, with aggregated atomics, `full` (the copy that sums them
    across the group) for full groups and `plain` for the partial last group. Two copies, because a CPU
    runtime like PoCL runs a region containing a barrier for every work-item once work-item 0 enters it:
    padded work-items must not sit inside any branch that holds a barrier, not even one they skip."""
    if not cg.agg_width:
        return ["    if (gk_gid < gk_n) {", plain, "    }"]
    return ["    if (gk_full) {", full, "    } else if (gk_gid < gk_n) {", plain, "    }"]


def emit(cg: Codegen, run: list[Instr], d: int) -> None:
    """A run of aggregated atomics of one element type, in a full group: every work-item's value into local
    memory, the group's sum, work-item 0's atomic."""
    st = run[0].args[0].type.scalar
    t, wg = ctype(st), cg.workgroup
    cg.agg_width[t] = max(cg.agg_width.get(t, 0), len(run))
    buf = f"gk_agg_{t}"
    sites = []
    for ins in run:
        info = cg.arrays[ins.args[0].id]
        idx = [cg.var(a) for a in ins.args[1:1 + info.type.ndim]]
        ptr = f"{info.name}[{cg.linear_index(info, idx, ins.attrs.get('comp'))}]"
        v = cg.var(ins.args[-1])
        sites.append((ptr, v if ins.attrs["kind"] == "add" else f"(-{v})"))
    cg.emit(d, f"/* {len(run)} atomic add(s) onto a work-group-uniform element: summed over the group, one "
               "atomic each (backends/opencl/aggregate.py) */")
    for c, (_, v) in enumerate(sites):
        cg.emit(d, f"{buf}[{c * wg} + gk_lid] = {v};")
    cg.emit(d, "barrier(CLK_LOCAL_MEM_FENCE);")
    if cg.tree_reduction:
        cg.emit(d, f"for (int gk_s = {wg // 2}; gk_s > 0; gk_s >>= 1) {{")
        cg.emit(d + 1, "if (gk_lid < gk_s) {")
        for c in range(len(sites)):
            cg.emit(d + 2, f"{buf}[{c * wg} + gk_lid] += {buf}[{c * wg} + gk_lid + gk_s];")
        cg.emit(d + 1, "}")
        cg.emit(d + 1, "barrier(CLK_LOCAL_MEM_FENCE);")
        cg.emit(d, "}")
        cg.emit(d, "if (gk_lid == 0) {")
        for c, (ptr, _) in enumerate(sites):
            cg.emit(d + 1, f"{cg.atomic('add', ptr, f'{buf}[{c * wg}]', st)};")
        cg.emit(d, "}")
    else:
        acc_t = cg.accumulator_type(st)
        cg.emit(d, "if (gk_lid == 0) {")
        for c, (ptr, _) in enumerate(sites):
            cg.emit(d + 1, f"{{ {acc_t} gk_sum = 0;")
            cg.emit(d + 1, f"  for (int gk_s = 0; gk_s < {wg}; gk_s++) gk_sum += {buf}[{c * wg} + gk_s];")
            cg.emit(d + 1, f"  {cg.atomic('add', ptr, f'({t})gk_sum', st)}; }}")
        cg.emit(d, "}")
        cg.emit(d, "barrier(CLK_LOCAL_MEM_FENCE);    /* the buffer is free again */")
