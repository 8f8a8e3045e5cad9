"""Random statements, @gk.func helpers and kernel chains: `generate(seed)` is one whole program.

Array writes follow the rules under which reverse mode is exact: a thread writes only its own row
(`out[i]`, scratch `s[i, k, ...]` indexed by every enclosing loop variable, so each element is stored once),
shared elements only by accumulation (`+=`, `-=`, atomics), `*=` only into arrays written no other way,
and no kernel reads what it writes. Programs drawn `fwd_only` break those rules on purpose (mixing `*=`,
re-stores and reads of their own rows): they are checked on forward values and JVPs only.
"""

from __future__ import annotations

import os

import gradkit as gk

from tests.fuzz.exprs import GK_TYPE, MATS, VECS, VIEWS, VLEN, ExprGen, Rand, Var
from tests.fuzz.program import ArraySpec, KernelSrc, Program

MAX_DEPTH = 4                              # nesting of if/for/while (loops: 3 at most)
TRIPS = {0: 7, 1: 4, 2: 3, 3: 2}          # most iterations of a loop at each nesting depth
SIZE = float(os.environ.get("GRADKIT_FUZZ_SIZE", "1"))   # scales statements per kernel (campaigns: bigger)
HOST_OPS = hasattr(gk, "copy")             # gk.copy / array.assign on the tape between kernels (host_op below)


def _ind(lines: list[str]) -> list[str]:
    return ["    " + ln for ln in lines]


class KernelCtx:
    """What kernel j may read and the output arrays it has created (on demand) and how it wrote them."""

    def __init__(self, j: int, prog: Program, gen: "StmtGen"):
        self.j, self.prog, self.gen = j, prog, gen
        self.used: set[str] = set()
        self.inputs = {a.name: a for a in prog.inputs()}
        self.prev = [a for a in prog.outputs() if a.owner != j]
        self.state: dict[str, str] = {}        # own output -> "fresh" | "stored" | "accum"
        self.muls: list = []                     # `prod[i, idx] *= v` so far: (idx is a literal, in a loop)

    def readable(self) -> list:
        own = [a for a in self.prog.outputs() if a.owner == self.j and not a.shared] if self.prog.fwd_only else []
        return list(self.inputs.values()) + self.prev + own

    def output(self, name: str, kind: str, shape: tuple, init: str = "zeros", shared: bool = False) -> ArraySpec:
        a = self.prog.arrays.get(name)
        if a is None:
            a = self.prog.arrays[name] = ArraySpec(name, kind, shape, self.j, init, shared)
            self.state[name] = "fresh"
        self.used.add(name)
        return a


class StmtGen(ExprGen):
    """Statements of kernels and helpers; `self.loops` holds (variable, interval) of enclosing loops."""

    def __init__(self, r: Rand, prog: Program):
        super().__init__(r, prog)
        self.loops: list[tuple[str, tuple]] = []
        self.unrolled: list[bool] = []           # per enclosing loop: a gk.static loop (no break/continue)
        self.depth = 0
        self.budget = 0
        self.ret = None               # a helper's return type; None in kernels
        self.names = iter(range(10**6))

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    def value(self, t: str, d: int | None = None) -> str:
        """An expression of type t usable as the right-hand side of `name = ...` (never an alias of a local)."""
        d = self.r.int(0, 2) if d is None else d
        if t == "f":
            return self.fexpr(d)
        if t == "t2":                             # a helper's tuple result
            return f"{self.fexpr(d)}, {self.fexpr(d)}"
        text = self.vexpr(t, d) if t in VECS else self.mexpr(t, d)
        return f"({text} * 1.0)" if text.isidentifier() or " if " in text else text

    # ------------------------------------------------------------------ blocks
    def block(self, n: int) -> list[str]:
        mark, lines = len(self.scope), []
        for _ in range(n):
            if self.budget <= 0:
                break
            self.budget -= 1
            lines += self.statement()
            if lines[-1].startswith("return "):       # an unconditional return ends the block
                break
        else:
            lines += self.sink(self.scope[mark:])
        del self.scope[mark:]
        return lines or ["pass"]

    def sink(self, local: list[Var]) -> list[str]:
        """Fold the block's unread locals into an output (kernels) or a float parameter (helpers)."""
        terms = [v.name if v.t == "f" else f"gk.float64({v.name})" if v.t == "i" else
                 f"gk.trace({v.name})" if v.t in MATS else f"gk.dot({v.name}, {v.name})" if self.r.coin(0.3) else
                 f"{v.name}[{VLEN[v.t] - 1}]" for v in local if not v.used and v.name[0] in "fcuq"]
        if not terms:
            return []
        if self.kernel is None:
            self.sunk = True
            return [f"a = a + {' + '.join(terms)}"]
        out = self.kernel.output(f"out{self.kernel.j}_f", "f", (self.prog.N,))
        if self.kernel.state[out.name] == "fresh":
            self.kernel.state[out.name] = "accum"
        return [f"{out.name}[i] += {' + '.join(terms)}"]

    def statement(self) -> list[str]:
        r, k = self.r, self.kernel
        in_loop = bool(self.loops)
        fvars = [v for v in self.vars_of("f") if v.mutable]
        ivars = [v for v in self.vars_of("i") if v.mutable]
        vvars = [v for v in self.scope if v.t in VLEN and v.mutable]
        nest = self.depth < MAX_DEPTH and self.budget > 1
        loop = 3 + 2 * len(self.loops) if nest and len(self.loops) < 3 else 0
        kind = r.weighted({
            "new_f": 4, "new_i": 2, "new_v": 3, "new_m": 1, "new_b": 1,
            "unpack": 2 if any(h[2] == "t2" for h in self.helpers) else 0, "set_f": 3 if fvars else 0, "aug_f": 2 if fvars else 0,
            "set_i": 1 if ivars else 0, "set_v": 2 if vvars else 0, "comp": 4 if vvars else 0,
            "if": 2 if nest else 0, "for": loop, "while": loop // 2,
            "jump": 1 if in_loop and self.depth < MAX_DEPTH else 0,
            "return": (3 if self.ret else 1) if self.depth < MAX_DEPTH else 0,
            "store": 2 if k else 0, "scratch": 5 if k and in_loop else 0, "accum": 4 if k else 0,
            "atomic": 2 if k else 0, "scale": 2 if k else 0})
        return getattr(self, "st_" + kind)()

    # ------------------------------------------------------------------ locals
    def st_new_f(self):
        v = Var(self.fresh("f"), "f")
        line = f"{v.name} = {self.fexpr(self.r.int(0, 2))}"
        self.scope.append(v)
        return [line]

    def st_new_b(self):
        v = Var(self.fresh("b"), "b")
        line = f"{v.name} = {self.cond(1)}"
        self.scope.append(v)
        return [line]

    def st_unpack(self):
        """`f1, f2 = h(...)` of a helper returning a tuple."""
        line = self.call(self.r.pick([h for h in self.helpers if h[2] == "t2"]), 2, "t2")
        names = [Var(self.fresh("f"), "f") for _ in range(2)]
        self.scope += names
        return [f"{names[0].name}, {names[1].name} = {line}"]

    def st_new_i(self):
        text, iv = self.iexpr(2)
        mutable = iv is None or self.r.coin(0.3)
        v = Var(self.fresh("c"), "i", None if mutable else iv, mutable)
        self.scope.append(v)
        return [f"{v.name} = {text}"]

    def _new_value(self, t):
        v = Var(self.fresh("u" if t in VECS else "q"), t)
        line = f"{v.name} = {self.value(t)}"
        self.scope.append(v)
        return [line]

    def st_new_v(self):
        return self._new_value(self.r.weighted({"v3": 3, "v2": 1, "v4": 1}))

    def st_new_m(self):
        return self._new_value(self.r.weighted({"m2": 2, "m3": 2, "m4": 1}))

    def st_set_f(self):
        v = self.r.pick([v for v in self.vars_of("f") if v.mutable])
        return [f"{v.name} = {self.fexpr(self.r.int(0, 2))}"]

    def st_aug_f(self):
        v = self.r.pick([v for v in self.vars_of("f") if v.mutable])
        e = self.fexpr(self.r.int(0, 2))
        return [self.r.pick([f"{v.name} += {e}", f"{v.name} -= {e}", f"{v.name} *= gk.tanh({e})",
                             f"{v.name} /= ({e} * {e} + 1.0)", f"{v.name} = {v.name} * 0.5 + {e}"])]

    def st_set_i(self):
        v = self.r.pick([v for v in self.vars_of("i") if v.mutable])
        step = f"{self.r.int(-3, 4)}" if self.r.coin(0.5) else f"gk.clamp({self.iexpr(1)[0]}, -3, 3)"
        return [self.r.pick([f"{v.name} += {step}", f"{v.name} -= {step}", f"{v.name} = {v.name} // 2 + {step}",
                             f"{v.name} = ({self.iexpr(2)[0]}) % 5", f"{v.name} *= -1", f"{v.name} %= 3",
                             f"{v.name} //= {self.r.pick([2, -3])}"])]

    def st_set_v(self):
        v = self.r.pick([v for v in self.scope if v.t in VLEN and v.mutable])
        form = self.r.int(0, 3)
        if form == 0:
            return [f"{v.name} = {self.value(v.t)}"]
        if form == 1:
            return [f"{v.name} *= {self.fexpr(1)}"]
        rhs = self.vexpr(v.t, 1) if v.t in VECS else self.mexpr(v.t, 1)
        return [f"{v.name} {'+=' if form == 2 else '-='} {rhs}"]

    def st_comp(self):
        v = self.r.pick([v for v in self.scope if v.t in VLEN and v.mutable])
        n, r = VLEN[v.t], self.r
        op = r.pick(["=", "=", "+=", "*="])
        if v.t in MATS:
            if r.coin(0.3):
                return [f"{v.name}[{r.int(0, n - 1)}] = {self.vexpr('v' + v.t[1], 1)}"]
            return [f"{v.name}[{r.int(0, n - 1)}, {r.int(0, n - 1)}] {op} {self.fexpr(self.r.int(0, 2))}"]
        target = r.pick([f"{v.name}[{r.int(0, n - 1)}]", f"{v.name}.{'xyzw'[r.int(0, n - 1)]}",
                         f"{v.name}[({self.iexpr(1)[0]}) % {n}]"])
        return [f"{target} {op} {self.fexpr(self.r.int(0, 2))}"]

    # ------------------------------------------------------------------ control flow
    def nested(self, n: int, loop=None, static: bool = False) -> list[str]:
        self.depth += 1
        if loop:
            self.loops.append(loop)
            self.unrolled.append(static)
        try:
            return _ind(self.block(n))
        finally:
            self.depth -= 1
            if loop:
                self.loops.pop()
                self.unrolled.pop()

    def st_if(self):
        lines = [f"if {self.cond(1)}:"] + self.nested(self.r.int(1, 3))
        while self.r.coin(0.25) and self.budget > 0:
            lines += [f"elif {self.cond(1)}:"] + self.nested(self.r.int(1, 2))
        if self.r.coin(0.5) and self.budget > 0:
            lines += ["else:"] + self.nested(self.r.int(1, 2))
        return lines

    def bound(self) -> tuple[str, tuple]:
        """An int expression with a known interval inside [-4, 8] (an outer loop variable now and then)."""
        outer = [v for v in self.vars_of("i") if v.iv is not None]
        for _ in range(3):
            if outer and self.r.coin(0.5):
                v = self.take(outer)
                text, iv = v.name, v.iv
            else:
                text, iv = self.iexpr(1)
            if iv is not None and -4 <= iv[0] and iv[1] <= 8:
                return text, iv
        c = self.r.int(0, 4)
        return str(c), (c, c)

    def st_for(self):
        r, limit = self.r, TRIPS[len(self.loops)]
        form = r.weighted({"n": 3, "ab": 3, "step": 2, "rev": 1, "static": 1,
                           "tuple": 1 if len(self.prog.consts["OFFS"]) <= limit else 0})
        (a, ia), (b, ib) = self.bound(), self.bound()
        step = r.pick([2, 3, -1, -2]) if form == "step" else 1
        if form == "n":
            head, values, trips = f"range({a})", (0, ia[1] - 1), ia[1]
        elif step > 0:
            head = f"range({a}, {b}, {step})" if form == "step" else f"range({a}, {b})"
            values, trips = (ia[0], ib[1] - 1), -(-(ib[1] - ia[0]) // step)
        else:
            head, values, trips = f"range({a}, {b}, {step})", (ib[0] + 1, ia[1]), -(-(ia[1] - ib[0]) // -step)
        if form == "rev":
            head = f"reversed({head})"
        if form == "tuple":                        # over a module-level tuple, unrolled
            offs = self.prog.consts["OFFS"]
            head, values, trips = "gk.static(OFFS)", (min(offs), max(offs)), len(offs)
        if form == "static" or trips > limit:
            c = r.int(0, limit)
            head, values = (f"gk.static(range({c}))" if form == "static" else f"range({c})"), (0, c - 1)
        var = Var(self.fresh("k"), "i", (values[0], max(values)), mutable=False)
        self.scope.append(var)
        body = self.nested(r.int(1, 3), (var.name, var.iv), head.startswith("gk.static"))
        self.scope.remove(var)
        return [f"for {var.name} in {head}:"] + body

    def st_while(self):
        r = self.r
        w = self.fresh("w")
        cap = r.int(1, TRIPS[len(self.loops)])
        fvars = [v for v in self.vars_of("f") if v.mutable]
        t = r.pick(fvars) if fvars and r.coin(0.7) else None
        cond = f"{t.name} < {r.pick(['1.5', '0.5', '2.5'])}" if t else self.cond(1)
        update = [f"    {t.name} = {t.name} + gk.abs({self.fexpr(1)}) * 0.5 + 0.25"] if t else []
        counter = Var(w, "i", (1, cap), mutable=False)
        self.scope.append(counter)
        if r.coin(0.5):
            head = [f"{w} = 0", f"while {w} < {cap} and {cond}:", f"    {w} += 1"]
        else:
            head = [f"{w} = 0", f"while {cond}:", f"    {w} += 1", f"    if {w} > {cap}:", "        break"]
        body = self.nested(r.int(1, 3), (w, counter.iv))
        counter.iv = (0, cap + 1)
        return head + update + body

    def st_jump(self):
        if self.unrolled[-1]:
            self.prog.features.add("static_jump")     # documented CompileError
        return [f"if {self.cond(1)}:", "    " + self.r.pick(["break", "continue"])]

    def st_return(self):
        if self.ret is None:
            return [f"if {self.cond(1)}:", "    return"]
        value = self.value(self.ret)
        if self.loops and self.r.coin(0.2):
            return [f"return {value}"]
        return [f"if {self.cond(1)}:", f"    return {value}"]

    # ------------------------------------------------------------------ array writes (kernels)
    def _value_kind(self):
        return self.r.weighted({"f": 6, "v3": 2, "v2": 1, "v4": 1, "m2": 1, "m3": 1})

    def st_store(self):
        t, k = self._value_kind(), self.kernel
        name = f"out{k.j}_{t}"
        fresh = name not in k.state or k.state[name] == "fresh"
        if not self.prog.fwd_only and (self.loops or not fresh):
            return self.st_accum()
        k.output(name, t, (self.prog.N,))
        k.state[name] = "stored"
        return [f"{name}[i] = {self.value(t)}"]

    def st_scratch(self):
        """A store indexed by every enclosing loop variable into an array of its own."""
        t, k = self.r.weighted({"f": 4, "v3": 1, "m2": 1}), self.kernel
        idx, shape = [], [self.prog.N]
        for var, (lo, hi) in self.loops:
            shape.append(max(hi - lo + 1, 1))
            idx.append(var if lo == 0 else f"{var} - {lo}" if lo > 0 else f"{var} + {-lo}")
        a = k.output(self.fresh("s"), t, tuple(shape))
        k.state[a.name] = "stored"
        op = "=" if self.r.coin(0.7) else self.r.pick(["+=", "-="])
        view = self.r.coin(VIEWS)
        if view:
            self.prog.features.add("view")
        target = f"{a.name}[i][{', '.join(idx)}]" if view else f"{a.name}[i, {', '.join(idx)}]"
        if t != "f" and self.r.coin(0.3):          # one component of each element: v[i, k][c] = ...
            return [f"{self.component(target, t)} {op} {self.fexpr(self.r.int(0, 2))}"]
        return [f"{target} {op} {self.value(t)}"]

    def st_accum(self):
        r, k, t = self.r, self.kernel, self._value_kind()
        if r.coin(0.5):
            a = k.output(f"out{k.j}_{t}", t, (self.prog.N,))
            where = "i"
        else:
            a = k.output(f"acc{k.j}_{t}", t, (3,), shared=True)
            where = f"({self.iexpr(1)[0]}) % 3" if r.coin(0.7) else str(r.int(0, 2))
        if k.state[a.name] == "fresh":
            k.state[a.name] = "accum"
        if t != "f" and r.coin(0.3):               # component accumulation: v[i][c] += ..., v[i].y -= ...
            return [f"{self.component(f'{a.name}[{where}]', t)} {r.pick(['+=', '-='])} {self.fexpr(r.int(0, 2))}"]
        return [f"{a.name}[{where}] {r.pick(['+=', '-='])} {self.value(t)}"]

    def st_atomic(self):
        r, k = self.r, self.kernel
        fn = r.weighted({"add": 3, "sub": 2, "min": 1, "max": 1})   # min/max: no JVP (documented)
        t = self._value_kind() if fn in ("add", "sub") else "f"
        name, init = {"add": (f"acc{k.j}_{t}", "zeros"), "sub": (f"acc{k.j}_{t}", "zeros"),
                      "min": (f"amin{k.j}", "big"), "max": (f"amax{k.j}", "small")}[fn]
        a = k.output(name, t, (3,), init, shared=True)
        k.state[a.name] = "accum"
        if fn in ("min", "max"):
            self.prog.features.add("atomic_minmax")
        return [f"gk.atomic_{fn}({name}, ({self.iexpr(1)[0]}) % 3, {self.value(t)})"]

    def st_scale(self):
        """`p[i, k] *= v` into an array written only that way (API.md: correct in every mode); fwd_only
        programs also mix `*=` and re-stores with the other writes of their own per-thread rows."""
        k, r = self.kernel, self.r
        if not self.prog.fwd_only or r.coin(0.5):
            a = k.output(f"prod{k.j}", "f", (self.prog.N, 3), "ones")
            where = str(r.int(0, 2)) if r.coin(0.5) else f"({self.iexpr(1)[0]}) % 3"
            k.muls.append((where.isdigit(), bool(self.loops)))
            if any(not lit and (loop or len(k.muls) > 1) for lit, loop in k.muls):
                self.prog.features.add("mul_alias")   # a read an earlier `*=` may have rewritten: refused
            return [f"{a.name}[i, {where}] *= {self.fexpr(self.r.int(0, 2))}"]
        t = self._value_kind()
        a = k.output(f"out{k.j}_{t}", t, (self.prog.N,))
        if r.coin(0.5):
            return [f"{a.name}[i] *= {self.fexpr(r.int(0, 2))}"]
        return [f"{a.name}[i] = {self.value(t)}"]

    # ------------------------------------------------------------------ helpers and kernels
    def helper(self, h: int) -> str:
        r = self.r
        params = [("a", "f"), ("b", "f")] + ([("c", "i")] if r.coin(0.5) else [])
        vt = r.pick(["v3", "v2"]) if r.coin(0.4) else None
        if vt:
            params.append(("u", vt))
        self.ret = vt if vt and r.coin(0.5) else "t2" if r.coin(0.25) else "f"
        self.scope = [Var(p, t, None, t != "i") for p, t in params]
        self.kernel, self.budget, self.depth, self.loops, self.sunk = None, r.int(2, 6), 0, [], False
        body = self.block(self.budget)
        if not body[-1].startswith("return "):
            tail = "" if not self.sunk else " * a" if self.ret in VECS else " + a"
            body.append(f"return {self.value(self.ret)}{tail}")
        sig = ", ".join(f"{p}: {GK_TYPE[t]}" for p, t in params)
        self.helpers.append((f"h{h}", [t for _, t in params], self.ret))
        self.ret = None
        ret = "tuple[gk.float64, gk.float64]" if self.helpers[-1][2] == "t2" else GK_TYPE[self.helpers[-1][2]]
        return f"@gk.func\ndef h{h}({sig}) -> {ret}:\n" + "\n".join(_ind(body))

    def kernel_src(self, j: int) -> KernelSrc:
        k = self.kernel = KernelCtx(j, self.prog, self)
        self.scope, self.depth, self.loops = [], 0, []
        self.budget = self.r.int(3, round(14 * SIZE))
        body = self.block(self.r.int(2, round(8 * SIZE)))
        if not any(s != "fresh" for s in k.state.values()):
            body.append(f"{k.output(f'out{j}_f', 'f', (self.prog.N,)).name}[i] += {self.fexpr(self.r.int(0, 2))}")
        reads = [a for a in k.readable() if a.name in k.used and a.owner != j]
        writes = [a for a in self.prog.outputs() if a.owner == j]
        params = [f"{a.name}: {a.annotation()}" for a in reads] + ["n: int", "m: int"] + \
                 [f"{a.name}: {a.annotation()}" for a in writes]
        name = f"kern{j}"
        deco = "@gk.kernel" if self.r.coin(0.8) else f"@gk.kernel(max_unroll={self.r.pick([2, 4, 8])})"
        src = f"{deco}\ndef {name}({', '.join(params)}):\n    i = gk.tid()\n" + "\n".join(_ind(body))
        return KernelSrc(name, src, [a.name for a in reads] + ["n", "m"], [a.name for a in writes])


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
