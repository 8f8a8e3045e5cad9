"""The tape fuzzer's generator: a random taped program (tests/fuzz/tape_programs.py's Program) from a seed,
composed from the kernel library (tape_kernels.py) with the hazard model keeping refusals rare."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from tests.fuzz.tape_kernels import LIBRARY
from tests.fuzz.tape_programs import ArraySpec, H, Op, Program, _accesses


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
