"""Hazards on a tape: steps whose gradient is zero by construction, which a user rarely means.

- *overwritten before read*: a launch (or host copy) writes values that depend on inputs with gradients,
  and a later step overwrites all of them before anything reads them: those inputs get no gradient
  through that write (the rope whose wind force a later kernel replaced). Both lines are named.
- *not differentiable*: a parameter (an array with `requires_grad` the tape reads before writing it)
  whose every reading launch uses it only through int(), a comparison, stop_gradient, an index or a
  condition: its gradient is zero whatever the loss. The line of that use is named.
- *host copy*: a declared parameter (`gk.Tape(params=...)`, an optimiser's) that no recorded step reads,
  while an array holding the same values is read instead: its values were copied through the host
  (`gk.array(p.numpy())`), which breaks the gradient chain. The copy's line is named; a declared parameter
  nothing reads and nothing copied is an *unused parameter*, named by the line that created it.

`tape.hazards()` lists them; `Tape(check=True)` / `gk.config.check_ad` warn (GradientHazardWarning) at
backward; the debugger shows them beside the gradients they explain.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ad.hazards import blocked_reads, covering_stores, store_lines
from ...core.errors import GradientHazardWarning

OVERWRITTEN = "overwritten before read"
NOT_DIFFERENTIABLE = "not differentiable"
HOST_COPY = "host copy"
UNUSED_PARAMETER = "unused parameter"


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
    """The array's label, else the user's variable gradkit debug found for it, else `fallback`."""
    origin = getattr(a, "_origin", None)
    return getattr(a, "label", None) or (origin[2] if origin and origin[2] else None) or fallback


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


def find_hazards(tape, params=()) -> list[Hazard]:
    """Every hazard on `tape`'s records, in record order, then the declared parameters (the tape's own and
    `params`) that no step reads."""
    facts: dict[int, _Kernel] = {}
    writers: dict[int, tuple] = {}        # id(buffer) -> (record index, array, line, who) of a covering write
    first_use: dict[int, str] = {}        # id(buffer) -> "read" | "write": how the tape first used it
    blocked_only: dict[int, tuple] = {}   # id(buffer) -> (array, why, record) while every read was blocked
    out: list[Hazard] = []

    def read(a, index: int, why: str | None = None) -> None:
        key = id(a.buffer)
        writers.pop(key, None)
        if first_use.setdefault(key, "read") == "read" and a.requires_grad:
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
            write(dst, index, whole, src is not None and src.requires_grad, _site(getattr(rec, "site", None)),
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
    return out + unread_parameters(tape, params)


def _created(a) -> str | None:
    """'file:line' where `a` was created (recorded under gradkit debug's Capture), else None."""
    origin = getattr(a, "_origin", None)
    return f"{origin[0]}:{origin[1]}" if origin and origin[0] else None


def _same_values(a, b) -> bool:
    import numpy as np
    if tuple(a.shape) != tuple(b.shape) or a.dtype is not b.dtype:
        return False
    try:
        return bool(np.array_equal(np.asarray(a._read()), np.asarray(b._read())))
    except Exception:                          # a released or unreadable buffer: no evidence either way
        return False


def unread_parameters(tape, params=()) -> list[Hazard]:
    """Declared parameters (the tape's `params` and `params`) with requires_grad that no step on the tape
    reads: a *host copy* when an array the tape reads but never writes holds the same values (its creation
    line named), else an *unused parameter* (not claimed when the tape holds Python steps, record_func or
    checkpoint blocks, which may read arrays they do not list). Either way the parameter's gradient is zero."""
    declared = {id(p.buffer): p for p in (*getattr(tape, "params", ()), *params)
                if hasattr(p, "buffer") and p.requires_grad}
    if not declared:
        return []
    used, written, read_only = set(), set(), {}
    for rec in tape.records:
        arrays = rec.args if rec.kind == "launch" else getattr(rec, "arrays", ())
        for a in arrays:
            if hasattr(a, "buffer"):
                used.add(id(a.buffer))
                read_only.setdefault(id(a.buffer), a)
        written.update(id(a.buffer) for a in getattr(rec, "writes", ()) if hasattr(a, "buffer"))
        if rec.kind == "launch":
            facts = rec.kernel_obj.facts()
            written.update(id(rec.args[j].buffer) for j in facts.written if hasattr(rec.args[j], "buffer"))
    opaque = any(rec.kind not in ("launch", "host") for rec in tape.records)
    out = []
    for key, p in declared.items():
        if key in used:
            continue
        name = _label(p, "a declared parameter")
        copy = next((a for k, a in read_only.items() if k not in written and k not in declared
                     and _same_values(a, p)), None)
        if copy is not None:
            line = _created(copy)
            at = f" at {line}" if line else ""
            out.append(Hazard(HOST_COPY, p,
                              f"'{name}' is a declared parameter, but no launch reads it: '{_label(copy, 'a copy')}',"
                              f" created{at} with the same values, is read instead. A copy through the host "
                              f"(gk.array({name}.numpy())) breaks the gradient chain, so '{name}' gets no gradient:"
                              f" pass '{name}' itself", (), (line,) if line else (), (p,)))
        elif not opaque:                   # a Python step may read arrays it does not list: no claim then
            line = _created(p)
            at = f" (created at {line})" if line else ""
            out.append(Hazard(UNUSED_PARAMETER, p,
                              f"'{name}'{at} is a declared parameter, but no step on the tape reads it: its "
                              "gradient is zero", (), (line,) if line else (), (p,)))
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
