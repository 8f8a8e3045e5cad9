"""Scalar primitives: arithmetic, comparisons, logic, math functions and casts.

Each entry states its partial derivatives right beside it. Arithmetic and
`min`/`max`/`abs`/`where` also accept vectors and matrices elementwise (with
scalar broadcasting); the scalarize pass splits those into scalar calls.
"""

from __future__ import annotations

import math

import numpy as np

from ..types import Type, bool_, uint32
from .table import Builtin, BuiltinTypeError, register


# --------------------------------------------------------------------------- type rules

def _name(t: Type) -> str:
    return getattr(t, "name", repr(t))


def _elementwise(name: str, *, float_only: bool = False, allow_bool: bool = False, broadcast: bool = True):
    """Type rule for an elementwise op: equal types, or vector/matrix with scalar broadcast."""

    def rule(types: list[Type], attrs: dict) -> Type:
        composite = [t for t in types if not t.is_scalar]
        if any(t.is_array for t in types):
            raise BuiltinTypeError(f"{name}() cannot take an array; index it first")
        scalars = {t.scalar for t in types}
        if len(scalars) != 1:
            raise BuiltinTypeError(
                f"{name}() argument types differ: {', '.join(map(_name, types))}; cast with gk.float32(...) etc.")
        (s,) = scalars
        if s.is_bool and not allow_bool:
            raise BuiltinTypeError(f"{name}() does not take bool arguments")
        if float_only and not s.is_float:
            raise BuiltinTypeError(f"{name}() needs float arguments, got {', '.join(map(_name, types))}")
        if not composite:
            return types[0]
        shapes = {t for t in composite}
        if len(shapes) != 1:
            raise BuiltinTypeError(f"{name}() argument types differ: {', '.join(map(_name, types))}")
        if len(composite) != len(types) and not broadcast:
            raise BuiltinTypeError(f"{name}() cannot mix {', '.join(map(_name, types))}")
        return composite[0]

    return rule


def _elementwise_decompose(b, args, comps, out_type, attrs, name):
    n = out_type.ncomp if not out_type.is_scalar else 1
    cols = [c if len(c) == n else c * n for c in comps]
    return [b.prim(name, *(col[k] for col in cols), **attrs) for k in range(n)]


def _decomposer(name):
    return lambda b, args, comps, out_type, attrs: _elementwise_decompose(b, args, comps, out_type, attrs, name)


def _cmp_rule(name):
    def rule(types, attrs):
        if not all(t.is_scalar for t in types):
            raise BuiltinTypeError(f"comparison '{name}' needs scalars, got {', '.join(map(_name, types))}")
        if types[0] is not types[1]:
            raise BuiltinTypeError(f"comparison '{name}' of different types {types[0].name} and {types[1].name}")
        return bool_
    return rule


def _bool_rule(name):
    def rule(types, attrs):
        if not all(t is bool_ for t in types):
            raise BuiltinTypeError(f"'{name}' needs bool operands, got {', '.join(map(_name, types))}")
        return bool_
    return rule


# --------------------------------------------------------------------------- helpers for partials

def _c(b, x, value):
    """A constant of x's type."""
    return b.const(float(value) if x.type.is_float else int(value), x.type.scalar)


def _ind(b, cond, like):
    """1 where cond holds else 0, in like's type."""
    return b.select(cond, _c(b, like, 1), _c(b, like, 0))


def _floats(partials):
    """Only float results have derivatives; integer-valued ops get None partials."""
    def wrapped(b, args, out, attrs):
        if not out.type.is_float:
            return [None] * len(args)
        return partials(b, args, out, attrs)
    return wrapped


# --------------------------------------------------------------------------- declarations

def elementwise(name, np_fn, partials=None, *, arity=2, float_only=False, public=False, cmath=None, expand=None,
                doc="", domain=None, **kw):
    return register(Builtin(
        name, _elementwise(name, float_only=float_only, **kw), eval=np_fn,
        partials=_floats(partials) if partials else None, decompose=_decomposer(name), arity=arity,
        differentiable=partials is not None, doc=doc, public=public, float_only=float_only, cmath=cmath,
        expand=expand, domain=domain))


def unary_math(name, np_fn, deriv, doc="", cmath=None, domain=(-3, 3)):
    """A public float → float function with derivative deriv(b, x, y) = dy/dx, computed by the C / OpenCL C
    math function `cmath` (default: its own name), finite and smooth on `domain`."""
    return register(Builtin(
        name, _elementwise(name, float_only=True), eval=np_fn, arity=1,
        partials=lambda b, a, out, at: [deriv(b, a[0], out)], decompose=_decomposer(name), doc=doc,
        public=True, float_only=True, cmath=cmath or name, domain=(domain,)))


def _py_floordiv(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return np.floor(a / b).astype(a.dtype)
    return np.floor_divide(a, b)


def _py_mod(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return (a - b * np.floor(a / b)).astype(a.dtype)
    return np.mod(a, b)


def _round_half_away(x):
    x = np.asarray(x)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(x.dtype)


# --------------------------------------------------------------------------- expansions (run after AD)

def _truncating(name: str):
    """NumPy reference of C's truncating integer / or % (the caller guarantees b != 0, not MIN / -1)."""
    def fn(a, b):
        a, b = np.asarray(a), np.asarray(b)
        q = np.floor_divide(a, b)
        q = q + ((q * b != a) & ((a < 0) != (b < 0))).astype(q.dtype)
        return q if name == "idiv" else a - q * b
    return fn


def _expand_floored(want: str):
    """Python's floored `//` or `%`: floats as floor(a / b) and a - b * floor(a / b); integers from the
    truncating idiv / irem, with x // 0 = x % 0 = 0 and MIN // -1 wrapping (never a trap)."""

    def expand(b, args, attrs):
        x, d = args
        if x.type.is_float:
            q = b.prim("floor", b.div(x, d))
            return q if want == "idiv" else b.sub(x, b.mul(d, q))
        zero, one, dc = _c(b, x, 0), _c(b, x, 1), d.const_value
        if x.type is uint32:                   # floor is truncation; only zero needs care
            if dc:
                return b.prim(want, x, d)
            is0 = b.prim("eq", d, zero)
            return b.select(is0, zero, b.prim(want, x, b.select(is0, one, d)))
        special = None if dc is not None and dc not in (0, -1) else b.prim("or", b.prim("eq", d, zero),
                                                                           b.prim("eq", d, _c(b, x, -1)))
        safe = d if special is None else b.select(special, one, d)
        r = b.prim("irem", x, safe)
        if dc is not None and dc not in (0, -1):      # a remainder of the divisor's opposite sign needs a step
            adjust = b.prim("lt" if dc > 0 else "gt", r, zero)
        else:
            adjust = b.prim("and", b.prim("ne", r, zero),
                            b.prim("ne", b.prim("lt", r, zero), b.prim("lt", safe, zero)))
        if want == "irem":
            out = b.select(adjust, b.add(r, safe), r)
            return out if special is None else b.select(special, zero, out)
        q = b.prim("idiv", x, safe)
        out = b.select(adjust, b.sub(q, one), q)
        if special is None:
            return out
        return b.select(b.prim("eq", d, zero), zero, b.select(b.prim("eq", d, _c(b, x, -1)), b.neg(x), out))

    return expand


def _expand_sign(b, args, attrs):
    """-1, 0 or 1 in the operand's type, as NumPy's sign: NaN stays NaN and -0.0 gives +0.0."""
    (x,) = args
    zero, one = _c(b, x, 0), _c(b, x, 1)
    if x.type is uint32:
        return b.select(b.prim("gt", x, zero), one, zero)
    rest = b.select(b.prim("ne", x, x), x, zero) if x.type.is_float else zero
    return b.select(b.prim("gt", x, zero), one, b.select(b.prim("lt", x, zero), _c(b, x, -1), rest))


def _expand_abs(b, args, attrs):
    """Integer |x| (wrapping at MIN); float abs stays a native call (it clears the sign bit, -0.0 included)."""
    (x,) = args
    if x.type.is_float:
        return None
    return x if x.type is uint32 else b.select(b.prim("lt", x, _c(b, x, 0)), b.neg(x), x)


def _expand_clamp(b, args, attrs):
    x, lo, hi = args
    return b.prim("min", b.prim("max", x, lo), hi)


# --------------------------------------------------------------------------- arithmetic

elementwise("add", np.add, lambda b, a, o, at: [1, 1], doc="a + b")
elementwise("sub", np.subtract, lambda b, a, o, at: [1, _c(b, a[1], -1)], doc="a - b")
elementwise("mul", np.multiply, lambda b, a, o, at: [a[1], a[0]], doc="a * b")
elementwise("div", np.divide, lambda b, a, o, at: [b.div(_c(b, a[1], 1), a[1]), b.neg(b.div(o, a[1]))],
            float_only=True, doc="a / b (true division, floats)")
elementwise("floordiv", _py_floordiv, lambda b, a, o, at: [None, None], expand=_expand_floored("idiv"),
            doc="a // b, Python (floor) semantics")
elementwise("mod", _py_mod, lambda b, a, o, at: [1, b.neg(b.prim("floor", b.div(a[0], a[1])))],
            expand=_expand_floored("irem"), doc="a % b, Python (floored) semantics")
for _n in ("idiv", "irem"):
    register(Builtin(_n, _elementwise(_n), eval=_truncating(_n), arity=2, differentiable=False,
                     doc=f"C's truncating integer {'/' if _n == 'idiv' else '%'}; the divisor is never 0 "
                         "(the expansion of // and % guards it)"))
elementwise("pow", np.power,
            lambda b, a, o, at: [
                b.mul(a[1], b.prim("pow", a[0], b.sub(a[1], _c(b, a[1], 1)))),
                b.select(b.prim("gt", a[0], _c(b, a[0], 0)), b.mul(b.prim("log", a[0]), o), _c(b, o, 0))],
            float_only=True, public=True, cmath="pow", doc="a ** b",
            domain=((0.2, 3), (-2, 2)))
elementwise("min", np.minimum,
            lambda b, a, o, at: [_ind(b, b.prim("le", a[0], a[1]), o), _ind(b, b.prim("gt", a[0], a[1]), o)],
            public=True, doc="smaller of a, b (ties: gradient to a)", domain=((-2, 2), (-2, 2)))
elementwise("max", np.maximum,
            lambda b, a, o, at: [_ind(b, b.prim("ge", a[0], a[1]), o), _ind(b, b.prim("lt", a[0], a[1]), o)],
            public=True, doc="larger of a, b (ties: gradient to a)", domain=((-2, 2), (-2, 2)))
def _d_atan2(b, a, o, at):
    """∂atan2(y, x) = (x, -y) / (x² + y²); at the origin, where it is undefined, 0 (Warp's choice) not NaN."""
    r2 = b.add(b.mul(a[0], a[0]), b.mul(a[1], a[1]))
    ok = b.prim("gt", r2, _c(b, r2, 0))
    inv = b.select(ok, b.div(_c(b, r2, 1), b.select(ok, r2, _c(b, r2, 1))), _c(b, r2, 0))
    return [b.mul(a[1], inv), b.neg(b.mul(a[0], inv))]


elementwise("atan2", np.arctan2, _d_atan2, float_only=True, public=True, cmath="atan2",
            doc="atan2(y, x) (gradient 0 at the origin)", domain=((-2, 2), (0.2, 2)))
elementwise("neg", np.negative, lambda b, a, o, at: [_c(b, a[0], -1)], arity=1, doc="-a")
elementwise("abs", np.abs, lambda b, a, o, at: [b.prim("sign", a[0])], arity=1, public=True, expand=_expand_abs, cmath="fabs",
            doc="|a|", domain=((-3, 3),))
elementwise("sign", lambda x: np.sign(x).astype(np.asarray(x).dtype), lambda b, a, o, at: [None],
            arity=1, public=True, expand=_expand_sign, doc="-1, 0 or 1", domain=((-3, 3),))
elementwise("floor", np.floor, lambda b, a, o, at: [None], arity=1, float_only=True, public=True, cmath="floor",
            domain=((-3, 3),))
elementwise("ceil", np.ceil, lambda b, a, o, at: [None], arity=1, float_only=True, public=True, cmath="ceil",
            domain=((-3, 3),))
elementwise("round", _round_half_away, lambda b, a, o, at: [None], arity=1, float_only=True, public=True, cmath="round",
            doc="round half away from zero (C round)", domain=((-3, 3),))
elementwise("clamp", lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
            lambda b, a, o, at: [
                _ind(b, b.prim("and", b.prim("ge", a[0], a[1]), b.prim("le", a[0], a[2])), o),
                _ind(b, b.prim("lt", a[0], a[1]), o),
                _ind(b, b.prim("and", b.prim("ge", a[0], a[1]), b.prim("gt", a[0], a[2])), o)],
            arity=3, public=True, expand=_expand_clamp, doc="min(max(x, lo), hi)")

# --------------------------------------------------------------------------- math functions

LN2, LN10 = math.log(2.0), math.log(10.0)
def _d_sqrt(b, x, y, attrs):
    """1/(2 sqrt x); `subgrad=True` (set where sqrt sits inside length/normalize) makes it 0 at x = 0, the
    subgradient Warp uses for |v| at v = 0, so a zero vector does not turn its thread's gradients into NaN."""
    d = b.div(_c(b, x, 0.5), y)
    return b.select(b.prim("gt", y, _c(b, y, 0)), d, _c(b, y, 0)) if attrs.get("subgrad") else d


register(Builtin("sqrt", _elementwise("sqrt", float_only=True), eval=lambda x, subgrad=False: np.sqrt(x), arity=1,
                 partials=lambda b, a, out, at: [_d_sqrt(b, a[0], out, at)], decompose=_decomposer("sqrt"),
                 public=True, float_only=True, cmath="sqrt", domain=((0.1, 10),),
                 doc="square root (gradient at 0 is inf; with subgrad=True it is 0)"))
register(Builtin("rsqrt", _elementwise("rsqrt", float_only=True), eval=lambda x: 1 / np.sqrt(x), arity=1,
                 partials=lambda b, a, out, at: [b.mul(_c(b, out, -0.5), b.mul(out, b.mul(out, out)))],
                 decompose=_decomposer("rsqrt"), public=True, float_only=True,
                 expand=lambda b, a, at: b.div(_c(b, a[0], 1), b.prim("sqrt", a[0])),
                 doc="1 / sqrt(x) (Warp's rsqrt; d/dx = -y³/2)", domain=((0.1, 10),)))
unary_math("exp", np.exp, lambda b, x, y: y, domain=(-5, 5))
unary_math("log", np.log, lambda b, x, y: b.div(_c(b, x, 1), x), domain=(0.1, 10))
unary_math("log2", np.log2, lambda b, x, y: b.div(_c(b, x, 1), b.mul(x, _c(b, x, LN2))), domain=(0.1, 10))
unary_math("log10", np.log10, lambda b, x, y: b.div(_c(b, x, 1), b.mul(x, _c(b, x, LN10))),
           domain=(0.1, 10))
unary_math("sin", np.sin, lambda b, x, y: b.prim("cos", x))
unary_math("cos", np.cos, lambda b, x, y: b.neg(b.prim("sin", x)))
unary_math("tan", np.tan, lambda b, x, y: b.add(_c(b, x, 1), b.mul(y, y)), domain=(-1.2, 1.2))
unary_math("asin", np.arcsin, lambda b, x, y: b.div(_c(b, x, 1), b.prim("sqrt", b.sub(_c(b, x, 1), b.mul(x, x)))),
           domain=(-0.9, 0.9))
unary_math("acos", np.arccos,
           lambda b, x, y: b.neg(b.div(_c(b, x, 1), b.prim("sqrt", b.sub(_c(b, x, 1), b.mul(x, x))))),
           domain=(-0.9, 0.9))
unary_math("atan", np.arctan, lambda b, x, y: b.div(_c(b, x, 1), b.add(_c(b, x, 1), b.mul(x, x))), domain=(-4, 4))
unary_math("sinh", np.sinh, lambda b, x, y: b.prim("cosh", x))
unary_math("cosh", np.cosh, lambda b, x, y: b.prim("sinh", x))
unary_math("tanh", np.tanh, lambda b, x, y: b.sub(_c(b, x, 1), b.mul(y, y)))
def _np_erf(x):
    x = np.asarray(x)
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


unary_math("erf", _np_erf,
           lambda b, x, y: b.mul(_c(b, x, 2 / math.sqrt(math.pi)), b.prim("exp", b.neg(b.mul(x, x)))),
           doc="the error function, 2/√π ∫₀ˣ e^(-t²) dt", domain=(-2.5, 2.5))


# where(cond, a, b): a where cond holds, else b. Elementwise over vectors with a scalar condition.
def _where_rule(types, attrs):
    c, a, bt = types
    if c is not bool_:
        raise BuiltinTypeError(f"where() condition must be bool, got {_name(c)}")
    if a is not bt:
        raise BuiltinTypeError(f"where() branches differ in type: {_name(a)} and {_name(bt)}")
    return a


register(Builtin(
    "where", _where_rule, eval=lambda c, a, b, **_: np.where(c, a, b), arity=3,
    jvp=lambda b, a, t, o, at: None if t[1] is None and t[2] is None else b.select(
        a[0], t[1] if t[1] is not None else _c(b, o, 0), t[2] if t[2] is not None else _c(b, o, 0)),
    vjp=lambda b, a, o, adj, at: [None, b.select(a[0], adj, _c(b, adj, 0)), b.select(a[0], _c(b, adj, 0), adj)],
    decompose=lambda b, a, comps, ot, at: [b.prim("where", comps[0][0], x, y) for x, y in zip(comps[1], comps[2])],
    public=True, doc="a where cond else b (Warp's where)"))

# Comparisons and logic: no derivative.
for _n, _f in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
               ("eq", np.equal), ("ne", np.not_equal)):
    register(Builtin(_n, _cmp_rule(_n), eval=_f, arity=2, differentiable=False))
register(Builtin("and", _bool_rule("and"), eval=np.logical_and, arity=2, differentiable=False))
register(Builtin("or", _bool_rule("or"), eval=np.logical_or, arity=2, differentiable=False))
register(Builtin("not", _bool_rule("not"), eval=np.logical_not, arity=1, differentiable=False))


# cast(x, to=T): scalar conversion; float→float casts pass derivatives through.
def _cast_rule(types, attrs):
    (src,) = types
    to = attrs["to"]
    if src.is_scalar and to.is_scalar:
        return to
    if not src.is_scalar and not to.is_scalar and src.shape == to.shape:
        return to
    raise BuiltinTypeError(f"cannot cast {_name(src)} to {_name(to)}")


def _cast_eval(x, to):
    x = np.asarray(x)
    if to.is_int and x.dtype.kind == "f":
        x = np.trunc(x)
    return x.astype(to.np_dtype if to.is_scalar else to.scalar.np_dtype)


def _both_float(a, to):
    return a.type.is_float and to.is_float


register(Builtin(
    "cast", _cast_rule, eval=_cast_eval, arity=1,
    jvp=lambda b, a, t, o, at: b.cast(t[0], at["to"]) if t[0] is not None and _both_float(a[0], at["to"]) else None,
    vjp=lambda b, a, o, adj, at: [b.cast(adj, a[0].type) if _both_float(a[0], at["to"]) else None],
    decompose=lambda b, a, comps, ot, at: [b.prim("cast", c, to=ot.scalar) for c in comps[0]],
    doc="convert to another scalar type (float→int truncates toward zero)"))
