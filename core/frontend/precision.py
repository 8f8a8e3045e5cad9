"""Float precision in kernel code: the default float type (`default_fp`) and the *weak* float32 values it
gives, which are never silently widened to float64.

Python float literals, ints turned float (`float(n)`, `1 / n`, `gk.sqrt(n)`) and `float` annotations of
locals get the default float type: float32, unless `@gk.kernel(default_fp=gk.float64)`,
`@gk.func(default_fp=...)` or `gk.config.default_fp` say float64. A float32 value computed only from such
sources is *weak*: the user never wrote float32. Where a weak value meets float64 (arithmetic, a store, an
argument, a branch or loop merge, `gk.float64(...)`), widening it would carry float32 rounding into a
float64 result, so it is refused with a CompileError naming the value and the fix, unless the value is
known exactly (a constant such as 0.1, an int converted to float, `+ - *` of such integer values as in
`1.0 + float(i)`, a choice between such values), which is then rebuilt in float64 from what it was made
of. Typed float32 values (a float32 array or parameter, `gk.float32(...)`) widen losslessly, as in C and
NumPy: the user chose float32.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import numpy as np

from .. import types as T
from ..ir import Region, Value

_NONE: frozenset = frozenset()
_INTEGER_OPS = ("add", "sub", "mul", "neg")      # exact on integers (up to 2**53) in float64


@dataclass(frozen=True)
class Weak:
    """Why a float32 value is weak, and what is known of it.

    Args:
        rebuild: how to compute the same value exactly at another float type, or None:
            ("const", x) | ("cast", v) (v an int, a typed float32, or a weak value whose cast is exact)
            | ("where", cond, rebuild if true, rebuild if false) | ("prim", name, rebuild...) (`+ - *` and
            negation of integer-valued rebuilds).
        consts: every value it can take, when that is a known set of Python floats (else None).
        castable: every value it can take is a float32 number or a typed float32, so a cast is exact.
        deps: loop parameters whose values it may also take (`consts`, `castable` hold only without any).
        node: where it was computed, for messages.
    """

    rebuild: tuple | None
    consts: frozenset | None
    castable: bool
    deps: frozenset
    node: ast.AST | None


_STRONG = None      # what self.weak.get gives for a value the user typed float32


def _f32_exact(x: float) -> bool:
    """x is a float32 number (so float32 -> float64 keeps it exactly)."""
    return math.isnan(x) or float(np.float32(x)) == x


def _refs(recipe) -> list:
    """The IR values a rebuild recipe reads."""
    if recipe is None or recipe[0] == "const":
        return []
    if recipe[0] == "cast":
        return [recipe[1]]
    if recipe[0] == "prim":
        return [v for r in recipe[2:] for v in _refs(r)]
    return [recipe[1], *_refs(recipe[2]), *_refs(recipe[3])]


def defined_in(regions) -> set:
    """Every value defined inside `regions` (results and block parameters, nested regions included)."""
    out = set()
    for r in regions:
        out.update(r.params)
        for ins in r.walk():
            out.update(ins.results)
            for sub in ins.regions:
                out.update(sub.params)
    return out


def _merged(rebuild, wa: Weak | None, wb: Weak | None, drop: frozenset, node) -> Weak:
    """The record of a value that is either of two values (None: a typed float32); `drop`: loop parameters
    resolved here."""
    consts = wa.consts | wb.consts if wa and wb and wa.consts is not None and wb.consts is not None else None
    castable = (wa is None or wa.castable) and (wb is None or wb.castable)
    deps = ((wa.deps if wa else _NONE) | (wb.deps if wb else _NONE)) - drop
    return Weak(rebuild, consts, castable, deps, node)


class PrecisionTracking:
    """Mixin of the lowering context: `weak` maps each weak float32 Value to its Weak record."""

    weak: dict
    default_fp: T.ScalarType

    # ------------------------------------------------------------------ making weak values
    def weak_const(self, c: Value, value) -> Value:
        """A constant from a Python number: weak, and exact at any precision."""
        if c.type is T.float32:
            x = float(value)
            self.weak[c] = Weak(("const", x), frozenset([x]), _f32_exact(x), _NONE, self.node)
        return c

    def int_to_float(self, v: Value, node) -> Value:
        """An int value as the default float type (`float(n)`, `n / m`): weak, rebuilt exactly from the
        int."""
        t = self.default_fp if v.type.is_scalar else T.vector(v.type.length, self.default_fp) \
            if v.type.is_vector else T.matrix((v.type.rows, v.type.cols), self.default_fp)
        r = self.prim("cast", v, to=t, node=node)
        if r.type is T.float32:
            self.weak[r] = Weak(("cast", v), None, False, _NONE, node)
        return r

    def weak_computed(self, r: Value, node, consts: frozenset | None = None) -> None:
        castable = consts is not None and all(_f32_exact(c) for c in consts)
        self.weak[r] = Weak(None, consts, castable, _NONE, node)

    def note_prim(self, name: str, args, r: Value, node) -> None:
        """A builtin's float32 result is weak when every float operand is (the user typed none of them)."""
        if r.type is not T.float32 or name in ("cast", "construct") or not self.weak:
            return
        if name == "where":
            self.choice(r, args[0], args[1], args[2], node)
            return
        floats = [a for a in args if a.type.is_scalar and a.type.is_float]
        if not floats or any(a not in self.weak for a in floats):
            return
        subs = [self.exact(a) for a in args] if name in _INTEGER_OPS and len(floats) == len(args) else []
        if subs and all(sub is not None and self.integral(sub) for sub in subs):
            self.weak[r] = Weak(("prim", name, *subs), None, False, _NONE, node)    # integer arithmetic
        else:
            self.weak[r] = Weak(None, None, False, _NONE, node)

    def choice(self, r: Value, cond: Value, a: Value, b: Value, node, inside: set | None = None) -> None:
        """`r = a if cond else b` (a `where`, a branch merge) is weak when `a` or `b` is: a weak value passes
        through a choice unchanged. `inside`: values the merged branches defined, which a rebuild after
        the branch cannot read."""
        wa, wb = self.weak.get(a), self.weak.get(b)
        if wa is _STRONG and wb is _STRONG or r.type is not T.float32:
            return
        ra = self.exact(a) if wa is not _STRONG else ("cast", a)
        rb = self.exact(b) if wb is not _STRONG else ("cast", b)
        rebuild = ("where", cond, ra, rb) if ra is not None and rb is not None else None
        if rebuild is not None and inside and any(v in inside for v in _refs(rebuild)):
            rebuild = None
        culprit = next((w for w in (wa, wb) if w and w.rebuild is None and not w.castable), wa or wb)
        self.weak[r] = _merged(rebuild, wa, wb, _NONE, culprit.node or node)

    def weak_param(self, param: Value, init: Value, node, forced: bool = False) -> None:
        """A loop-carried block parameter: weak when its initial value is (or, `forced`, when the body
        assigns it a weak value), its values known only after the loop."""
        if (forced or init in self.weak) and param.type is T.float32:
            w = self.weak.get(init)
            self.weak[param] = Weak(None, frozenset(), True, frozenset([param]), w.node if w else node)

    def weak_carried(self, result: Value, init: Value, body_yield: Value, params, node) -> None:
        """A loop's result: weak when its initial value or the body's yield is; its values are theirs."""
        wi, wy = self.weak.get(init), self.weak.get(body_yield)
        if wi is _STRONG and wy is _STRONG or result.type is not T.float32:
            return
        culprit = next((w for w in (wy, wi) if w and w.rebuild is None and not w.castable), wy or wi)
        self.weak[result] = _merged(None, wi, wy, frozenset(params), culprit.node or node)

    # ------------------------------------------------------------------ widening
    def exact(self, v: Value) -> tuple | None:
        """A recipe computing weak `v` exactly at any float type, or None."""
        w = self.weak[v]
        if w.rebuild is not None:
            return w.rebuild
        if w.castable and not w.deps:
            return ("cast", v)
        return None

    def integral(self, recipe: tuple) -> bool:
        """The value a rebuild recipe computes is always an integer."""
        kind = recipe[0]
        if kind == "const":
            return recipe[1].is_integer()
        if kind == "cast":
            v = recipe[1]
            w = self.weak.get(v)
            return not v.type.is_float or w is not None and w.consts is not None and \
                all(c.is_integer() for c in w.consts)
        if kind == "prim":
            return True
        return self.integral(recipe[2]) and self.integral(recipe[3])

    def rebuild(self, recipe: tuple, to: T.Type) -> Value:
        kind = recipe[0]
        if kind == "const":
            return self.b.const(recipe[1], to)
        if kind == "cast":
            return recipe[1] if recipe[1].type is to else self.b.prim("cast", recipe[1], to=to)
        if kind == "prim":
            return self.b.prim(recipe[1], *(self.rebuild(sub, to) for sub in recipe[2:]))
        return self.b.prim("where", recipe[1], self.rebuild(recipe[2], to), self.rebuild(recipe[3], to))

    def widen_float(self, x: Value, to: T.Type, node) -> Value:
        """float32 `x` as float64 type `to`: a cast for a value the user typed float32, an exact rebuild for a
        weak value known exactly, and a CompileError for any other weak value."""
        w = self.weak.get(x)
        if w is None:
            return self.b.prim("cast", x, to=to)
        recipe = self.exact(x)
        if recipe is None:
            raise self.precision_error(x, w, node)
        return self.rebuild(recipe, to)

    def widen_in(self, region: Region, x: Value, to: T.Type, node) -> Value:
        saved, self.b = self.b, self.b.at(region)
        try:
            return self.widen_float(x, to, node)
        finally:
            self.b = saved

    def precision_error(self, x: Value, w: Weak, node):
        origin = ""
        if isinstance(w.node, ast.expr):
            text = ast.unparse(w.node)
            text = text if len(text) <= 60 else text[:57] + "..."
            origin = f" (`{text}`, line {self.src.loc(w.node).line})"
        elif w.node is not None and hasattr(w.node, "lineno"):
            origin = f" (set at line {self.src.loc(w.node).line})"
        hint = x.hint.lstrip("_")
        what = f"'{hint}'" if hint and not hint.startswith(("retval", "tid")) else "this value"
        deco = "kernel" if self.kind == "kernel" else "func"
        return self.error(node, f"{what} is float32 only because it is computed from Python float literals, "
                                f"ints and float() casts{origin}, which take the default float type, float32; "
                                "widening it to float64 here would carry float32 rounding into a float64 "
                                "result. Compute it in float64: write gk.float64(...) where it starts (e.g. "
                                "gk.float64(n) instead of float(n), gk.float64(0.0) instead of 0.0), or "
                                f"declare @gk.{deco}(default_fp=gk.float64) or gk.config.default_fp = "
                                "gk.float64")
