"""Array writes of generated kernels, under the rules that make reverse mode exact: a thread writes only
its own row (`out[i]`, scratch `s[i, k, ...]` indexed by every enclosing loop variable, so each element is
stored once), shared elements only by accumulation (`+=`, `-=`, atomics), `*=` only into arrays written no
other way, and no kernel reads what it writes. Programs drawn `fwd_only` break those rules on purpose
(mixing `*=`, re-stores and reads of their own rows): they are checked on forward values and JVPs only.
"""

from __future__ import annotations

from tests.fuzz.exprs import VIEWS
from tests.fuzz.program import ArraySpec, Program


def indent(lines: list[str]) -> list[str]:
    return ["    " + ln for ln in lines]


class KernelCtx:
    """What kernel j may read and the output arrays it has created (on demand) and how it wrote them."""

    def __init__(self, j: int, prog: Program, gen):
        self.j, self.prog, self.gen = j, prog, gen
        self.used: set[str] = set()
        self.inputs = {a.name: a for a in prog.inputs()}
        self.prev = [a for a in prog.outputs() if a.owner != j]
        self.state: dict[str, str] = {}        # own output -> "fresh" | "stored" | "accum"
        self.muls: list = []                     # `prod[i, idx] *= v` so far: (idx is a literal, in a loop)

    def readable(self) -> list:
        own = [a for a in self.prog.outputs() if a.owner == self.j and not a.shared]
        own = own if self.prog.fwd_only else []
        return list(self.inputs.values()) + self.prev + own

    def output(self, name: str, kind: str, shape: tuple, init: str = "zeros", shared: bool = False):
        a = self.prog.arrays.get(name)
        if a is None:
            a = self.prog.arrays[name] = ArraySpec(name, kind, shape, self.j, init, shared)
            self.state[name] = "fresh"
        self.used.add(name)
        return a


class ArrayWrites:
    """Statement kinds that write arrays (mixed into stmts.StmtGen)."""

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
            comp = self.component(f"{a.name}[{where}]", t)
            return [f"{comp} {r.pick(['+=', '-='])} {self.fexpr(r.int(0, 2))}"]
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
