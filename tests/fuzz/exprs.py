"""Typed random expressions of the kernel language: float64 scalars, ints (with value intervals, so that
indices, loop bounds and divisors are valid by construction), float64 vectors/matrices and conditions.

`ExprGen` draws its choices from `Rand`; `stmts.StmtGen` extends it with statements, kernels and helpers.
"""

from __future__ import annotations

import random

from dataclasses import dataclass


VLEN = {"v2": 2, "v3": 3, "v4": 4, "m2": 2, "m3": 3, "m4": 4}
GK_TYPE = {"f": "gk.float64", "i": "int", "v2": "gk.vec2d", "v3": "gk.vec3d", "v4": "gk.vec4d",
           "m2": "gk.mat22d", "m3": "gk.mat33d", "m4": "gk.mat44d",
           "arr": "gk.array(dtype=gk.float64)", "acc": "gk.array(dtype=gk.float64)", "row": "int"}
VECS, MATS = ("v2", "v3", "v4"), ("m2", "m3", "m4")
VIEWS = 0.05      # share of n-D accesses written through a sub-array view x[i][k]
STENCIL = 0.12    # share of reads at the thread's own row shifted by a constant, x[i - s] guarded by i >= s:
                  # the shifted reads whose adjoints become gathers (ad/gather.py)
QUATS = 0.4       # share of vec3/mat33 functions that go through a quaternion (rotate, rotate_inv, to_matrix)
STRUCTS = 0.3     # share of kernels keeping some locals in fields of a @gk.struct local (`st.f0`, `st.v1`)
STRUCT_FIELDS = {"f": [f"f{k}" for k in range(6)], "v3": ["v0", "v1"], "v2": ["w0"]}
STRUCT_SRC = ("@gk.struct\nclass FuzzLocals:\n" + "".join(
    f"    {name}: {GK_TYPE[t]}\n" for t, names in STRUCT_FIELDS.items() for name in names))
CONSTS = ["0.5", "-1.25", "2.0", "0.1", "-0.75", "3.0"]

# Domains are guarded so that every value stays finite, and atan2 never meets a signed zero (whether max(0.0,
# -0.0) is -0.0 is unspecified); {0} and {1} are float64 subexpressions.
UNARY = ["gk.sin({0})", "gk.cos({0})", "gk.tanh({0})", "gk.atan({0})", "gk.sqrt({0} * {0} + 0.5)",
         "gk.log({0} * {0} + 1.0)", "gk.log2(gk.abs({0}) + 0.5)", "gk.log10({0} * {0} + 2.0)",
         "gk.exp(gk.sin({0}))", "gk.asin(gk.tanh({0}) * 0.9)", "gk.acos(gk.sin({0}) * 0.9)",
         "gk.tan(gk.tanh({0}))", "gk.sinh(gk.tanh({0}))", "gk.cosh(gk.sin({0}))", "gk.abs({0})", "(-{0})",
         "gk.floor({0})", "gk.ceil({0})", "gk.round({0})", "gk.sign({0})", "({0} ** 2)",
         "gk.pow(gk.abs({0}) + 0.5, 1.5)", "gk.clamp({0}, -1.0, 1.25)", "({0} % 1.5)", "({0} // 0.75)",
         "gk.erf({0})", "gk.rsqrt({0} * {0} + 0.5)"]
BINARY = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} / ({1} * {1} + 1.0))", "gk.max({0}, {1})",
          "gk.min({0}, {1})", "gk.atan2({0}, {1} * {1} + 0.5)", "gk.atan2({0} + 0.3, {1})",
          "({0} * 0.5 + {1})",
          "gk.pow({1} * {1} + 0.5, gk.sin({0}))", "gk.clamp({0}, {1}, {1} + 0.75)"]


@dataclass
class Var:
    name: str
    t: str                       # "f", "i", "v2".."v4", "m2".."m4"
    iv: tuple | None = None      # ints: (lo, hi) of every value it can hold; None = unknown (mutable)
    mutable: bool = True         # may be re-assigned (loop variables and interval-carrying ints may not)
    used: bool = False           # read somewhere (unread locals are summed into an output: no dead code)


class Rand:
    """Uniform random choices from a seeded `random.Random` (programs are reproducible from their seed)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def int(self, a: int, b: int) -> int:
        return self.rng.randint(a, b)

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def coin(self, p: float) -> bool:
        return self.rng.random() < p

    def weighted(self, options: dict):
        """A key of `options` ({key: weight}), chosen with probability proportional to its weight."""
        keys = [k for k, w in options.items() if w > 0]
        return self.rng.choices(keys, [options[k] for k in keys])[0]


def _lit(c: int) -> str:
    return f"({c})" if c < 0 else str(c)


def _corners(f, a, b):
    vals = [f(x, y) for x in a for y in b]
    return (min(vals), max(vals))


def _hull(a, b):
    return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))


class ExprGen:
    """Expressions over `self.scope` (Vars) and the arrays the current kernel may read (`self.readable`)."""

    def __init__(self, r: Rand, prog):
        self.r, self.prog = r, prog
        self.scope: list[Var] = []
        self.kernel = None            # the KernelCtx being generated; None inside a helper
        self.helpers = []             # (name, param types, return type) callable from here

    # ------------------------------------------------------------------ helpers
    def vars_of(self, t: str) -> list[Var]:
        return [v for v in self.scope if v.t == t]

    def take(self, options: list[Var]) -> Var:
        """Pick a local to read (recent ones more often) and remember that it was read."""
        v = options[-1] if len(options) > 1 and self.r.coin(0.3) else self.r.pick(options)
        v.used = True
        return v

    def callable(self, want) -> list:
        """Helpers an expression may call here, returning a type for which want(type) holds: array-taking
        helpers only from kernels, and those that write an array (`acc`) only as statements (st_hcall)."""
        return [h for h in self.helpers if want(h[2]) and "acc" not in h[1] and (self.kernel or "arr" not in h[1])]

    def use(self, arr) -> str:
        self.kernel.used.add(arr.name)
        return arr.name

    def index_of(self, arr, own: bool = False) -> str:
        """Index text for every dimension of `arr` (own per-thread arrays: `i` first)."""
        parts = []
        for k, d in enumerate(arr.shape):
            if k == 0 and (own or self.r.coin(0.6)) and d == self.prog.N:
                parts.append("i")
                continue
            text, iv = self.iexpr(0)
            parts.append(text if iv is not None and 0 <= iv[0] and iv[1] < d else
                         f"({text}) % {'len(' + self.use(arr) + ')' if k == 0 and self.r.coin(0.3) else d}")
        return ", ".join(parts)

    def read(self, t: str):
        """Text reading an element of type t from an array this kernel may read, or None."""
        if self.kernel is None:
            return None
        arrs = [a for a in self.kernel.readable() if a.kind == t or (t == "f" and a.kind != "i")]
        if not arrs:
            return None
        a = self.r.pick(arrs)
        own = a.owner == self.kernel.j
        idx = self.index_of(a, own)
        head, _, rest = idx.partition(", ")
        if head == "i" and not own and self.r.coin(STENCIL):   # a neighbour (not of an array this kernel writes)
            self.prog.features.add("stencil")
            shift = self.r.pick([-2, -1, 1, 2])
            near = ", ".join([f"i - {shift}" if shift > 0 else f"i + {-shift}"] + ([rest] if rest else []))
            guard = f"i >= {shift}" if shift > 0 else f"i + {-shift} < {a.shape[0]}"
            text = f"({self.use(a)}[{near}] if {guard} else {self.use(a)}[{idx}])"
        elif len(a.shape) > 1 and self.r.coin(VIEWS):   # through a sub-array view: x[i][k]
            self.prog.features.add("view")
            text = f"{self.use(a)}[{head}][{rest}]"
        else:
            text = f"{self.use(a)}[{idx}]"
        if a.kind == t:
            return text
        return self.component(text, a.kind)

    def component(self, text: str, t: str) -> str:
        """A float component of the vector/matrix value `text` of type t."""
        n = VLEN[t]
        if t in MATS:
            return f"{text}[{self.r.int(0, n - 1)}, {self.r.int(0, n - 1)}]"
        k = self.r.int(0, n - 1)
        form = self.r.int(0, 2)
        if form == 1:
            return f"{text}.{'xyzw'[k]}"
        if form == 2:
            return f"{text}[({self.iexpr(0)[0]}) % {n}]"
        return f"{text}[{k}]"

    # ------------------------------------------------------------------ ints
    def iexpr(self, d: int) -> tuple[str, tuple | None]:
        """(text, interval) of an int expression; interval None when its values are not known statically."""
        r = self.r
        kind = r.weighted({"leaf": 6, "arith": 3 if d > 0 else 0, "div": 2 if d > 0 else 0,
                           "minmax": 1 if d > 0 else 0, "cond": 1 if d > 0 else 0, "bits": 1 if d > 0 else 0})
        if kind == "leaf":
            k = 1 if self.kernel else 0
            opts = [("lit", 3), ("tid", 3 * k), ("arg", 3 * k), ("var", 4 if self.vars_of("i") else 0),
                    ("len", k), ("cast", 1 if d > 0 else 0), ("gather", k), ("const", 1)]
            leaf = r.weighted(dict(opts))
            if leaf == "lit":
                c = r.int(-3, 6)
                return _lit(c), (c, c)
            if leaf == "tid":
                return "i", (0, self.prog.N - 1)
            if leaf == "const":                   # module-level constants fold at compile time
                kn, offs = self.prog.consts["KN"], self.prog.consts["OFFS"]
                return r.pick([("KN", (kn, kn)), ("gk.static(len(OFFS))", (len(offs),) * 2),
                               ("gk.static(KN * 2 - 1)", (2 * kn - 1,) * 2)])
            if leaf == "arg":
                name = r.pick(["n", "m"])
                val = self.prog.ints[name]
                return name, (val, val)
            if leaf == "var":
                v = self.take(self.vars_of("i"))
                return v.name, v.iv
            if leaf == "len":
                a = self.kernel.inputs["x"]
                text = f"len({self.use(a)})" if r.coin(0.5) else f"{self.use(a)}.shape[0]"
                return text, (self.prog.N,) * 2
            if leaf == "gather":
                return f"{self.use(self.kernel.inputs['idx'])}[i]", (0, self.prog.N - 1)
            c = r.int(2, 4)
            return f"gk.int32(gk.tanh({self.fexpr(d - 1)}) * {c}.5)", (-c, c)
        if kind == "arith":
            (a, ia), (b, ib) = self.iexpr(d - 1), self.iexpr(d - 1)
            op = r.pick(["+", "-", "*", "neg", "abs"])
            if op == "*" and ia is not None and ib is not None and max(map(abs, ia + ib)) <= 12:
                return f"({a} * {b})", _corners(lambda x, y: x * y, ia, ib)
            if op == "neg":
                return f"(-{a})", None if ia is None else (-ia[1], -ia[0])
            if op == "abs":
                lo = 0 if ia is None or ia[0] <= 0 <= ia[1] else min(map(abs, ia))
                return f"gk.abs({a})", None if ia is None else (lo, max(map(abs, ia)))
            if op == "-":
                return f"({a} - {b})", None if ia is None or ib is None else (ia[0] - ib[1], ia[1] - ib[0])
            return f"({a} + {b})", None if ia is None or ib is None else (ia[0] + ib[0], ia[1] + ib[1])
        if kind == "div":
            a, ia = self.iexpr(d - 1)
            b, ib = self.iexpr(d - 1)
            if ib is None or ib[0] <= 0 <= ib[1]:
                c = r.pick([2, 3, -2, 5, -3, 4])
                b, ib = _lit(c), (c, c)
            if r.coin(0.5):
                return f"({a} // {b})", None if ia is None else _corners(lambda x, y: x // y, ia, ib)
            return f"({a} % {b})", (0, ib[1] - 1) if ib[0] > 0 else (ib[0] + 1, 0)
        if kind == "bits":                        # & | ^ ~ and shifts by small constants (Python's semantics)
            (a, ia), (b, ib) = self.iexpr(d - 1), self.iexpr(d - 1)
            op = r.pick(["&", "|", "^", "~", "<<", ">>"])
            if op == "~":
                return f"(~{a})", None if ia is None else (-ia[1] - 1, -ia[0] - 1)
            if op in ("<<", ">>"):
                k = r.int(0, 3)
                if ia is None or max(map(abs, ia)) > 1000:
                    return f"({a} >> {k})", None if ia is None else (ia[0] >> k, ia[1] >> k)
                f = (lambda x: x << k) if op == "<<" else (lambda x: x >> k)
                return f"({a} {op} {k})", (f(ia[0]), f(ia[1]))
            known = ia is not None and ib is not None and min(ia[0], ib[0]) >= 0
            top = (1 << max(ia[1], ib[1]).bit_length()) - 1 if known else None
            return f"({a} {op} {b})", (0, top) if known else None
        if kind == "minmax":
            (a, ia), (b, ib) = self.iexpr(d - 1), self.iexpr(d - 1)
            if r.coin(0.3):
                lo, hi = sorted((r.int(-3, 4), r.int(-3, 6)))
                return f"gk.clamp({a}, {_lit(lo)}, {_lit(hi)})", (lo, hi)
            f = r.pick(["min", "max"])
            iv = None if ia is None or ib is None else ((min if f == "min" else max)(ia[0], ib[0]),
                                                         (min if f == "min" else max)(ia[1], ib[1]))
            return f"gk.{f}({a}, {b})", iv
        (a, ia), (b, ib) = self.iexpr(d - 1), self.iexpr(d - 1)
        return self.ternary(a, b, d), _hull(ia, ib)

    def ternary(self, a: str, b: str, d: int) -> str:
        c = self.cond(max(d - 1, 0))
        form = self.r.int(0, 2)
        if form == 0:
            return f"({a} if {c} else {b})"
        return f"gk.select({c}, {b}, {a})" if form == 1 else f"gk.where({c}, {a}, {b})"

    def cond(self, d: int) -> str:
        r = self.r
        kind = r.weighted({"fcmp": 5, "icmp": 3, "and": 1 if d > 0 else 0, "not": 1 if d > 0 else 0,
                           "chain": 1, "bool": 3 if self.vars_of("b") else 0})
        if kind == "bool":
            return self.take(self.vars_of("b")).name
        if kind == "chain":                       # a < b < c
            return f"{self.fexpr(0)} < {self.fexpr(max(d - 1, 0))} {r.pick(['<', '<='])} {self.fexpr(0)}"
        if kind == "fcmp":
            op = r.pick([">", "<", ">=", "<="])
            rhs = self.fexpr(d) if r.coin(0.5) else r.pick(["0.0", "0.25", "-0.5", "1.0"])
            return f"{self.fexpr(d)} {op} {rhs}"
        if kind == "icmp":
            op = r.pick([">", "<", "==", "!=", ">=", "<="])
            if r.coin(0.3):
                return f"{self.iexpr(d)[0]} % 2 {op} 0"
            return f"{self.iexpr(d)[0]} {op} {self.iexpr(d)[0]}"
        if kind == "not":
            return f"(not {self.cond(d - 1)})"
        return f"({self.cond(d - 1)} {r.pick(['and', 'or'])} {self.cond(d - 1)})"

    # ------------------------------------------------------------------ floats
    def fexpr(self, d: int) -> str:
        r = self.r
        kind = r.weighted({"leaf": 5, "unary": 3 if d > 0 else 0, "binary": 4 if d > 0 else 0,
                           "ternary": 1 if d > 0 else 0, "scaled": 1 if d > 0 else 0,
                           "call": 2 if d > 0 and self.callable(lambda t: t != "t2") else 0,
                           "vec": 2 if d > 0 else 0, "int": 1})
        if kind == "leaf":
            opts = {"var": 6 if self.vars_of("f") else 0, "read": 5 if self.kernel else 0, "const": 1,
                    "harr": 4 if self.vars_of("arr") else 0,
                    "comp": 2 if any(v.t in VLEN for v in self.scope) else 0}
            leaf = r.weighted(opts)
            if leaf == "var":
                return self.take(self.vars_of("f")).name
            if leaf == "read":
                return self.read("f")
            if leaf == "harr":                    # a helper's array parameter
                return f"arr[({self.iexpr(0)[0]}) % len(arr)]"
            if leaf == "comp":
                v = self.take([v for v in self.scope if v.t in VLEN])
                return self.component(v.name, v.t)
            return f"gk.float64({r.pick(CONSTS)})"
        if kind == "unary":
            return r.pick(UNARY).format(self.fexpr(d - 1))
        if kind == "scaled":
            return r.pick(["({0} * SCALE)", "({0} + SCALE)", "(SCALE - {0})"]).format(self.fexpr(d - 1))
        if kind == "binary":
            return r.pick(BINARY).format(self.fexpr(d - 1), self.fexpr(d - 1))
        if kind == "ternary":
            return self.ternary(self.fexpr(d - 1), self.fexpr(d - 1), d)
        if kind == "call":
            return self.call(r.pick(self.callable(lambda t: t == "f") or self.callable(lambda t: t != "t2")), d)
        if kind == "int":
            return f"gk.float64({self.iexpr(d)[0]})"
        t = r.pick(VECS + MATS)
        if t in MATS:
            q = self.mexpr(t, d - 1)
            eye = f"gk.identity(n={VLEN[t]}, dtype=gk.float64)"       # (+ I: outer products are singular,
            return r.pick([f"gk.determinant({q} + {eye})", f"gk.trace({q})",   # their det is rounding noise)
                           self.component(q if q.isidentifier() else f"({q})", t)])
        u = self.vexpr(t, d - 1)
        fn = r.int(0, 3)
        if fn == 0:
            return f"gk.dot({u}, {self.vexpr(t, d - 1)})"
        if fn == 1:
            return f"gk.length({u})" if r.coin(0.5) else f"gk.length_sq({u})"
        if fn == 2:
            return self.component(u if u.isidentifier() else f"({u})", t)
        return self.component(f"({self.mexpr('m' + t[1], d - 1)} @ {u})", t)

    def call(self, helper, d: int, want: str = "f") -> str:
        name, params, ret = helper
        args = []
        for t in params:
            if t == "arr":
                args.append(self.use(self.kernel.inputs[self.r.pick(["x", "y"])]))
            elif t == "acc":                      # the calling kernel's own row: race-free accumulation
                out = self.kernel.output(f"out{self.kernel.j}_f", "f", (self.prog.N,))
                if self.kernel.state[out.name] == "fresh":
                    self.kernel.state[out.name] = "accum"
                args.append(out.name)
            elif t == "row":
                args.append("i")
            else:
                args.append(self.fexpr(d - 1) if t == "f" else self.iexpr(min(d - 1, 1))[0] if t == "i"
                            else self.vexpr(t, d - 1))
        text = f"{name}({', '.join(args)})"
        return text if ret == want else self.component(text, ret)

    # ------------------------------------------------------------------ vectors and matrices
    def vexpr(self, t: str, d: int) -> str:
        r, n = self.r, VLEN[t]
        kind = r.weighted({"var": 5 if self.vars_of(t) else 0, "ctor": 3, "read": 2 if self.kernel else 0,
                           "arith": 4 if d > 0 else 0, "fn": 2 if d > 0 else 0, "mat": 1 if d > 0 else 0,
                           "call": 2 if d > 0 and self.callable(lambda ret: ret == t) else 0})
        if kind == "var":
            return self.take(self.vars_of(t)).name
        if kind == "read":
            text = self.read(t)
            if text is not None:
                return text
        if kind in ("ctor", "read"):
            return f"{GK_TYPE[t]}({', '.join(self.fexpr(max(d - 1, 0)) for _ in range(n))})"
        if kind == "arith":
            a, b = self.vexpr(t, d - 1), self.vexpr(t, d - 1)
            f = self.fexpr(d - 1)
            return r.pick([f"({a} + {b})", f"({a} - {b})", f"(-{a})", f"({a} * {f})", f"({f} * {a})",
                           f"({a} / ({f} * {f} + 1.0))"])
        if kind == "fn":
            a = self.vexpr(t, d - 1)
            opts = [f"gk.normalize({a} + {GK_TYPE[t]}({', '.join(['0.25'] * n)}))", f"gk.abs({a})",
                    f"gk.min({a}, {self.vexpr(t, d - 1)})", f"gk.max({a}, {self.vexpr(t, d - 1)})",
                    self.ternary(a, self.vexpr(t, d - 1), d)]
            if t == "v3":
                opts.append(f"gk.cross({a}, {self.vexpr(t, d - 1)})")
                if r.coin(QUATS):
                    return f"gk.{r.pick(['quat_rotate', 'quat_rotate_inv'])}({self.qexpr(d - 1)}, {a})"
            return r.pick(opts)
        if kind == "call":
            return self.call(r.pick(self.callable(lambda ret: ret == t)), d, t)
        q = self.mexpr("m" + t[1], d - 1)
        if r.coin(0.7):
            return f"({q} @ {self.vexpr(t, d - 1)})"
        return f"{q if q.isidentifier() else f'({q})'}[{r.int(0, n - 1)}]"          # a row

    def mexpr(self, t: str, d: int) -> str:
        r, n = self.r, VLEN[t]
        eye = f"gk.identity(n={n}, dtype=gk.float64)"
        deep = 1 if d > 0 else 0
        kind = r.weighted({"var": 5 if self.vars_of(t) else 0, "ctor": 2, "outer": 2, "eye": 1,
                           "read": 1 if self.kernel else 0, "arith": 3 * deep, "fn": 2 * deep})
        if kind == "var":
            return self.take(self.vars_of(t)).name
        if kind == "read":
            text = self.read(t)
            if text is not None:
                return text
        if kind in ("ctor", "read"):
            return f"{GK_TYPE[t]}({', '.join(self.fexpr(0) for _ in range(n * n))})"
        v = "v" + t[1]
        if kind == "outer":
            return f"gk.outer({self.vexpr(v, max(d - 1, 0))}, {self.vexpr(v, max(d - 1, 0))})"
        if kind == "eye":
            return f"({eye} * {self.fexpr(max(d - 1, 0))})"
        a = self.mexpr(t, d - 1)
        if kind == "arith":
            b, f = self.mexpr(t, d - 1), self.fexpr(d - 1)
            return r.pick([f"({a} + {b})", f"({a} - {b})", f"({a} * {f})", f"({f} * {a})", f"({a} @ {b})"])
        if t == "m3" and r.coin(QUATS):
            return f"gk.quat_to_matrix({self.qexpr(d - 1)})"
        return r.pick([f"gk.transpose({a})", f"gk.inverse({a} * 0.1 + {eye} * 2.0)",
                       self.ternary(a, self.mexpr(t, d - 1), d)])

    def qexpr(self, d: int) -> str:
        """A unit float64 quaternion: from an axis and an angle, from roll/pitch/yaw, products, inverses."""
        r = self.r
        kind = r.weighted({"axis": 3, "rpy": 2, "mul": 2 if d > 0 else 0, "inv": 1 if d > 0 else 0})
        if kind == "axis":
            axis = f"gk.normalize({self.vexpr('v3', max(d - 1, 0))} + gk.vec3d(0.25, 0.25, 0.25))"
            return f"gk.quat_from_axis_angle({axis}, {self.fexpr(max(d - 1, 0))})"
        if kind == "rpy":
            return f"gk.quat_rpy({', '.join(self.fexpr(max(d - 1, 0)) for _ in range(3))})"
        if kind == "mul":
            return f"({self.qexpr(d - 1)} * {self.qexpr(d - 1)})"
        return f"gk.quat_inverse({self.qexpr(d - 1)})"
