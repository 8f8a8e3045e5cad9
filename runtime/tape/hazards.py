"""Hazards on a tape: steps whose gradient is zero by construction, which a user rarely means.

- *overwritten before read*: a launch (or host copy) writes values that depend on inputs with gradients,
  and a later step overwrites all of them before anything reads them: those inputs get no gradient
  through that write (the rope whose wind force a later kernel replaced). Both lines are named.
- *not differentiable*: a parameter (an array with `requires_grad` the tape reads before writing it)
  whose every reading launch uses it only through int(), a comparison, stop_gradient, an index or a
  condition: its gradient is zero whatever the loss. The line of that use is named.

`tape.hazards()` lists them; `Tape(check=True)` / `gk.config.check_ad` warn (GradientHazardWarning) at
backward; the debugger shows them beside the gradients they explain.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ad.hazards import blocked_reads, covering_stores, store_lines
from ...core.errors import GradientHazardWarning

OVERWRITTEN = "overwritten before read"
NOT_DIFFERENTIABLE = "not differentiable"


@dataclass(frozen=True)
class Hazard:
    """One hazard: its kind, the array it is about, a sentence naming the lines, the records involved."""

    kind: str
    array: object
    message: str
    records: tuple[int, ...]
    lines: tuple[str, ...]
    inputs: tuple = ()          # the arrays that get no gradient because of it

    def __str__(self) -> str:
        return self.message


def _label(a, fallback: str) -> str:
    return getattr(a, "label", None) or fallback


def _user_positions(fn) -> dict[int, int]:
    from ...core.passes.scalarize import user_params
    return dict(enumerate(user_params(fn)))


class _Kernel:
    """The facts about one kernel, in user-level parameter indices."""

    def __init__(self, kernel):
        fwd = kernel.lowered("forward")
        user = _user_positions(fwd)
        facts = kernel.facts()
        self.reads, self.writes = set(facts.read), set(facts.written)
        self.lines = {user[k]: line for k, line in store_lines(fwd).items()}
        self.covering = {user[k]: varies for k, varies in covering_stores(fwd).items()}
        try:
            blocked = blocked_reads(kernel.lowered("forward_ad"), kernel.lowered("adjoint"))
        except Exception:                      # no adjoint: backward reports that itself
            blocked = {}
        fad = _user_positions(kernel.lowered("forward_ad"))
        self.blocked = {fad[k]: why for k, why in blocked.items()}


def _site(site) -> str:
    return f"{site[0]}:{site[1]}" if site else "an unknown line"


def find_hazards(tape) -> list[Hazard]:
    """Every hazard on `tape`'s records, in record order."""
    facts: dict[int, _Kernel] = {}
    writers: dict[int, tuple] = {}        # id(buffer) -> (record index, array, line, who) of a covering write
    first_use: dict[int, str] = {}        # id(buffer) -> "read" | "write": how the tape first used it
    blocked_only: dict[int, tuple] = {}   # id(buffer) -> (array, why, record) while every read was blocked
    out: list[Hazard] = []

    def read(a, index: int, why: str | None = None) -> None:
        key = id(a.buffer)
        writers.pop(key, None)
        if first_use.setdefault(key, "read") == "read" and a.grad is not None:
            if why is None:
                blocked_only[key] = None
            elif blocked_only.get(key, ()) is not None:
                blocked_only.setdefault(key, (a, why, index))

    def write(a, index: int, covering: bool, varies: bool, line: str, who: str, inputs: tuple = ()) -> None:
        key = id(a.buffer)
        first_use.setdefault(key, "write")
        old = writers.pop(key, None)
        if covering and old is not None:
            o_index, o_array, o_line, o_who, o_inputs = old
            names = ", ".join(f"'{_label(x, 'an input')}'" for x in o_inputs) or "its inputs"
            verb = "gets" if len(o_inputs) == 1 else "get"
            out.append(Hazard(OVERWRITTEN, o_array,
                              f"{o_who} writes '{_label(o_array, 'an array')}' at {o_line}, and {who} overwrites all "
                              f"of it at {line} before anything reads it: {names} {verb} no gradient through that "
                              "first write", (o_index, index), (o_line, line), o_inputs))
        if covering and varies:
            writers[key] = (index, a, line, who, inputs)

    for index, rec in enumerate(tape.records):
        if rec.kind == "launch":
            kernel = rec.kernel_obj
            f = facts.get(id(kernel))
            if f is None:
                f = facts[id(kernel)] = _Kernel(kernel)
            args, who = rec.args, f"kernel '{rec.kernel}'"
            inputs = tuple(args[j] for j in sorted(f.reads - f.blocked.keys() - f.writes)
                           if getattr(args[j], "grad", None) is not None)
            for j in sorted(f.reads):
                read(args[j], index, f.blocked.get(j))
            for w in sorted(f.writes):
                a = args[w]
                covering = w in f.covering and tuple(a.shape) == tuple(rec.dim)
                write(a, index, covering, covering and f.covering[w] and bool(inputs),
                      f.lines.get(w, "an unknown line"), who, inputs)
        elif rec.kind == "host":
            dst = rec.writes[0]
            src = next((a for a in rec.arrays if a is not dst), None)
            if src is not None:
                read(src, index)
            whole = getattr(rec, "whole", True)
            write(dst, index, whole, src is not None and src.grad is not None, _site(getattr(rec, "site", None)),
                  f"{rec.name}", (src,) if src is not None else ())
        else:                                   # Python code: it may read and write anything it was given
            for a in rec.arrays:
                if hasattr(a, "buffer"):
                    read(a, index)
    out = _merged(out)
    for key, entry in blocked_only.items():
        if entry is not None:
            a, why, index = entry
            out.append(Hazard(NOT_DIFFERENTIABLE, a,
                              f"'{_label(a, 'a parameter')}' reaches the outputs only through {why}: its gradient "
                              "is zero whatever the loss", (index,), (why.rsplit(" at ", 1)[-1],), (a,)))
    return out


def _merged(found: list[Hazard]) -> list[Hazard]:
    """One hazard per message (a time-stepping loop repeats it every step), with how many times it occurred
    and every record involved."""
    groups: dict[tuple, list[Hazard]] = {}
    for h in found:
        groups.setdefault((h.kind, h.message), []).append(h)
    out = []
    for (kind, message), hs in groups.items():
        first = hs[0]
        if len(hs) > 1:
            message += f" ({len(hs)} times)"
        out.append(Hazard(kind, first.array, message, tuple(r for h in hs for r in h.records), first.lines,
                          first.inputs))
    return out


def warn_hazards(tape) -> None:
    """Warn once per hazard (GradientHazardWarning), for Tape(check=True) / gk.config.check_ad."""
    import warnings
    for h in find_hazards(tape):
        warnings.warn(h.message, GradientHazardWarning, stacklevel=4)
