"""Random *taped programs* (issue 36, item 5): 2-8 launches and host ops over 1-3 time steps on a small pool
of float64 arrays, checked against central finite differences of the same program run forward without a
tape, on the same device.

Kernels are not generated: LIBRARY is a fixed set of `@gk.kernel` templates (JIT-compiled once per device
and process), and a program is a random composition of them: time-indexed arrays (`x0 .. xT`, one per
step), buffers reused every step (`f0` written each step, like a force buffer), assigns, accumulations
(`+=`, `gk.atomic_add`), guarded (partial) overwrites, stencil reads, atomics into shared elements
(`s0[0]`, `y[i // 2]`), in-place updates, host ops on the tape (`assign`, `gk.copy`, `zero_`, `fill_`,
`copy()`), views (`reshape(-1)`, `flatten()`, 2-D arrays read through flat views) and `gk.checkpoint`
blocks. The loss is a weighted sum of the final values of some arrays (a kernel that `atomic_add`s into
`l[0]`).

A program is rendered to Python source (`Program.source`), and that source is what runs: the failing
program a test prints is exactly the program that ran. The semantics the oracle encodes are those of the
third turn's contract (/work/shared/API.md): an overwriting store consumes the gradient of what it
overwrote, `+=`/atomics pass it through, a guarded store consumes only what it wrote, host writes
likewise, and views are the same array. Gradients are compared only for *input parameters*: arrays whose
first access on the tape is a read (or an accumulation, which passes the gradient through): an array
first overwritten on the tape has as `.grad` the gradient of the value that write gave it, not of its
initial value. `gk.GradientRuleError` (a launch overwrote values an earlier backward needs) is a
refusal, not a failure; the generator avoids such programs (HAZARD model) except for a small share.

    prog = generate("20261201/cpu/0/7")
    print(prog)                                  # readable, runnable source
    outcome = check_program(prog, "cpu")         # tape_check.py: "passed" / "refused" / "discarded"; raises
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.fuzz.tape_kernels import LIBRARY

# --------------------------------------------------------------------------- programs


@dataclasses.dataclass
class ArraySpec:
    shape: tuple
    init: str = "rand"            # "rand" (uniform -1..1), "zeros", or "weight" (a loss weight, no gradient)


@dataclasses.dataclass(frozen=True)
class H:
    """A handle: array `name` itself or a view of it (`reshape(-1)`, `flatten()`)."""
    name: str
    view: str = ""                # "", "reshape", "flatten"

    def src(self) -> str:
        return self.name + {"": "", "reshape": ".reshape(-1)", "flatten": ".flatten()"}[self.view]


@dataclasses.dataclass
class Op:
    """One step of a program. kind: "launch" (tpl, dim, args: list of H or float), "assign" (dst, src H),
    "assign_np" (dst, (lo, hi)), "copy" (gk.copy: dst, src, offsets or None), "zero", "fill" (dst, v),
    "clone" (new name, src H), "checkpoint" (block name, inputs [names], out name, block ops)."""
    kind: str
    tpl: str = ""
    dim: int = 0
    args: list = dataclasses.field(default_factory=list)
    value: object = None
    block: list = dataclasses.field(default_factory=list)
    comment: str = ""


@dataclasses.dataclass
class Program:
    seed: str
    n: int
    steps: int
    arrays: dict                       # name -> ArraySpec (inputs of `program`, loss and weights included)
    ops: list                          # Op, in order; loss terms are launches of loss_term at the end
    hvp: bool = False                  # also check forward-over-reverse

    # ---- analysis (the oracle's model of the program) ------------------------------------------
    def accesses(self):
        """Per op: (reads [(memory, needed)], writes [(memory, mode)]) in program order, memory = base
        array name (views are the same array; clones are arrays of their own)."""
        out = []
        for op in self.ops:
            out.append(_accesses(op))
        return out

    def params(self) -> list[str]:
        """Input parameters: arrays (of `program`'s arguments, weights and loss aside) whose first access
        is a read or an accumulation."""
        first: dict[str, str] = {}
        for reads, writes in self.accesses():
            for m, _ in reads:
                first.setdefault(m, "read")
            for m, mode in writes:
                first.setdefault(m, "read" if mode in ("add", "shared", "scatter") else "write")
        return [a for a, s in self.arrays.items() if s.init == "rand" and first.get(a) == "read"]

    def hazard(self) -> str | None:
        """Why a backward pass may legitimately refuse: an op writes memory whose values an earlier op's
        (or the same op's) adjoint needs, or a checkpoint input that changes after the block ran."""
        needed: dict[str, int] = {}
        for k, (reads, writes) in enumerate(self.accesses()):
            for m, need in reads:
                if need:
                    needed.setdefault(m, k)
            for m, _ in writes:
                if m in needed:
                    return f"op {needed[m]} needs {m}, op {k} writes it"
        return None

    def features(self) -> list[str]:
        """Tags for a failure's kind: which constructs the program has. "overwrite": a launch overwrites
        (all or some elements of) an array the tape already read or wrote; "host-overwrite": a host op
        does; "inplace": a launch reads and writes one array; "view-alias-in-launch": two handles of one
        memory in one launch; "same-memory-copy"/"-assign": a host copy between handles of one memory."""
        tags = set()
        live: set[str] = set()
        for op, (reads, writes) in zip(self.ops, self.accesses()):
            hs = [a for a in op.args if isinstance(a, H)]
            if op.kind == "launch":
                mems = [h.name for h in hs]
                if len(set(mems)) < len(mems) and len(set(hs)) > len(set(mems)):
                    tags.add("view-alias-in-launch")
                if {m for m, _ in reads} & {m for m, _ in writes}:
                    tags.add("inplace")
                if op.tpl in LIBRARY and LIBRARY[op.tpl].write in ("shared", "scatter"):
                    tags.add("atomic-shared")
            if op.kind in ("copy", "assign") and op.args[0].name == op.args[1].name:
                tags.add("same-memory-" + op.kind)
            if op.kind == "clone" and op.args[1].view:
                tags.add("copy-of-view")
            if op.kind == "checkpoint":
                tags.add("checkpoint")
            if any(h.view for h in hs):
                tags.add("views")
            for m, mode in writes:
                if mode not in ("add", "shared", "scatter") and m in live:
                    tags.add("overwrite" if op.kind == "launch" else "host-overwrite")
            live |= {m for m, _ in reads} | {m for m, _ in writes}
        return sorted(tags)

    # ---- rendering ---------------------------------------------------------------------------------
    def source(self) -> str:
        """Python source of `program(<arrays>)`: what runs, on a tape or not."""
        lines = [f"# tape program {self.seed!r}: n={self.n}, {self.steps} step(s)"
                 + (", forward-over-reverse too" if self.hvp else "")]
        lines.append("# arrays: " + ", ".join(
            f"{a}{list(s.shape)}" + {"rand": "", "zeros": "=0", "weight": " (loss weight)"}[s.init]
            for a, s in self.arrays.items()))
        lines.append("# parameters checked: " + ", ".join(self.params()))
        blocks = [op for op in self.ops if op.kind == "checkpoint"]
        for op in blocks:
            lines.append(f"def {op.value}({', '.join(op.args)}):")
            for b in op.block:
                lines.append("    " + _render(b, self.n))
        lines.append(f"def program({', '.join(self.arrays)}):")
        for op in self.ops:
            if op.comment:
                lines.append(f"    # {op.comment}")
            lines.append("    " + _render(op, self.n))
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return self.source()


def _accesses(op: Op):
    reads, writes = [], []
    if op.kind == "launch":
        tpl = LIBRARY.get(op.tpl)
        if tpl is None:                                     # loss_term: x, w -> l
            return [(op.args[0].name, False)], [(op.args[2].name, "add")]
        for k, (c, a) in enumerate(zip(tpl.args, op.args)):
            if c in "vs":
                reads.append((a.name, k in tpl.needs))
            elif c == "o":
                if tpl.write == "inplace":
                    reads.append((a.name, k in tpl.needs))
                mode = tpl.write
                if mode in ("over", "inplace") and op.value == "partial-dim":
                    mode = "partial"
                writes.append((a.name, "over" if mode == "inplace" else mode))
    elif op.kind in ("assign", "copy"):
        reads.append((op.args[1].name, False))
        full = op.kind == "assign" or op.value is None
        writes.append((op.args[0].name, "over" if full else "partial"))
    elif op.kind in ("assign_np", "zero", "fill"):
        writes.append((op.args[0].name, "over"))
    elif op.kind == "clone":
        reads.append((op.args[1].name, False))
        writes.append((op.args[0].name, "over"))
    elif op.kind == "checkpoint":
        ins, out = op.args[:-1], op.args[-1]
        reads += [(a, True) for a in ins]                   # the block is recomputed from its inputs
        writes.append((out, "over"))
    return reads, writes


def _fmt(v: float) -> str:
    return repr(float(v))


def _render(op: Op, n: int) -> str:
    if op.kind == "launch":
        tpl = LIBRARY.get(op.tpl)
        sig = tpl.args if tpl else "vvo"
        parts = [a.src() if isinstance(a, H) else _fmt(a) for a in op.args]
        ins = [p for c, p in zip(sig, parts) if c != "o"]
        outs = [p for c, p in zip(sig, parts) if c == "o"]
        return f"gk.launch({op.tpl}, {op.dim}, inputs=[{', '.join(ins)}], outputs=[{', '.join(outs)}])"
    dst = op.args[0].src() if op.args and isinstance(op.args[0], H) else ""
    if op.kind == "assign":
        return f"{dst}.assign({op.args[1].src()})"
    if op.kind == "assign_np":
        lo, hi, shape = op.value
        size = int(np.prod(shape))
        return f"{dst}.assign(np.linspace({_fmt(lo)}, {_fmt(hi)}, {size}).reshape({tuple(shape)}))"
    if op.kind == "copy":
        extra = "" if op.value is None else ", dest_offset={}, src_offset={}, count={}".format(*op.value)
        return f"gk.copy({dst}, {op.args[1].src()}{extra})"
    if op.kind == "zero":
        return f"{dst}.zero_()"
    if op.kind == "fill":
        return f"{dst}.fill_({_fmt(op.value)})"
    if op.kind == "clone":
        return f"{op.args[0].name} = {op.args[1].src()}.copy()"
    if op.kind == "checkpoint":
        return f"gk.checkpoint({op.value}, {', '.join(op.args)})"
    if op.kind == "temp":
        return f"{op.args[0].name} = gk.zeros({n}, dtype=gk.float64, requires_grad=True)"
    raise ValueError(op.kind)
