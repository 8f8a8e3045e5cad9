"""One whole random program from a seed: sizes, launch grid, module constants, inputs, 0-2 helpers and a
chain of 1-3 kernels, with host copies between kernels recorded on the tape."""

from __future__ import annotations

import gradkit as gk

from tests.fuzz.exprs import Rand
from tests.fuzz.program import ArraySpec, Program
from tests.fuzz.stmts import StmtGen

HOST_OPS = hasattr(gk, "copy")             # gk.copy / array.assign between kernels (host_op below)


def _dims(r: Rand, n: int):
    """n threads as a 1-D launch mostly, else as a 2-D or 3-D grid of the same size."""
    grids = [(a, n // a) for a in range(1, n + 1) if n % a == 0] + \
            [(a, b, n // (a * b)) for a in range(1, n + 1) for b in range(1, n + 1) if n % (a * b) == 0]
    return r.pick(grids) if r.coin(0.25) else n


def _inputs(prog: Program) -> None:
    N = prog.N
    for spec in (ArraySpec("x", "f", (N,)), ArraySpec("y", "f", (N,)), ArraySpec("V", "v3", (N,)),
                 ArraySpec("X2", "f", (N, 4)), ArraySpec("idx", "i", (N,))):
        prog.arrays[spec.name] = spec


def generate(seed) -> Program:
    """The random program of `seed`: 0-2 helpers and a chain of 1-3 kernels on N threads."""
    r = Rand(seed)
    prog = Program(N=r.int(1, 6), ints={"n": r.int(-2, 5), "m": r.int(0, 4)}, fwd_only=r.coin(0.15))
    start, step = r.int(-2, 2), r.pick([1, 2, -1, 3])
    prog.consts = {"SCALE": r.pick([0.75, -1.5, 2.25]), "KN": r.int(1, 4),
                   "OFFS": tuple(start + step * k for k in range(r.int(2, 3)))}
    prog.dim = _dims(r, prog.N)
    _inputs(prog)
    gen = StmtGen(r, prog)
    for h in range(r.weighted({0: 2, 1: 3, 2: 2})):
        prog.helpers.append(gen.helper(h))
    for j in range(r.weighted({1: 5, 2: 3, 3: 2})):
        if j and HOST_OPS and r.coin(0.3):
            host_op(prog, r, j)
        prog.kernels.append(gen.kernel_src(j))
        if HOST_OPS and r.coin(0.15):
            fill(prog, r, j)
        prog.steps.append(("launch", j))
    return prog


# HOST OPS (when gradkit has them): recorded on the tape between two kernels, a host op copies an output of
# the previous kernel into a fresh array that later kernels read: gk.copy (whole, or a range with offsets),
# dst.assign(src), or src.copy(); fill_/zero_ re-initialise an output right before its kernel runs.
def host_op(prog: Program, r: Rand, j: int) -> None:
    srcs = [a for a in prog.outputs() if a.owner == j - 1]
    if not srcs:
        return
    src = r.pick(srcs)
    dst = ArraySpec(f"cp{j}", src.kind, src.shape, -1, "zeros")
    prog.arrays[dst.name] = dst
    op = r.weighted({"copy": 2, "range": 2, "assign": 2, "clone": 1})
    if op != "range":
        prog.steps.append((op, dst.name, src.name))
        return
    size = 1
    for d in src.shape:
        size *= d
    count = r.int(0, size)
    prog.steps.append(("copy", dst.name, src.name, r.int(0, size - count), r.int(0, size - count), count))


def fill(prog: Program, r: Rand, j: int) -> None:
    """`a.fill_(v)` / `a.zero_()` on an output kernel j accumulates into, right before the launch."""
    outs = [a for a in prog.outputs() if a.owner == j and a.init == "zeros"]
    if outs:
        prog.steps.append(("fill", r.pick(outs).name, r.pick([0.0, 0.5, -1.25])))
