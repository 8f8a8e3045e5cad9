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
        prog.steps.append(("launch", j))
    return prog


# HOST OPS: when HOST_OPS is on, a host op (gk.copy(dst, src) or dst.assign(src)) recorded on the tape between
# two kernels copies a per-thread output of the previous kernel into a fresh array that later kernels read.
def host_op(prog: Program, r: Rand, j: int) -> None:
    srcs = [a for a in prog.outputs() if a.owner == j - 1 and not a.shared]
    if not srcs:
        return
    src = r.pick(srcs)
    dst = ArraySpec(f"cp{j}", src.kind, src.shape, -1, "zeros")
    prog.arrays[dst.name] = dst
    prog.steps.append((r.pick(["copy", "assign"]), dst.name, src.name))
