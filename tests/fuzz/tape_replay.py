"""Re-run one taped program of the tape-level fuzz tier and, with --reduce, minimise it.

    python -m tests.fuzz.tape_replay SEED DEVICE [--reduce] [--keep FEATURE ...] [--values]

SEED is the string a failing shard prints ("20261201/cpu/3/41"). Prints the program (runnable source),
its input parameters and the outcome. --reduce deletes ops and loss terms and replaces views by their
base arrays while the program keeps failing the same way (a wrong gradient stays a wrong gradient in the
same mode; an exception keeps its kind); --keep FEATURE (e.g. checkpoint, same-memory-copy,
view-alias-in-launch, copy-of-view, inplace) keeps that construct in the program while reducing, so a
rarer defect is not reduced into the common one. --values prints the inputs too.
"""

from __future__ import annotations

import argparse
import copy
import traceback
import warnings

import numpy as np

from tests.fuzz.tape_check import TapeMismatch, check_program, initial_values, kind_of
from tests.fuzz.tape_generate import generate
from tests.fuzz.tape_programs import ArraySpec, H, Program


def outcome(prog: Program, device: str, hvp: bool | None = None):
    """(mode-or-kind, message) of the program's failure, or None when it passes / is refused."""
    try:
        check_program(prog, device, hvp=hvp)
    except TapeMismatch as e:
        return str(e).split(":")[0], str(e)
    except Exception as e:
        return kind_of(e), "".join(traceback.format_exception(e))
    return None


def _candidates(prog: Program):
    """Smaller programs: one op or loss term fewer, a checkpoint's block inlined, a view replaced."""
    body = [k for k, op in enumerate(prog.ops) if op.tpl != "loss_term"]
    loss = [k for k, op in enumerate(prog.ops) if op.tpl == "loss_term"]
    for k in reversed(body):
        q = copy.deepcopy(prog)
        del q.ops[k]
        yield q
    if len(loss) > 1:
        for k in loss:
            q = copy.deepcopy(prog)
            del q.ops[k]
            yield q
    for k, op in enumerate(prog.ops):
        if op.kind == "checkpoint":                  # the block's launches, not checkpointed
            q = copy.deepcopy(prog)
            temps = [b for b in op.block if b.kind == "temp"]
            for t in temps:
                name = f"tmp{k}_{t.args[0].name}"
                q.arrays[name] = ArraySpec((q.n,), "zeros")
            ren = {t.args[0].name: f"tmp{k}_{t.args[0].name}" for t in temps}
            inl = []
            for b in op.block:
                if b.kind == "temp":
                    continue
                b = copy.deepcopy(b)
                b.args = [H(ren.get(a.name, a.name), a.view) if isinstance(a, H) else a for a in b.args]
                inl.append(b)
            q.ops[k:k + 1] = inl
            yield q
        for j, a in enumerate(op.args):
            if isinstance(a, H) and a.view and len(prog.arrays.get(a.name, _Flat).shape) == 1:
                q = copy.deepcopy(prog)
                q.ops[k].args[j] = H(a.name)
                yield q


class _Flat:
    shape = (1,)


def reduce(prog: Program, device: str, fails, keep=()) -> Program:
    """Greedy reduction while `fails(program)` holds and the program keeps every feature in `keep`."""
    changed = True
    while changed:
        changed = False
        for q in _candidates(prog):
            if not q.params() or any(f not in q.features() for f in keep):
                continue
            if fails(q):
                prog, changed = q, True
                break
    # drop arrays nothing uses any more
    used = {a.name for op in prog.ops for a in op.args if isinstance(a, H)}
    used |= {a for op in prog.ops if op.kind == "checkpoint" for a in op.args}
    used |= {a.name for op in prog.ops for b in op.block for a in b.args if isinstance(a, H)}
    prog.arrays = {k: v for k, v in prog.arrays.items() if k in used or k == "l"}
    return prog


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed")
    ap.add_argument("device")
    ap.add_argument("--reduce", action="store_true")
    ap.add_argument("--keep", nargs="*", default=[], help="features the reduced program must keep")
    ap.add_argument("--values", action="store_true", help="print the input values")
    ap.add_argument("--hvp", action="store_true", help="check forward-over-reverse even if the seed does not")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    prog = generate(args.seed)
    hvp = True if args.hvp else None
    first = outcome(prog, args.device, hvp)
    if first is not None and args.reduce:
        prog = reduce(prog, args.device, lambda q: (o := outcome(q, args.device, hvp)) is not None
                      and o[0] == first[0], keep=args.keep)
    print(prog.source())
    print("features:", ", ".join(prog.features()) or "none")
    if args.values:
        with np.printoptions(precision=17):
            for name, v in initial_values(prog).items():
                print(f"{name} = np.{v!r}")
    if first is None:
        print("passes (or is refused with gk.GradientRuleError)")
        return
    print((outcome(prog, args.device, hvp) or first)[1][-4000:])


if __name__ == "__main__":
    main()
