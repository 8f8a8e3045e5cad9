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
    outcome = check_program(prog, "cpu")         # "passed" / "refused" / "discarded"; raises on failure
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
import warnings
import zlib

import numpy as np

import gradkit as gk

F64 = gk.array(dtype=gk.float64)

# --------------------------------------------------------------------------- the kernel library


@gk.kernel
def assign_scaled(x: F64, k: F64, y: F64):
    i = gk.tid()
    y[i] = -k[0] * x[i]


@gk.kernel
def integrate(x: F64, f: F64, dt: gk.float64, xo: F64):
    i = gk.tid()
    xo[i] = x[i] + dt * f[i]


@gk.kernel
def accumulate(x: F64, c: gk.float64, y: F64):
    i = gk.tid()
    y[i] += c * x[i]


@gk.kernel
def accum_sin(x: F64, y: F64):
    i = gk.tid()
    y[i] += gk.sin(x[i])


@gk.kernel
def sub_scaled(x: F64, k: F64, y: F64):
    i = gk.tid()
    y[i] -= k[0] * x[i]


@gk.kernel
def square(x: F64, y: F64):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def sin_of(x: F64, y: F64):
    i = gk.tid()
    y[i] = gk.sin(x[i])


@gk.kernel
def mul(a: F64, b: F64, y: F64):
    i = gk.tid()
    y[i] = a[i] * b[i]


@gk.kernel
def tanh_mix(x: F64, y: F64, z: F64):
    i = gk.tid()
    z[i] = gk.tanh(x[i]) + gk.float64(0.5) * y[i]


@gk.kernel
def exp_decay(x: F64, k: F64, y: F64):
    i = gk.tid()
    y[i] = x[i] * gk.exp(-k[0])


@gk.kernel
def overwrite_const(v: gk.float64, y: F64):
    i = gk.tid()
    y[i] = v


@gk.kernel
def put(a: F64, y: F64):
    i = gk.tid()
    y[i] = a[0]


@gk.kernel
def guarded_overwrite(x: F64, y: F64):
    i = gk.tid()
    if i % 2 == 0:
        y[i] = gk.float64(2.0) * x[i]


@gk.kernel
def guarded_square(x: F64, y: F64):
    i = gk.tid()
    if i % 2 == 1:
        y[i] = x[i] * x[i]


@gk.kernel
def stencil_read(x: F64, y: F64):
    i = gk.tid()
    n = len(x)
    y[i] = x[gk.max(i - 1, 0)] - gk.float64(2.0) * x[i] + x[gk.min(i + 1, n - 1)]


@gk.kernel
def stencil_guarded(x: F64, y: F64):
    i = gk.tid()
    v = x[i] * x[i]
    if i > 0:
        v = v + x[i - 1] * x[i]
    if i + 1 < len(x):
        v = v + gk.float64(0.5) * x[i + 1]
    y[i] = v


@gk.kernel
def shift_read(x: F64, y: F64):
    i = gk.tid()
    y[i] = x[(i + 1) % len(x)]


@gk.kernel
def atomic_shared(x: F64, s: F64):
    i = gk.tid()
    gk.atomic_add(s, 0, x[i] * x[i])


@gk.kernel
def atomic_half(x: F64, y: F64):
    i = gk.tid()
    y[i // 2] += x[i]


@gk.kernel
def read_and_add_into_other(x: F64, y: F64, z: F64):
    i = gk.tid()
    z[i] += x[i] * y[i]


@gk.kernel
def inplace_axpy(x: F64, c: gk.float64, y: F64):
    i = gk.tid()
    y[i] = y[i] + c * x[i]


@gk.kernel
def inplace_scale(k: F64, y: F64):
    i = gk.tid()
    y[i] = y[i] * k[0]


@gk.kernel
def loss_term(x: F64, w: F64, l: F64):
    i = gk.tid()
    gk.atomic_add(l, 0, w[i] * x[i])


@dataclasses.dataclass(frozen=True)
class Template:
    """A library kernel as the generator sees it. `args`: one letter per parameter, in order: `v` a
    vector read (n elements), `s` a one-element array read (`k[0]`), `f` a float64 scalar, `o` the
    written array. `write`: how it writes `o` — "over" (every launched element), "partial" (a guarded
    store: only some), "add" (`+=`/atomic at the thread's element), "inplace" (`y[i] = f(y[i], ...)`),
    "shared" (atomics into `o[0]`, o a one-element array), "scatter" (`o[i // 2] +=`). `needs`: the
    parameters whose values the adjoint reads (for the hazard model). `elementwise`: thread i reads only
    element i, so an output may alias an input."""
    kernel: object
    args: str
    write: str
    needs: tuple = ()
    elementwise: bool = True


def _t(kernel, args, write, needs=(), elementwise=True):
    return Template(kernel, args, write, tuple(needs), elementwise)


LIBRARY = {t.kernel.__name__: t for t in [
    _t(assign_scaled, "vso", "over", (0, 1)),
    _t(integrate, "vvfo", "over"),
    _t(accumulate, "vfo", "add"),
    _t(accum_sin, "vo", "add", (0,)),
    _t(sub_scaled, "vso", "add", (0, 1)),
    _t(square, "vo", "over", (0,)),
    _t(sin_of, "vo", "over", (0,)),
    _t(mul, "vvo", "over", (0, 1)),
    _t(tanh_mix, "vvo", "over", (0,)),
    _t(exp_decay, "vso", "over", (0, 1)),
    _t(overwrite_const, "fo", "over"),
    _t(put, "so", "over"),
    _t(guarded_overwrite, "vo", "partial"),
    _t(guarded_square, "vo", "partial", (0,)),
    _t(stencil_read, "vo", "over", (), False),
    _t(stencil_guarded, "vo", "over", (0,), False),
    _t(shift_read, "vo", "over", (), False),
    _t(atomic_shared, "vo", "shared", (0,), False),
    _t(atomic_half, "vo", "scatter", (), False),
    _t(read_and_add_into_other, "vvo", "add", (0, 1)),
    _t(inplace_axpy, "vfo", "inplace"),
    _t(inplace_scale, "so", "inplace", (0, 1)),        # needs its own output's old value (index 1 = o)
]}
KERNELS = {**{name: t.kernel for name, t in LIBRARY.items()}, "loss_term": loss_term}

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


# --------------------------------------------------------------------------- the generator

MAX_OPS = 8
HAZARD_KEEP = 0.08              # share of programs the hazard model flags that are kept anyway
HVP_SHARE = 0.2


class _Gen:
    def __init__(self, r: random.Random, seed: str):
        self.r, self.seed = r, seed
        self.n = r.choice([4, 4, 5, 6, 6, 7, 8, 8, 10, 12])
        self.steps = r.choice([1, 2, 2, 3, 3])
        self.arrays: dict[str, ArraySpec] = {}
        self.clones = 0
        self.blocks = 0

    # arrays and handles
    def vec(self, name: str, init: str = "rand") -> str:
        n, r = self.n, self.r
        shape = (2, n // 2) if n % 2 == 0 and r.random() < 0.2 else (n,)
        self.arrays[name] = ArraySpec(shape, init)
        return name

    def one(self, name: str, init: str = "rand") -> str:
        self.arrays[name] = ArraySpec((1,), init)
        return name

    def handle(self, name: str) -> H:
        spec = self.arrays.get(name)
        if spec is not None and len(spec.shape) > 1:
            return H(name, self.r.choice(["reshape", "flatten"]))
        u = self.r.random()
        return H(name, "" if u < 0.8 or spec is None else "reshape" if u < 0.9 else "flatten")

    def shape(self, h: H) -> tuple:
        spec = self.arrays.get(h.name)
        full = spec.shape if spec is not None else (self.n,)
        return (int(np.prod(full)),) if h.view else tuple(full)

    def normalize(self, op: Op) -> Op:
        """Make a concrete op well-formed: kernels get 1-D handles, `assign` handles of one shape, an
        `assign` from NumPy data of the destination's shape."""
        def flat(h):
            return H(h.name, "reshape") if isinstance(h, H) and len(self.shape(h)) > 1 else h
        if op.kind == "launch":
            op.args = [flat(a) for a in op.args]
        elif op.kind == "assign" and self.shape(op.args[0]) != self.shape(op.args[1]):
            op.args = [H(op.args[0].name, op.args[0].view or "reshape"),
                       H(op.args[1].name, op.args[1].view or "reshape")]
        elif op.kind == "assign_np":
            op.value = op.value[:2] + (self.shape(op.args[0]),)
        return op


def _pick(r: random.Random, weighted: dict):
    items = [(k, w) for k, w in weighted.items() if w > 0]
    total = sum(w for _, w in items)
    u = r.random() * total
    for k, w in items:
        u -= w
        if u <= 0:
            return k
    return items[-1][0]


def _attempt(r: random.Random, seed: str) -> Program:
    g = _Gen(r, seed)
    n = g.n
    fs = [g.vec(f"f{j}") for j in range(r.choice([1, 1, 2]))]
    ps = [g.vec(f"p{j}") for j in range(r.choice([0, 1, 1]))]
    ks = [g.one(f"k{j}") for j in range(r.choice([1, 1, 2]))]
    ss = [g.one("s0")] if r.random() < 0.4 else []
    hs = [g.vec("h0")] if r.random() < 0.2 else []
    vec_fixed = fs + ps + hs

    # a step body over roles: "X" = x[t], "Xn" = x[t+1]; other names are fixed arrays
    if r.random() < 0.5:
        body = _canonical_body(g, fs, ks, ss)
    else:
        body, written_xn = [], False
        for _ in range(r.randint(1, 3)):
            op, written_xn = _body_op(g, vec_fixed, ks, ss, written_xn, block_ok=True)
            body.append(op)
        reads_x = any(isinstance(a, H) and a.name == "X" for op in body for a in op.args) or \
            any(op.kind == "checkpoint" and "X" in op.args for op in body)
        if (not written_xn or not reads_x) and r.random() < 0.9:
            body.append(_write_next(g, fs, ks))
    for _ in range(r.choice([0, 0, 1])):              # a random op inserted into a canonical body
        op, _ = _body_op(g, vec_fixed, ks, ss, True, block_ok=True)
        body.insert(r.randint(0, len(body)), op)
    pre_n = 1 if r.random() < 0.3 else 0
    post_n = 1 if r.random() < 0.35 else 0
    T = g.steps
    while T > 1 and len(body) * T + pre_n + post_n > MAX_OPS:
        T -= 1
    while len(body) + pre_n + post_n > MAX_OPS:
        body.pop()
    if len(body) * T + pre_n + post_n < 2:
        post_n += 1
    g.steps = T
    xs = [g.vec(f"x{t}", "rand") for t in range(T + 1)]

    ops: list[Op] = []

    def concrete(op: Op, t: int) -> Op:
        def sub(a):
            if isinstance(a, H):
                name = {"X": xs[t], "Xn": xs[t + 1]}.get(a.name, a.name)
                return g.handle(name) if a.name in ("X", "Xn") else H(name, a.view)
            if isinstance(a, str):
                return {"X": xs[t], "Xn": xs[t + 1]}.get(a, a)
            return a
        out = dataclasses.replace(op, args=[sub(a) for a in op.args],
                                  block=[concrete(b, t) for b in op.block])
        return g.normalize(out)

    for _ in range(pre_n):
        op, _ = _body_op(g, vec_fixed, ks, ss, True, block_ok=False)
        op = concrete(op, 0)
        op.comment = "before the steps"
        ops.append(op)
    for t in range(T):
        for j, op in enumerate(body):
            c = concrete(op, t)
            if j == 0:
                c.comment = f"step {t}"
            ops.append(c)
    readable = [xs[T]] + vec_fixed
    for _ in range(post_n):
        op = g.normalize(_post_op(g, readable, ks, ss))
        if op.comment == "":
            op.comment = "after the steps"
        ops.append(op)
        if op.kind == "clone":
            readable.append(op.args[0].name)

    # checkpoint bodies: their own names for the block's arrays
    for op in ops:
        if op.kind == "checkpoint":
            g.blocks += 1
            op.value = f"block{g.blocks - 1}"

    # the loss: a weighted sum of final values of 1-3 arrays that the program touched
    recent: list[str] = []
    for op in reversed(ops):                      # most recently written first, then what was read
        for m, _ in _accesses(op)[1]:
            if m not in recent:
                recent.append(m)
    for op in ops:
        for m, _ in _accesses(op)[0]:
            if m not in recent:
                recent.append(m)
    cand = [xs[T]] + [m for m in recent if m != xs[T]]
    terms = [xs[T]] if r.random() < 0.75 else []
    if ops[-1].kind == "clone" and r.random() < 0.8:
        terms.append(ops[-1].args[0].name)
    for m in cand:
        if len(terms) < 3 and m not in terms and r.random() < 0.35:
            terms.append(m)
    if not terms:
        terms = [cand[0]]
    for j, m in enumerate(terms):
        size = 1 if m in g.arrays and g.arrays[m].shape == (1,) else n
        w = f"w{j}"
        g.arrays[w] = ArraySpec((size,), "weight")
        h = H(m, "reshape") if m in g.arrays and len(g.arrays[m].shape) > 1 else H(m)
        ops.append(Op("launch", "loss_term", size, [h, H(w), H("l")], comment="loss" if j == 0 else ""))
    g.arrays["l"] = ArraySpec((1,), "zeros")
    prog = Program(seed, n, T, g.arrays, ops, hvp=r.random() < HVP_SHARE)
    return prog


def _canonical_body(g: _Gen, fs, ks, ss) -> list[Op]:
    """A simulation step as users write it (then mutated by the caller)."""
    r, n = g.r, g.n
    f, k = r.choice(fs), r.choice(ks)
    dt = r.choice([0.1, 0.05, 0.2])
    kind = r.choice(["spring", "zero_accumulate", "copy_inplace", "checkpoint_step", "overwrite_twice"])
    if kind == "spring":             # f[i] = -k x[i]; x[t+1] = x[t] + dt f
        return [Op("launch", "assign_scaled", n, [H("X"), g.handle(k), g.handle(f)]),
                Op("launch", "integrate", n, [H("X"), g.handle(f), dt, H("Xn")])]
    if kind == "zero_accumulate":    # f.zero_(); f += ...; x[t+1] = x[t] + dt f
        acc = r.choice(["accumulate", "sub_scaled", "accum_sin", "atomic_half"])
        if acc in ("accumulate", "sub_scaled"):
            mid = [H("X"), 0.7 if acc == "accumulate" else g.handle(k), g.handle(f)]
        else:
            mid = [H("X"), g.handle(f)]
        zero = Op("zero", args=[g.handle(f)]) if r.random() < 0.7 else \
            Op("fill", args=[g.handle(f)], value=0.25)
        ops = [zero, Op("launch", acc, n, mid)]
        if ss and r.random() < 0.5:
            ops.append(Op("launch", "atomic_shared", n, [H("X"), g.handle(ss[0])]))
        return ops + [Op("launch", "integrate", n, [H("X"), g.handle(f), dt, H("Xn")])]
    if kind == "copy_inplace":       # x[t+1] = copy of x[t], then updated in place
        first = r.choice([Op("copy", args=[H("Xn"), H("X")]), Op("assign", args=[H("Xn"), H("X")])])
        upd = r.choice([Op("launch", "inplace_axpy", n, [g.handle(f), dt, H("Xn")]),
                        Op("launch", "integrate", n, [H("Xn"), g.handle(f), dt, H("Xn")]),
                        Op("launch", "accumulate", n, [g.handle(f), dt, H("Xn")])])
        return [Op("launch", "assign_scaled", n, [H("X"), g.handle(k), g.handle(f)]), first, upd]
    if kind == "checkpoint_step":
        block = [Op("temp", args=[H("t0")]),
                 Op("launch", "assign_scaled", n, [H("X"), H(k), H("t0")]),
                 Op("launch", "integrate", n, [H("X"), H("t0"), dt, H("Xn")])]
        return [Op("checkpoint", args=["X", k, "Xn"], block=block)]
    # overwrite_twice: a buffer written by one kernel, then overwritten before (or after) it is read
    tpl = r.choice(["overwrite_const", "put", "sin_of", "guarded_overwrite"])
    args = {"overwrite_const": [0.5], "put": [g.handle(k)]}.get(tpl, [H("X")])
    return [Op("launch", tpl, n, args + [g.handle(f)]),
            Op("launch", "assign_scaled", n, [H("X"), g.handle(k), g.handle(f)]),
            Op("launch", "integrate", n, [H("X"), g.handle(f), dt, H("Xn")])]


def _write_next(g: _Gen, fs, ks) -> Op:
    """An op reading x[t] and overwriting all of x[t+1]."""
    r, n = g.r, g.n
    f, k = r.choice(fs), r.choice(ks)
    return r.choice([
        Op("launch", "integrate", n, [H("X"), g.handle(f), 0.1, H("Xn")]),
        Op("launch", "assign_scaled", n, [H("X"), g.handle(k), H("Xn")]),
        Op("launch", "sin_of", n, [H("X"), H("Xn")]),
        Op("launch", "stencil_read", n, [H("X"), H("Xn")]),
        Op("launch", "tanh_mix", n, [H("X"), g.handle(f), H("Xn")]),
    ])


def _vec_read(g: _Gen, vec_fixed, written_xn: bool) -> str:
    w = {"X": 4.0, "Xn": 2.0 if written_xn else 0.0}
    for a in vec_fixed:
        w[a] = 1.5
    return _pick(g.r, w)


def _body_op(g: _Gen, vec_fixed, ks, ss, written_xn: bool, block_ok: bool):
    """One op of the step body, over roles. Returns (op, whether x[t+1] is now written)."""
    r, n = g.r, g.n
    u = r.random()
    if block_ok and u < 0.1:
        return _checkpoint(g, vec_fixed, ks, written_xn), True
    if u < 0.3:
        op = _host_op(g, vec_fixed, ks, ss, written_xn)
        full = op.kind in ("assign", "assign_np", "zero", "fill") or (op.kind == "copy" and op.value is None)
        return op, written_xn or (full and op.args[0].name == "Xn")
    names = list(LIBRARY)
    weights = {k: 1.0 for k in names}
    for k in ("assign_scaled", "integrate", "accumulate", "inplace_axpy"):
        weights[k] = 2.0
    if not ss:
        weights["atomic_shared"] = 0.0
    for _ in range(20):
        tname = _pick(r, weights)
        tpl = LIBRARY[tname]
        args: list = []
        reads = []
        for c in tpl.args:
            if c == "v":
                a = _vec_read(g, vec_fixed, written_xn)
                reads.append(a)
                args.append(H(a) if a in ("X", "Xn") else g.handle(a))
            elif c == "s":
                a = r.choice(ks + ss) if ss and r.random() < 0.2 else r.choice(ks)
                reads.append(a)
                args.append(g.handle(a))
            elif c == "f":
                args.append(round(r.choice([0.1, 0.2, 0.05, r.uniform(-1, 1)]), 3))
            else:
                if tpl.write == "shared":
                    out = r.choice(ss)
                else:
                    w = {"Xn": 4.0 if not written_xn else 1.0, "X": 0.6 if tpl.elementwise else 0.0}
                    for a in vec_fixed:
                        w[a] = 2.0
                    if tpl.write in ("inplace",):
                        w["Xn"] = 1.0 if written_xn else 0.0
                    if tpl.write in ("add", "scatter", "partial") and not written_xn:
                        w["Xn"] = 0.3
                    out = _pick(r, w)
                if not tpl.elementwise and out in reads:
                    break                                    # would race: pick again
                args.append(H(out) if out in ("X", "Xn") else g.handle(out))
        else:
            dim = n
            op = Op("launch", tname, dim, args)
            if tpl.elementwise and tpl.write in ("over", "inplace", "add") and r.random() < 0.1:
                op.dim = n // 2
                op.value = "partial-dim"
            wrote = any(isinstance(a, H) and a.name == "Xn" for c, a in zip(tpl.args, args) if c == "o")
            return op, written_xn or (wrote and op.dim == n and tpl.write in ("over", "inplace"))
    f = g.handle(vec_fixed[0]) if vec_fixed else H("X")
    return Op("launch", "integrate", n, [H("X"), f, 0.1, H("Xn")]), True


def _host_op(g: _Gen, vec_fixed, ks, ss, written_xn: bool) -> Op:
    r, n = g.r, g.n
    targets = {"Xn": 3.0, **{a: 2.0 for a in vec_fixed}}
    kind = _pick(r, {"zero": 2.0, "fill": 1.0, "assign": 1.5, "assign_np": 0.7, "copy": 2.0,
                     "copy_partial": 1.0, "copy_same": 0.8, "assign_view": 0.5})
    if kind in ("zero", "fill"):
        pool = {**targets, **({a: 1.0 for a in ss})}
        dst = _pick(r, pool)
        h = H(dst) if dst in ("X", "Xn") else g.handle(dst)
        return Op(kind, args=[h], value=round(r.uniform(-1, 1), 2) if kind == "fill" else None)
    if kind == "assign_np":
        dst = _pick(r, targets)
        shape = (n,) if dst in ("X", "Xn") or g.arrays[dst].shape == (n,) else g.arrays[dst].shape
        lo, hi = round(r.uniform(-1, 0), 2), round(r.uniform(0, 1), 2)
        return Op("assign_np", args=[H(dst)], value=(lo, hi, shape))
    if kind in ("copy_same",):
        # gk.copy between two handles of one memory: the identity, or disjoint halves
        m = _pick(r, {"X": 2.0, "Xn": 1.0 if written_xn else 0.0, **{a: 1.0 for a in vec_fixed}})
        a, b = H(m, r.choice(["reshape", "flatten"])), H(m)
        if r.random() < 0.5:
            return Op("copy", args=[a, b] if r.random() < 0.5 else [b, a])
        h = n // 2
        return Op("copy", args=[a, b], value=(0, h, h) if r.random() < 0.5 else (h, 0, h))
    src = _vec_read(g, vec_fixed, written_xn)
    dst = _pick(r, {k: v for k, v in targets.items() if k != src})
    if kind == "assign_view":
        return Op("assign", args=[H(dst, "reshape"), H(src, r.choice(["reshape", "flatten"]))])
    if kind == "assign":
        # same shapes: flat views when either side is 2-D (roles X/Xn are resolved later: use views)
        return Op("assign", args=[H(dst, "reshape"), H(src, "reshape")] if r.random() < 0.5 or
                  "X" in (src, dst) or "Xn" in (src, dst) else [H(dst), H(src)])
    if kind == "copy":
        return Op("copy", args=[H(dst) if dst in ("X", "Xn") else g.handle(dst),
                                H(src) if src in ("X", "Xn") else g.handle(src)])
    cnt = r.randint(1, n - 1)
    do, so = r.randint(0, n - cnt), r.randint(0, n - cnt)
    return Op("copy", args=[H(dst), H(src)], value=(do, so, cnt))


def _checkpoint(g: _Gen, vec_fixed, ks, written_xn: bool) -> Op:
    """gk.checkpoint(block, inputs..., out): 1-2 launches into a fresh temporary, then one overwriting
    launch into `out` (x[t+1] or a buffer), which no block launch reads."""
    r, n = g.r, g.n
    out = _pick(r, {"Xn": 3.0, **{a: 1.0 for a in vec_fixed}})
    srcs = [s for s in (["X", "Xn"] if written_xn else ["X"]) + vec_fixed if s != out]
    ins: list[str] = []

    def read_vec(pool):
        a = r.choice(pool)
        if a in srcs and a not in ins:
            ins.append(a)
        return a

    block: list[Op] = [Op("temp", args=[H("t0")])]
    first = _pick(r, {"sin_of": 1, "square": 1, "mul": 1, "assign_scaled": 1, "tanh_mix": 1,
                      "stencil_read": 1, "accum_sin": 1})
    tpl = LIBRARY[first]
    args = []
    for c in tpl.args:
        if c == "v":
            args.append(H(read_vec(srcs)))
        elif c == "s":
            k = r.choice(ks)
            if k not in ins:
                ins.append(k)
            args.append(H(k))
        elif c == "f":
            args.append(0.5)
        else:
            args.append(H("t0"))
    block.append(Op("launch", first, n, args))
    last = _pick(r, {"integrate": 2, "mul": 1, "tanh_mix": 1, "stencil_read": 1, "sin_of": 1})
    tpl = LIBRARY[last]
    args = []
    for j, c in enumerate(tpl.args):
        if c == "v":
            a = "t0" if j == 0 or r.random() < 0.4 else read_vec(srcs)
            args.append(H(a))
        elif c == "f":
            args.append(round(r.choice([0.1, 0.2, -0.3]), 3))
        else:
            args.append(H(out))
    block.append(Op("launch", last, n, args))
    return Op("checkpoint", args=ins + [out], block=block)


def _post_op(g: _Gen, readable, ks, ss) -> Op:
    """After the steps: a copy of a (viewed) array, or one more launch reading the final state."""
    r, n = g.r, g.n
    u = r.random()
    src = r.choice(readable)
    if u < 0.45:
        name = f"c{g.clones}"
        g.clones += 1
        spec = g.arrays.get(src)
        view = "reshape" if r.random() < 0.5 or (spec and len(spec.shape) > 1) else ""
        return Op("clone", args=[H(name), H(src, view)], comment="a copy on the tape")
    tname = r.choice(["square", "sin_of", "mul", "stencil_read", "accumulate", "guarded_overwrite",
                      "assign_scaled"])
    tpl = LIBRARY[tname]
    dst = r.choice([a for a in readable if a != src] or readable)
    if not tpl.elementwise and dst == src:
        tname, tpl = "square", LIBRARY["square"]
    args = []
    for c in tpl.args:
        args.append(g.handle(src) if c == "v" else g.handle(r.choice(ks)) if c == "s" else 0.3 if c == "f"
                    else g.handle(dst))
    return Op("launch", tname, n, args)


def generate(seed: str) -> Program:
    """The program for `seed` (a string): deterministic across processes and machines."""
    r = random.Random(seed)
    prog = None
    for _ in range(40):
        prog = _attempt(r, seed)
        ok = prog.params() and len([o for o in prog.ops if o.tpl != "loss_term"]) >= 2
        if ok and (prog.hazard() is None or r.random() < HAZARD_KEEP):
            return prog
    return prog


# --------------------------------------------------------------------------- running and checking

EPS = 1e-6                      # central differences (inputs are O(1), float64)
EPS2 = 1e-4                     # the 4-point mixed differences of forward-over-reverse
HUGE = 1e6
STATS: collections.Counter = collections.Counter()


# a wrong gradient's kind names the rarest construct its program has (the reduced program tells for sure)
PRIORITY = ["same-memory-copy", "same-memory-assign", "copy-of-view", "checkpoint", "view-alias-in-launch",
            "atomic-shared", "inplace", "overwrite", "host-overwrite", "views"]


class TapeMismatch(AssertionError):
    """gradkit's gradient (or value) disagrees with finite differences of the same program."""


def kind_of(e: BaseException) -> str:
    """A failure's kind: a wrong gradient by mode and the constructs the program has, or an exception's
    type and first message line without numbers and quoted names."""
    if isinstance(e, TapeMismatch):
        return str(e).splitlines()[0].split("   (")[0]
    first = next((ln for ln in str(e).splitlines() if ln.strip()), "")
    first = re.sub(r"'[^']*'|\"[^\"]*\"|-?\d[\d.e+-]*", "_", first)
    return f"{type(e).__name__}: {first[:120]}"


def compile_program(prog: Program):
    """The `program` function of the program's source, with the kernel library in scope."""
    ns = {"gk": gk, "np": np, **KERNELS}
    exec(compile(prog.source(), f"<tape program {prog.seed}>", "exec"), ns)
    return ns["program"]


def initial_values(prog: Program) -> dict[str, np.ndarray]:
    """Random inputs, from the program's seed and each array's name (so a reduced program keeps them)."""
    vals = {}
    for name, spec in prog.arrays.items():
        rng = np.random.default_rng(zlib.crc32(f"values/{prog.seed}/{name}".encode()))
        if spec.init == "zeros":
            vals[name] = np.zeros(spec.shape)
        elif spec.init == "weight":
            vals[name] = rng.uniform(0.5, 1.5, spec.shape) * rng.choice([-1.0, 1.0], spec.shape)
        else:
            vals[name] = rng.uniform(-1.0, 1.0, spec.shape)
    return vals


def alloc(arrays: dict, vals: dict, grad: bool) -> dict:
    """gk.arrays (on the current device) with the given values; gradients where `grad`, except weights."""
    return {name: gk.array(vals[name], dtype=gk.float64, requires_grad=grad and spec.init != "weight")
            for name, spec in arrays.items()}


def run_forward(fn, arrays: dict, vals: dict) -> float:
    """The loss of one run of `fn` without a tape (no gradients allocated)."""
    arrs = alloc(arrays, vals, grad=False)
    fn(**arrs)
    return float(arrs["l"].numpy()[0])


def taped_gradients(fn, arrays: dict, vals: dict, params: list[str]):
    """(loss, {param: flat gradient}) from one taped run and `tape.backward(loss=l)`."""
    arrs = alloc(arrays, vals, grad=True)
    tape = gk.Tape()
    with tape:
        fn(**arrs)
    loss = float(arrs["l"].numpy()[0])
    tape.backward(loss=arrs["l"])
    return loss, {p: arrs[p].grad.numpy().reshape(-1).copy() for p in params}


def fd_gradients(fn, arrays: dict, vals: dict, params: list[str], eps: float = EPS) -> dict:
    """Central differences of the loss for every element of every parameter."""
    fd = {}
    for p in params:
        flat = vals[p].reshape(-1)
        d = np.empty(flat.size)
        for j in range(flat.size):
            up, dn = dict(vals), dict(vals)
            up[p], dn[p] = flat.copy(), flat.copy()
            up[p][j] += eps
            dn[p][j] -= eps
            up[p], dn[p] = up[p].reshape(vals[p].shape), dn[p].reshape(vals[p].shape)
            d[j] = (run_forward(fn, arrays, up) - run_forward(fn, arrays, dn)) / (2 * eps)
        fd[p] = d
    return fd


def hvp_dual(fn, arrays: dict, vals: dict, v: dict) -> dict:
    """Forward-over-reverse: the taped run and its backward inside gk.ForwardMode(seeds={p: v[p]});
    returns {p: flat p.grad.dual} (zeros where gradkit left no dual)."""
    arrs = alloc(arrays, vals, grad=True)
    seeds = {arrs[p]: gk.array(v[p], dtype=gk.float64) for p in v}
    with gk.ForwardMode(seeds=seeds):
        tape = gk.Tape()
        with tape:
            fn(**arrs)
        tape.backward(loss=arrs["l"])
    out = {}
    for p in v:
        dual = arrs[p].grad.dual
        out[p] = np.zeros(vals[p].size) if dual is None else dual.numpy().reshape(-1).copy()
    return out


def fd_hvp(fn, arrays: dict, vals: dict, v: dict, eps: float = EPS2) -> dict:
    """H v by mixed central differences of the loss: d/dp_j (grad L . v), 4 runs per element."""
    def shifted(p, j, a, b):
        out = {q: vals[q] + (b * eps * v[q] if q in v else 0.0) for q in vals}
        flat = out[p].reshape(-1).copy()
        flat[j] += a * eps
        out[p] = flat.reshape(vals[p].shape)
        return run_forward(fn, arrays, out)
    want = {}
    for p in v:
        w = np.empty(vals[p].size)
        for j in range(w.size):
            w[j] = (shifted(p, j, 1, 1) - shifted(p, j, 1, -1) - shifted(p, j, -1, 1)
                    + shifted(p, j, -1, -1)) / (4 * eps * eps)
        want[p] = w
    return want


def compare(what: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when |got - want| <= rtol |want| + atol everywhere, else a readable report."""
    bad = np.abs(got - want) > rtol * np.abs(want) + atol
    if not bad.any():
        return None
    return (f"{what}: {int(bad.sum())} of {bad.size} elements differ\n"
            f"    got      {np.array2string(got, precision=6, max_line_width=200)}\n"
            f"    expected {np.array2string(want, precision=6, max_line_width=200)}")


def reverse_problems(fn, arrays: dict, vals: dict, params: list[str]):
    """(problems, plain loss): every parameter's gradient against central differences, and the taped
    run's loss against the untaped one. gk.GradientRuleError propagates."""
    loss, grads = taped_gradients(fn, arrays, vals, params)
    plain = run_forward(fn, arrays, vals)
    if not np.isfinite(plain) or abs(plain) > HUGE:
        return None, plain
    problems = []
    if abs(loss - plain) > 1e-12 * max(1.0, abs(plain)):
        problems.append(f"loss on the tape {loss!r} != loss without a tape {plain!r}")
    fd = fd_gradients(fn, arrays, vals, params)
    scale = max([1.0, abs(plain)] + [float(np.max(np.abs(d))) for d in fd.values()])
    for p in params:
        bad = compare(f"{p}.grad", grads[p], fd[p], 1e-6, 1e-8 * scale)
        if bad:
            problems.append(bad)
    return problems, plain


def hvp_problems(fn, arrays: dict, vals: dict, params: list[str], seed: str) -> list[str]:
    """Every parameter's p.grad.dual (forward-over-reverse, random seeds v) against mixed central
    differences. gk.GradientRuleError propagates."""
    rng = np.random.default_rng(zlib.crc32(("hvp/" + seed).encode()))
    v = {p: rng.uniform(-1, 1, vals[p].shape) for p in params}
    got = hvp_dual(fn, arrays, vals, v)
    want = fd_hvp(fn, arrays, vals, v)
    scale = max([1.0] + [float(np.max(np.abs(w))) for w in want.values()])
    return [bad for p in params if (bad := compare(f"{p}.grad.dual", got[p], want[p], 1e-4, 1e-5 * scale))]


def check_program(prog: Program, device: str, hvp: bool | None = None) -> str:
    """Run `prog` taped on `device`, backward from the loss, and compare every input parameter's gradient
    with central differences; forward-over-reverse too when `prog.hvp` (or `hvp`). Returns "passed",
    "refused" (gk.GradientRuleError) or "discarded" (huge values); raises TapeMismatch, or whatever
    gradkit raised."""
    STATS["programs"] += 1
    fn = compile_program(prog)
    vals = initial_values(prog)
    params = prog.params()
    feats = prog.features()
    top = next((f for f in PRIORITY if f in feats), "plain")
    tags = f"{top}   (program has: {', '.join(feats) or 'nothing special'})"
    with warnings.catch_warnings(), gk.ScopedDevice(device):
        warnings.simplefilter("ignore")
        try:
            problems, _ = reverse_problems(fn, prog.arrays, vals, params)
        except gk.GradientRuleError:
            STATS["refused"] += 1
            STATS["refused_unpredicted" if prog.hazard() is None else "refused_predicted"] += 1
            return "refused"
        if problems is None:
            STATS["discarded"] += 1
            return "discarded"
        STATS["reverse"] += 1
        if problems:
            raise TapeMismatch(f"reverse: {tags}\n" + "\n".join(problems))
        if hvp if hvp is not None else prog.hvp:
            try:
                problems = hvp_problems(fn, prog.arrays, vals, params, prog.seed)
            except gk.GradientRuleError:
                STATS["hvp_refused"] += 1
                return "passed"
            STATS["hvp"] += 1
            if problems:
                raise TapeMismatch(f"forward-over-reverse: {tags}\n" + "\n".join(problems))
    return "passed"
