"""Atomic adds onto a work-group-uniform element (uniform.py) as work-group sums and one global atomic each.

The adds are queued, not summed one by one: every work-item writes its value into row `q` of a local
buffer (one row per queued add, one column per work-item) and work-item 0 the element (its offset, and
which array when the queue serves several); when
the queue is full, and once at the end of the thread body, the group flushes it: each row is summed in
two stages (WG / Q work-items per row, Q columns each, then one work-item per row adds the partials and
does the global atomic). That is four barriers per Q adds, where summing each add as a tree takes
log2(WG) barriers (W3's adjoint queues two adds per iteration of its loop over j). Rows are WG + 1 long
so that the first stage's work-items read distinct local-memory banks.

Barriers need the whole group: the kernel holds two copies of the thread body (`branches`), one for groups
without padded work-items (`gk_full`, uniform across the group) that queues, and one with the plain atomics
for the last, partial group of a launch, whose padded work-items thus never meet a barrier. Deferring an
add to the flush is invisible: uniform.py admits only arrays the kernel never reads. Float sums change
order (pairwise partial sums in the accumulator type, float64 where the device has it, instead of the
atomics' arrival order, which is unspecified anyway).

Portable OpenCL C 1.2: NVIDIA's OpenCL 3.0 reports neither work_group_reduce_add (OpenCL C 2.0
collectives) nor cl_khr_subgroups, so local memory and barriers are the path every device takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.ir import Instr
from .ops import ctype

if TYPE_CHECKING:
    from .codegen import Codegen

QUEUE = 16               # queued adds per flush at most
QUEUE_BYTES = 20 << 10   # local memory per element type's queue at most (and half the device's, shared by types)


def queue_length(workgroup: int, itemsize: int, local_mem: int, types: int) -> int:
    """Q: rows of the local queue, a power of two dividing the work-group size, within the local-memory
    budget (wg 256: 16 rows of float32, 8 of float64); 0 when not even one row fits."""
    budget = min(QUEUE_BYTES, local_mem // (2 * max(types, 1)))
    rows = min(QUEUE, workgroup, budget // ((workgroup + 1) * itemsize + 8))
    return 1 << (rows.bit_length() - 1) if rows > 0 else 0


def prologue(cg: Codegen) -> list[str]:
    """Kernel-scope declarations: local id, whether the group is full, and per element type the local queue
    and its addresses (OpenCL C declares `__local` variables at kernel scope only)."""
    if not cg.agg_types:
        return []
    wg = cg.workgroup
    lines = ["    const int gk_lid = (int)get_local_id(0);",
             "    /* no padded work-items in this group: it may sum uniform atomics across itself (barriers) */",
             f"    const bool gk_full = gk_gid - gk_lid + {wg} <= gk_n;"]
    for t in sorted(cg.agg_types):
        q = cg.agg_rows[t]
        lines += [f"    __local {t} gk_agg_{t}[{q * (wg + 1)}];      /* queued adds: a row per add */",
                  f"    __local long gk_agg_{t}_at[{q}];      /* the element each row adds onto: offset, */"]
        if len(cg.agg_arrays[t]) > 1:
            lines.append(f"    __local int gk_agg_{t}_of[{q}];       /* and which array (agg_arrays) */")
    return lines


def branches(cg: Codegen, full: str, plain: str) -> list[str]:
    """The kernel's thread body: `plain` alone, or, with aggregated atomics, `full` (the copy that queues
    them, then flushes) for full groups and `plain` for the partial last group. Two copies, because a CPU
    runtime like PoCL runs a region containing a barrier for every work-item once work-item 0 enters it:
    padded work-items must not sit inside any branch that holds a barrier, not even one they skip."""
    if not cg.agg_types:
        return ["    if (gk_gid < gk_n) {", plain, "    }"]
    tail = []
    for t in sorted(cg.agg_types):
        tail += ["        /* the adds still queued */", *_flush(cg, t, 2)]
    decls = [f"        int gk_q_{t} = 0;      /* queued rows: the same in every work-item */"
             for t in sorted(cg.agg_types)]
    return ["    if (gk_full) {", *decls, full, *tail, "    } else if (gk_gid < gk_n) {", plain, "    }"]


def emit(cg: Codegen, run: list[Instr], d: int) -> None:
    """Queue a run of aggregated atomics of one element type (flushing first if they do not fit)."""
    st = run[0].args[0].type.scalar
    t, wg, q = ctype(st), cg.workgroup, cg.agg_rows[ctype(st)]
    if len(run) > q:
        emit(cg, run[:q], d)
        emit(cg, run[q:], d)
        return
    cg.agg_types[t] = st
    buf, at, n = f"gk_agg_{t}", f"gk_agg_{t}_at", f"gk_q_{t}"
    cg.emit(d, f"/* {len(run)} atomic add(s) onto a work-group-uniform element: queued, summed over the group "
               "at the flush (backends/opencl/aggregate.py) */")
    cg.emit(d, f"if ({n} + {len(run)} > {q}) {{")
    for line in _flush(cg, t, 0):
        cg.emit(d + 1, line)
    cg.emit(d, "}")
    for c, ins in enumerate(run):
        info = cg.arrays[ins.args[0].id]
        idx = [cg.var(a) for a in ins.args[1:1 + info.type.ndim]]
        offset = cg.linear_index(info, idx, ins.attrs.get("comp"))
        v = cg.var(ins.args[-1])
        value = v if ins.attrs["kind"] == "add" else f"-{v}"
        cg.emit(d, f"{buf}[({n} + {c}) * {wg + 1} + gk_lid] = {value};")
        arrays = cg.agg_arrays[t]
        which = f" {at[:-3]}_of[{n} + {c}] = {arrays.index(ins.args[0].id)};" if len(arrays) > 1 else ""
        cg.emit(d, f"if (gk_lid == 0) {{ {at}[{n} + {c}] = {offset};{which} }}")
    cg.emit(d, f"{n} += {len(run)};")


def _flush(cg: Codegen, t: str, depth: int) -> list[str]:
    """Lines summing the queued rows of type `t` over the group and adding each onto its element."""
    wg, q = cg.workgroup, cg.agg_rows[t]
    parts = wg // q
    st = cg.agg_types[t]
    acc_t = cg.accumulator_type(st)
    buf, at, n = f"gk_agg_{t}", f"gk_agg_{t}_at", f"gk_q_{t}"
    pad = "    " * depth
    row = f"(gk_lid % {q}) * {wg + 1}"
    arrays = [cg.arrays[a].name for a in cg.agg_arrays[t]]
    adds = [cg.atomic("add", f"{name}[{at}[gk_lid]]", f"({t})gk_sum", st) + ";" for name in arrays]
    if len(arrays) > 1:     # which array: a switch (local memory holding pointers to global memory is legal
        adds = [f"switch ({buf}_of[gk_lid]) {{"] + [       # OpenCL C 1.2, but not every compiler takes it)
            f"    case {k}: {a} break;" for k, a in enumerate(adds)] + ["}"]
    return [pad + line for line in [
        "barrier(CLK_LOCAL_MEM_FENCE);",
        "{",
        f"    {acc_t} gk_part = 0;      /* work-item lid sums columns [lid / {q} * {q}, +{q}) of row lid % {q} */",
        f"    if (gk_lid % {q} < {n})",
        f"        for (int gk_k = 0; gk_k < {q}; gk_k++) gk_part += {buf}[{row} + gk_lid / {q} * {q} + gk_k];",
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        f"    if (gk_lid % {q} < {n}) {buf}[{row} + gk_lid / {q}] = ({t})gk_part;",
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        f"    if (gk_lid < {n}) {{",
        f"        {acc_t} gk_sum = 0;",
        f"        for (int gk_k = 0; gk_k < {parts}; gk_k++) gk_sum += {buf}[gk_lid * {wg + 1} + gk_k];",
        *(f"        {a}" for a in adds),
        "    }",
        "    barrier(CLK_LOCAL_MEM_FENCE);    /* the queue is free again */",
        "}",
        f"{n} = 0;"]]
