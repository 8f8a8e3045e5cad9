"""Random statements (locals, vector/matrix components, if/for/while, break/continue, return), @gk.func
helpers with early returns and tuple results, and whole kernels; array writes are in writes.py.

Every local is read somewhere (unread ones are summed into an output), loop trip counts are bounded
statically (int intervals), and while loops count their trips or carry one float that grows past its bound.
"""

from __future__ import annotations

import os

from tests.fuzz.exprs import GK_TYPE, MATS, STRUCT_FIELDS, STRUCTS, VECS, VLEN, ExprGen, Rand, Var
from tests.fuzz.program import KernelSrc, Program
from tests.fuzz.writes import ArrayWrites, KernelCtx, indent

MAX_DEPTH = 4                              # nesting of if/for/while (loops: 3 at most)
TRIPS = {0: 7, 1: 4, 2: 3, 3: 2}          # most iterations of a loop at each nesting depth
SIZE = float(os.environ.get("GRADKIT_FUZZ_SIZE", "1"))   # scales statements per kernel (campaigns: bigger)


class StmtGen(ArrayWrites, ExprGen):
    """Statements of kernels and helpers; `self.loops` holds (variable, interval) of enclosing loops."""

    def __init__(self, r: Rand, prog: Program):
        super().__init__(r, prog)
        self.loops: list[tuple[str, tuple]] = []
        self.unrolled: list[bool] = []           # per enclosing loop: a gk.static loop (no break/continue)
        self.depth = 0
        self.budget = 0
        self.ret = None               # a helper's return type; None in kernels
        self.names = iter(range(10**6))
        self.free_fields: dict | None = None     # fields of `st` not yet used, in a kernel that has one

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    def local(self, t: str, prefix: str) -> str:
        """A new local's name: in a struct kernel, often a field of its `st` struct local (each field is
        taken once, so it is never read before this first assignment in the source)."""
        free = self.free_fields.get(t) if self.free_fields else None
        if free and self.r.coin(0.5):
            return "st." + free.pop(0)
        return self.fresh(prefix)

    def value(self, t: str, d: int | None = None) -> str:
        """An expression of type t for the right-hand side of `name = ...` (never an alias of a local)."""
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
                 f"gk.trace({v.name})" if v.t in MATS else
                 f"gk.dot({v.name}, {v.name})" if self.r.coin(0.3) else f"{v.name}[{VLEN[v.t] - 1}]"
                 for v in local if not v.used and v.name[0] in "fcuq"]
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
            "unpack": 2 if self.callable(lambda t: t == "t2") else 0,
            "hcall": 2 if k and any("acc" in h[1] for h in self.helpers) else 0,
            "hacc": 3 if self.vars_of("acc") else 0,
            "set_f": 3 if fvars else 0, "aug_f": 2 if fvars else 0,
            "set_i": 1 if ivars else 0, "set_v": 2 if vvars else 0, "comp": 4 if vvars else 0,
            "if": 2 if nest else 0, "for": loop, "while": loop // 2,
            "jump": 1 if in_loop and self.depth < MAX_DEPTH else 0,
            "return": (3 if self.ret else 1) if self.depth < MAX_DEPTH else 0,
            "store": 2 if k else 0, "scratch": 5 if k and in_loop else 0, "accum": 4 if k else 0,
            "atomic": 2 if k else 0, "scale": 2 if k else 0})
        return getattr(self, "st_" + kind)()

    # ------------------------------------------------------------------ locals
    def st_new_f(self):
        v = Var(self.local("f", "f"), "f")
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
        line = self.call(self.r.pick(self.callable(lambda t: t == "t2")), 2, "t2")
        names = [Var(self.fresh("f"), "f") for _ in range(2)]
        self.scope += names
        return [f"{names[0].name}, {names[1].name} = {line}"]

    def st_hcall(self):
        """A call of a helper that accumulates into the kernel's own row (`acc[row] += ...` inside)."""
        h = self.r.pick([h for h in self.helpers if "acc" in h[1]])
        text = self.call(h, 2, h[2])
        if self.r.coin(0.4):
            return [text]                          # the result is dropped
        names = [Var(self.fresh("f"), "f"), Var(self.fresh("f"), "f")] if h[2] == "t2" else \
            [Var(self.fresh("f" if h[2] == "f" else "u"), h[2])]
        self.scope += names
        return [f"{', '.join(v.name for v in names)} = {text}"]

    def st_hacc(self):
        """Inside a helper: accumulate into its array parameter at its row parameter."""
        e = self.fexpr(self.r.int(0, 2))
        return [self.r.pick([f"acc[row] += {e}", f"acc[row] -= {e}", f"gk.atomic_add(acc, row, {e})"])]

    def st_new_i(self):
        text, iv = self.iexpr(2)
        mutable = iv is None or self.r.coin(0.3)
        v = Var(self.fresh("c"), "i", None if mutable else iv, mutable)
        self.scope.append(v)
        return [f"{v.name} = {text}"]

    def _new_value(self, t):
        v = Var(self.local(t, "u" if t in VECS else "q"), t)
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
        return [self.r.pick([f"{v.name} += {step}", f"{v.name} -= {step}",
                             f"{v.name} = {v.name} // 2 + {step}",
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
            return indent(self.block(n))
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
        if t is not None and r.coin(0.3):
            # No counter: the loop carries just `t` (the shape forward mode once got wrong). It ends because t
            # starts at >= -2 and grows by >= 0.25 a trip; the body is the update and maybe a data-dependent break.
            jump = [f"    if {self.cond(1)}:", "        break"] if r.coin(0.5) else []
            return [f"{t.name} = gk.max({t.name}, -2.0)", f"while {cond}:"] + update + jump
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

    # ------------------------------------------------------------------ helpers and kernels
    def helper(self, h: int) -> str:
        r = self.r
        params = [("a", "f"), ("b", "f")] + ([("c", "i")] if r.coin(0.5) else [])
        vt = r.pick(["v3", "v2"]) if r.coin(0.4) else None
        if vt:
            params.append(("u", vt))
        arrays = r.weighted({"": 6, "arr": 2, "acc": 2})    # reads an input array / adds into a row
        params += [("arr", "arr")] if arrays == "arr" else [("acc", "acc"), ("row", "row")] if arrays else []
        self.ret = vt if vt and r.coin(0.5) else "t2" if r.coin(0.25) else "f"
        self.scope = [Var(p, "i" if t == "row" else t, None, t in VLEN or t == "f") for p, t in params]
        self.kernel, self.budget, self.depth, self.loops, self.sunk = None, r.int(2, 6), 0, [], False
        self.free_fields = None
        body = self.block(self.budget)
        if not body[-1].startswith("return "):
            tail = "" if not self.sunk else " * a" if self.ret in VECS else " + a"
            body.append(f"return {self.value(self.ret)}{tail}")
        sig = ", ".join(f"{p}: {GK_TYPE[t]}" for p, t in params)
        self.helpers.append((f"h{h}", [t for _, t in params], self.ret))
        self.ret = None
        ret = "tuple[gk.float64, gk.float64]" if self.helpers[-1][2] == "t2" else GK_TYPE[self.helpers[-1][2]]
        return f"@gk.func\ndef h{h}({sig}) -> {ret}:\n" + "\n".join(indent(body))

    def kernel_src(self, j: int) -> KernelSrc:
        k = self.kernel = KernelCtx(j, self.prog, self)
        self.scope, self.depth, self.loops = [], 0, []
        self.budget = self.r.int(3, round(14 * SIZE))
        struct = self.r.coin(STRUCTS)
        self.free_fields = {t: list(names) for t, names in STRUCT_FIELDS.items()} if struct else None
        body = self.block(self.r.int(2, round(8 * SIZE)))
        if struct:
            self.prog.features.add("struct")
            body.insert(0, "st = FuzzLocals()")
        if not any(s != "fresh" for s in k.state.values()):
            out = k.output(f"out{j}_f", "f", (self.prog.N,))
            body.append(f"{out.name}[i] += {self.fexpr(self.r.int(0, 2))}")
        reads = [a for a in k.readable() if a.name in k.used and a.owner != j]
        writes = [a for a in self.prog.outputs() if a.owner == j]
        params = [f"{a.name}: {a.annotation()}" for a in reads] + ["n: int", "m: int"] + \
                 [f"{a.name}: {a.annotation()}" for a in writes]
        name = f"kern{j}"
        deco = "@gk.kernel" if self.r.coin(0.8) else f"@gk.kernel(max_unroll={self.r.pick([2, 4, 8])})"
        src = f"{deco}\ndef {name}({', '.join(params)}):\n{_tid(self.prog.dim)}" + "\n".join(indent(body))
        return KernelSrc(name, src, [a.name for a in reads] + ["n", "m"], [a.name for a in writes])


def _tid(dim) -> str:
    """The kernel's first lines: `i`, the flat thread index, also from a 2-D or 3-D launch."""
    if isinstance(dim, int):
        return "    i = gk.tid()\n"
    names = ["t0", "t1", "t2"][:len(dim)]
    flat = names[0]
    for name, extent in zip(names[1:], dim[1:]):
        flat = f"({flat}) * {extent} + {name}" if "*" in flat else f"{flat} * {extent} + {name}"
    return f"    {', '.join(names)} = gk.tid()\n    i = {flat}\n"
