"""Re-run one fuzz program and, with --reduce, minimise it while it keeps failing the same way.

    python -m tests.fuzz.replay SEED DEVICE [--reduce] [--match REGEX]

SEED is the string a failing shard prints ("20261123/cpu/3/41"). Reduction deletes statements and
unwraps blocks (if/for/while bodies) and drops trailing kernels, keeping each change after which the
failure (its kind, or REGEX over the traceback) persists; prints the smallest program.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import re
import signal
import tempfile
import traceback
import warnings

from tests.fuzz.checker import check_program
from tests.fuzz.generate import generate
from tests.fuzz.test_fuzz import _kind

KEEP = re.compile(r"^\s*(w\d+ \+= 1|if w\d+ > \d+:|w\d+ = 0)$")     # while-loop counters: no endless loops


def _outcome(prog, device, folder):
    """(kind, traceback) of the program's failure, or None when it passes (or hangs)."""
    signal.alarm(30)
    try:
        check_program(prog, device, folder)
    except TimeoutError:
        return None
    except Exception as e:
        return _kind(e), "".join(traceback.format_exception(e))
    finally:
        signal.alarm(0)
    return None


def _block_end(lines: list[str], j: int) -> int:
    indent = len(lines[j]) - len(lines[j].lstrip())
    e = j + 1
    while e < len(lines) and len(lines[e]) - len(lines[e].lstrip()) > indent:
        e += 1
    return e


def _candidates(lines: list[str], j: int, start: int):
    if KEEP.match(lines[j]) or (lines[j].strip() == "break" and KEEP.match(lines[j - 1])):
        return
    e = _block_end(lines, j)
    yield lines[:j] + lines[e:]
    if lines[j].rstrip().endswith(":") and e > j + 1 and not lines[j].lstrip().startswith(("else", "elif")):
        yield lines[:j] + [ln[4:] for ln in lines[j + 1:e]] + lines[e:]


def reduce(prog, device, fails):
    """Greedy line-level reduction of every helper and kernel body while `fails(program)` holds."""
    changed = True
    while changed:
        changed = False
        while len(prog.kernels) > 1:
            q = copy.deepcopy(prog)
            q.kernels.pop()
            q.steps = [s for s in q.steps if s[0] != "launch" or s[1] < len(q.kernels)]
            if not fails(q):
                break
            prog, changed = q, True
        units = [("helpers", h) for h in range(len(prog.helpers))] + \
                [("kernels", k) for k in range(len(prog.kernels))]
        for where, n in units:
            lines = (prog.helpers[n] if where == "helpers" else prog.kernels[n].src).split("\n")
            start = next(k for k, ln in enumerate(lines) if ln.startswith("def ")) + 1
            for j in range(len(lines) - 1, start - 1, -1):
                if j >= len(lines):
                    continue
                for cand in _candidates(lines, j, start):
                    if len(cand) <= start:
                        continue
                    q = copy.deepcopy(prog)
                    if where == "helpers":
                        q.helpers[n] = "\n".join(cand)
                    else:
                        q.kernels[n].src = "\n".join(cand)
                    if fails(q):
                        prog, lines, changed = q, cand, True
                        break
    return prog


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed")
    ap.add_argument("device")
    ap.add_argument("--reduce", action="store_true")
    ap.add_argument("--match", help="regex the failure's traceback must match (default: same kind)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError()))
    folder = pathlib.Path(tempfile.mkdtemp(prefix="gradkit-replay-"))
    prog = generate(args.seed)
    first = _outcome(prog, args.device, folder)
    if first is None:
        print(repr(prog), "\npasses")
        return
    pattern = re.compile(args.match) if args.match else None

    def fails(p) -> bool:
        got = _outcome(p, args.device, folder)
        return got is not None and (bool(pattern.search(got[1])) if pattern else got[0] == first[0])

    if args.reduce:
        prog = reduce(prog, args.device, fails)
    print(repr(prog))
    print((_outcome(prog, args.device, folder) or first)[1][-3000:])


if __name__ == "__main__":
    main()
