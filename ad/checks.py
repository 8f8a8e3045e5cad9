"""Gradient rule checks: find, from a kernel's IR, the patterns whose gradients would be silently wrong.

Rule 1 (Taichi's global data access rule; Warp's in-kernel overwrite): an array element is read and later
mutated in the same kernel; the backward pass replays the read and sees the mutated value.
Rule 2: an element written once is written again other than by accumulation (`loss += a; loss *= b`).
Accumulation (`+=` / atomic_add onto outputs) and one write per thread are allowed and not reported.
Elements are matched by identical index values, so only certain violations are reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.ir import Function, Instr
from ..core.ops import MEMORY, Op


@dataclass
class Violation:
    rule: int
    array: str
    first: Instr       # the read (rule 1) or the first write (rule 2)
    second: Instr      # the mutation

    def describe(self, kernel: str) -> str:
        def where(ins):
            return f"{ins.loc.file}:{ins.loc.line}" if ins.loc is not None else "?"
        if self.rule == 1:
            return (f"kernel '{kernel}' reads array '{self.array}' at {where(self.first)} and then modifies the same "
                    f"element at {where(self.second)}; the backward pass would differentiate at the modified value. "
                    "Write the result into a separate array.")
        return (f"kernel '{kernel}' writes array '{self.array}' at {where(self.first)} and overwrites the same element "
                f"at {where(self.second)} (not by accumulation); gradients through the first write are lost. "
                "Use a separate array for each value.")


def _key(ins: Instr):
    return (ins.args[0].id, tuple(a.id for a in ins.args[1:1 + ins.args[0].type.ndim]), ins.attrs.get("comp"))


def _walk_paths(region, path=()):
    """Every instruction with its branch path: ((id of an enclosing `if`, branch number), ...)."""
    for ins in region.body:
        yield ins, path
        for k, sub in enumerate(ins.regions):
            yield from _walk_paths(sub, path + ((id(ins), k),) if ins.op == Op.IF else path)


def _exclusive(a: tuple, b: tuple) -> bool:
    """True when the two paths lie in different branches of one `if` (never both run)."""
    branch = dict(a)
    return any(k in branch and branch[k] != v for k, v in b)


def static_violations(fn: Function) -> list[Violation]:
    """Rule 1 and 2 violations certain from the IR alone (same array, same index values, both can run)."""
    reads: dict = {}
    writes: dict = {}
    out: list[Violation] = []
    names = {p.value.id: p.name for p in fn.params}
    seen = set()
    for ins, path in _walk_paths(fn.body):
        if ins.op not in MEMORY or ins.args[0].id not in names or ins.attrs.get("promoted"):
            continue        # promoted accesses (core/passes/promote.py) stand for reads a tape copy serves
        key = _key(ins)
        name = names[ins.args[0].id]
        if ins.op == Op.LOAD:
            reads.setdefault(key, []).append((ins, path))
            continue
        mutates = ins.op == Op.STORE or ins.attrs["kind"] in ("add", "sub")
        read = next((r for r, rp in reads.get(key, []) if not _exclusive(rp, path)), None)
        if mutates and read is not None and (1, key) not in seen:
            out.append(Violation(1, name, read, ins))
            seen.add((1, key))
        write = next((w for w, wp in writes.get(key, []) if not _exclusive(wp, path)), None)
        if ins.op == Op.STORE and write is not None and (2, key) not in seen:
            out.append(Violation(2, name, write, ins))
            seen.add((2, key))
        writes.setdefault(key, []).append((ins, path))
    return out
