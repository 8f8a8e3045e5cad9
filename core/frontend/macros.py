"""The kernel-side emitter of macros (core/library): components are IR values wrapped so that Python's
arithmetic operators emit primitives, with the frontend's own coercions (weak literals, widening). Also
`Advance`, the result of a macro that re-binds its first argument (both sides of the protocol use it)."""

from __future__ import annotations

from .. import types as T
from ..ir import Value


def _raw(x):
    return x.v if isinstance(x, Sym) else x


class Sym:
    """An IR scalar inside a macro: + - * / and unary - emit primitives."""

    __slots__ = ("v", "E")

    def __init__(self, v: Value, E: "IREmit"):
        self.v, self.E = v, E

    def _bin(self, op, other, swap=False):
        a, b = (other, self) if swap else (self, other)
        return Sym(self.E.lw.binop(op, _raw(a), _raw(b), self.E.node), self.E)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)

    def __mod__(self, o): return self._bin("mod", o)
    def __and__(self, o): return self._bin("bit_and", o)
    def __xor__(self, o): return self._bin("bit_xor", o)
    def __rshift__(self, o): return self._bin("shr", o)
    def __lshift__(self, o): return self._bin("shl", o)

    def __neg__(self):
        return Sym(self.E.lw.prim("neg", self.v, node=self.E.node), self.E)


class IREmit:
    """The emitter a macro gets inside a kernel (`lw` is the function being lowered, `node` the call)."""

    def __init__(self, lw, node, name: str):
        self.lw, self.node, self.name = lw, node, name

    def _prim(self, name, *args, **attrs):
        return Sym(self.lw.prim(name, *[_raw(a) for a in args], node=self.node, **attrs), self)

    def sin(self, x): return self._prim("sin", x)
    def cos(self, x): return self._prim("cos", x)
    def sqrt(self, x): return self._prim("sqrt", x)
    def atan2(self, y, x): return self._prim("atan2", y, x)
    def log(self, x): return self._prim("log", x)
    def gt(self, a, b): return self._prim("gt", a, b)

    def cast(self, x, t):
        x = self.lw.materialize(_raw(x), None, self.node)
        return Sym(x, self) if x.type is t else self._prim("cast", x, to=t)
    def where(self, c, a, b): return self._prim("where", c, a, b)

    def type_of(self, x) -> T.Type:
        x = _raw(x)
        if isinstance(x, Value):
            return x.type
        if isinstance(x, (bool, int, float)):
            return self.lw.default_fp if isinstance(x, float) else T.int32
        self.fail(f"{getattr(x, 'describe', lambda: repr(x))()} is not a value")

    def comps(self, v) -> list:
        v = self.lw.materialize(_raw(v), None, self.node)
        t = v.type
        c = self.lw.b.const
        if t.is_scalar:
            return [Sym(v, self)]
        if t.is_vector:
            return [self._prim("extract", v, c(k, T.int32)) for k in range(t.length)]
        return [self._prim("extract", v, c(r, T.int32), c(k, T.int32)) for r in range(t.rows) for k in range(t.cols)]

    def make(self, t, comps):
        vals = [self.lw.coerce(_raw(x), t.scalar, self.node, f"{self.name}() component") for x in comps]
        return self.lw.prim("construct", *vals, type=t, node=self.node)

    def scalar(self, x, t):
        return Sym(self.lw.coerce(_raw(x), t, self.node, f"{self.name}() argument"), self)

    def const(self, value, t):
        return Sym(self.lw.b.const(float(value) if t.scalar.is_float else int(value), t.scalar), self)

    def out(self, x):
        return x

    def call(self, func, *args):
        """Call the @gk.func `func` here with these values (structs included); its result."""
        return self.lw.call_func(func, self.node, args=[_raw(a) for a in args])

    def fail(self, message: str):
        raise self.lw.error(self.node, f"{self.name}(): {message}")


class Advance:
    """A macro result that also re-binds its first argument's variable (a random state, a query), and
    with `outs` ({argument position: value}) the variables of other arguments (Warp's out-arguments)."""

    def __init__(self, value, state, outs: dict | None = None):
        self.value, self.state, self.outs = value, state, outs or {}


def unwrap(x):
    """A macro's result as frontend values (tuples stay tuples)."""
    if isinstance(x, tuple):
        return tuple(unwrap(v) for v in x)
    return _raw(x)
