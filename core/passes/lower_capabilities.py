"""Lower what a backend lacks into what it has: the capability pass that runs just before `Backend.compile`.

A backend declares the primitives, atomic kinds and features it implements (gradkit.backends.capabilities
turns a plugin's declaration into a `Target`; core/ never imports backends/, so the set arrives as data).
Every primitive or atomic the kernel uses and the target lacks is rewritten where an exact expansion
exists (`FALLBACKS`), and is otherwise a `NotDeclaredError` naming the backend and the feature:

    erf            float64 piecewise polynomials (float32 computed in float64): within 2 ULP
    idiv, irem     floored floordiv/mod plus a sign fix-up, or (32-bit integers) float64 division and a
                   truncating cast, the remainder as a - q*b
    shl, shr       multiplication / floored division by 2**(n mod bits), the power built from the bits of n
    bit_not        -a - 1 (uint32: MAX - a)
    bit_and/or/xor a loop over the bits, each taken by floored division by 2
    rem (floats)   C's fmod, exactly: subtract |b| * 2**k for k from the largest that fits down to 0
    atomics        an `exclusive` one (no other thread touches the element) becomes a load and a store;
                   others are kept, marked `cas=True`, where the target declares the `cas` feature (its
                   emitter spells them as compare-and-swap loops); else NotDeclaredError

Expansions may use primitives that are themselves lowered (shr of a target without floordiv uses idiv,
and so on); what they use must be declared in the end, or the pass raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import types as T
from ..errors import CompileError
from ..ir import Builder, Function, Instr, Region, Value
from ..ops import STACK, Op


@dataclass(frozen=True)
class Target:
    """What one backend implements: prim names, atomic kinds and feature names (see backends/README.md)."""

    backend: str
    prims: frozenset
    atomics: frozenset
    features: frozenset = frozenset()


class NotDeclaredError(CompileError):
    """A kernel needs a feature its backend does not declare and gradkit cannot write in others."""

    def __init__(self, backend: str, feature: str, why: str = ""):
        self.backend, self.feature = backend, feature
        super().__init__(f"backend '{backend}' does not declare '{feature}'" + (f" ({why})" if why else "")
                         + "; it has no fallback there. Declare it in the plugin's `capabilities` and "
                           "implement it, or avoid it in the kernel.")


# --------------------------------------------------------------------------- erf

# Chebyshev coefficients (fitted with mpmath at 50 digits, tests/backends/test_capabilities.py checks the
# result): erf(x)/x in t = x^2 on [0, 1]; Q(x) = erfc(x) exp(x^2) on x in [1, 2.5]; Q(1/u) on u in [1/6, 0.4].
ERF_SMALL = (0.9754769393826541, -0.14226120510371365, 0.010035582187599796, -0.0005768764699767485,
             2.741993125219606e-05, -1.1043175507344507e-06, 3.8488755420345036e-08, -1.1808582533875466e-09,
             3.2334215826050435e-11, -7.991015946679151e-13, 1.7990723022320763e-14, -3.717374242306777e-16)
ERFC_MID = (0.3017138902444292, -0.10574990110152695, 0.017104848474406763, -0.002587682261135065,
            0.0003696145268036729, -5.0198560605167956e-05, 6.517935170561901e-06, -8.126449775613485e-07,
            9.763690285483578e-08, -1.133813656364367e-08, 1.2757869239497698e-09, -1.393998472830316e-10,
            1.4818660272088463e-11, -1.5350838558612091e-12, 1.5518967980368652e-13, -1.533072828010964e-14,
            1.4815126463986766e-15, -1.3904450604200128e-16)
ERFC_TAIL = (0.1529349884592683, 0.059049889433629016, -0.0011479649326890202, -3.483785082916848e-05,
             4.450171175539708e-06, -1.548449532485104e-07, -7.687154368609182e-09, 1.3935797685791674e-09,
             -8.042954274556285e-11, -1.0584379532637939e-12, 6.67834574117281e-13, -6.55920542153422e-14,
             2.2621942610549246e-15, 2.772154528054775e-16)


def _c(b: Builder, v, t) -> Value:
    return b.const(float(v) if t.is_float else int(v), t)


def _clenshaw(b: Builder, coeffs, z: Value) -> Value:
    """Σ c_k T_k(z) by Clenshaw's recurrence (stable where the monomial form is not)."""
    t = z.type
    two_z = b.mul(_c(b, 2, t), z)
    b1, b2 = _c(b, 0, t), _c(b, 0, t)
    for ck in coeffs[:0:-1]:
        b1, b2 = b.add(b.sub(b.mul(two_z, b1), b2), _c(b, ck, t)), b1
    return b.add(b.sub(b.mul(z, b1), b2), _c(b, coeffs[0], t))


def _affine(b: Builder, x: Value, lo: float, hi: float) -> Value:
    """x mapped from [lo, hi] onto [-1, 1]."""
    t = x.type
    return b.div(b.sub(x, _c(b, (lo + hi) / 2, t)), _c(b, (hi - lo) / 2, t))


def _erf(b: Builder, args, attrs, target) -> Value:
    (x,) = args
    f64 = T.float64
    w = b.cast(x, f64)
    ax = b.prim("abs", w)
    t = b.mul(ax, ax)
    small = b.mul(w, _clenshaw(b, ERF_SMALL, b.sub(b.mul(_c(b, 2, f64), t), _c(b, 1, f64))))
    q_mid = _clenshaw(b, ERFC_MID, _affine(b, ax, 1.0, 2.5))
    q_tail = _clenshaw(b, ERFC_TAIL, _affine(b, b.div(_c(b, 1, f64), ax), 1 / 6, 0.4))
    q = b.select(b.prim("lt", ax, _c(b, 2.5, f64)), q_mid, q_tail)
    mag = b.select(b.prim("lt", ax, _c(b, 6, f64)),
                   b.sub(_c(b, 1, f64), b.mul(b.prim("exp", b.neg(t)), q)), _c(b, 1, f64))
    big = b.select(b.prim("lt", w, _c(b, 0, f64)), b.neg(mag), mag)
    out = b.select(b.prim("lt", ax, _c(b, 1, f64)), small, big)
    out = b.select(b.prim("ne", w, w), w, out)          # NaN stays NaN (every comparison above was false)
    return b.cast(out, x.type)


# --------------------------------------------------------------------------- integer division

def _signed(t) -> bool:
    return t.is_int and t is not T.uint32


def _floor_divmod(b: Builder, a: Value, d: Value, target: Target) -> tuple[Value, Value]:
    """Floored quotient and remainder (d != 0) from what the target has."""
    if {"floordiv", "mod"} <= target.prims:
        return b.prim("floordiv", a, d), b.prim("mod", a, d)
    q, r = b.prim("idiv", a, d), b.prim("irem", a, d)
    if not _signed(a.type):
        return q, r
    zero = _c(b, 0, a.type)
    fix = b.prim("and", b.prim("ne", r, zero), b.prim("ne", b.prim("lt", r, zero), b.prim("lt", d, zero)))
    return (b.select(fix, b.sub(q, _c(b, 1, a.type)), q), b.select(fix, b.add(r, d), r))


def _trunc_divmod(b: Builder, a: Value, d: Value, target: Target) -> tuple[Value, Value]:
    """C's truncating quotient and remainder (d != 0, never MIN / -1)."""
    t = a.type
    if {"floordiv", "mod"} <= target.prims:
        q, r = b.prim("floordiv", a, d), b.prim("mod", a, d)
        if not _signed(t):
            return q, r
        zero = _c(b, 0, t)      # the floored remainder has d's sign, C's has a's: they differ -> step back
        fix = b.prim("and", b.prim("ne", r, zero), b.prim("ne", b.prim("lt", r, zero), b.prim("lt", a, zero)))
        return b.select(fix, b.add(q, _c(b, 1, t)), q), b.select(fix, b.sub(r, d), r)
    if t.bits == 32 and {"div", "cast", "mul", "sub"} <= target.prims:
        # |a|, |d| < 2**32: the float64 quotient is within half an ulp of a / d, closer than a / d is to
        # the next integer, so truncating it gives C's quotient exactly
        q = b.cast(b.div(b.cast(a, T.float64), b.cast(d, T.float64)), t)
        return q, b.sub(a, b.mul(q, d))
    raise NotDeclaredError(target.backend, "idiv", f"{t.name} division needs floordiv and mod, or 32-bit "
                                                   "integers and float64 division")


def _idiv(b, args, attrs, target):
    return _trunc_divmod(b, *args, target)[0]


def _irem(b, args, attrs, target):
    return _trunc_divmod(b, *args, target)[1]


# --------------------------------------------------------------------------- shifts and bit operations

def _floor_div2(b: Builder, a: Value, target: Target) -> Value:
    return _floor_divmod(b, a, _c(b, 2, a.type), target)[0]


def _count(b: Builder, n: Value, t, target: Target) -> Value:
    """The shift count modulo the width, in 0 .. bits-1 (two's complement: the count's low bits)."""
    return _floor_divmod(b, n, _c(b, t.bits, t), target)[1]


def _pow2(b: Builder, m: Value, target: Target) -> Value:
    """2**m (0 <= m < bits) from m's bits; 2**(bits-1) wraps to MIN on signed types, as a shift does."""
    t = m.type
    p, rest, k = _c(b, 1, t), m, 0
    while (1 << k) < t.bits:
        q, bit = _floor_divmod(b, rest, _c(b, 2, t), target)
        p = b.select(b.prim("eq", bit, _c(b, 1, t)), b.mul(p, _c(b, 1 << (1 << k), t)), p)
        rest, k = q, k + 1
    return p


def _shl(b, args, attrs, target):
    a, n = args
    return b.mul(a, _pow2(b, _count(b, n, a.type, target), target))


def _shr(b, args, attrs, target):
    a, n = args
    t = a.type
    m = _count(b, n, t, target)
    p = _pow2(b, m, target)
    if not _signed(t):
        return _floor_divmod(b, a, p, target)[0]
    top = b.prim("eq", m, _c(b, t.bits - 1, t))       # 2**(bits-1) wrapped negative: the sign fills
    safe = b.select(top, _c(b, 1, t), p)
    fill = b.select(b.prim("lt", a, _c(b, 0, t)), _c(b, -1, t), _c(b, 0, t))
    return b.select(top, fill, _floor_divmod(b, a, safe, target)[0])


def _bit_not(b, args, attrs, target):
    (a,) = args
    if a.type is T.uint32:
        return b.sub(_c(b, 0xFFFFFFFF, a.type), a)
    return b.sub(b.neg(a), _c(b, 1, a.type))


def _bitwise(combine):
    """A two-operand bit operation as a loop over the bits: take each operand's low bit by floored division
    by 2 (an arithmetic shift on two's complement), combine, add it at weight p (wrapping at the top)."""

    def rule(b: Builder, args, attrs, target):
        x0, y0 = args
        t = x0.type
        iv = Value(T.int32, "bit")
        r, p, x, y = (Value(t, h) for h in ("acc", "weight", "x", "y"))
        body = Region([iv, r, p, x, y])
        bb = b.at(body)
        xq, yq = _floor_div2(bb, x, target), _floor_div2(bb, y, target)
        two = _c(bb, 2, t)
        xb, yb = bb.sub(x, bb.mul(xq, two)), bb.sub(y, bb.mul(yq, two))
        body.yields = [bb.add(r, bb.mul(combine(bb, xb, yb), p)), bb.mul(p, two), xq, yq]
        init = [_c(b, 0, t), _c(b, 1, t), x0, y0]
        loop = b.emit(Op.FOR, [_c(b, 0, T.int32), _c(b, t.bits, T.int32), _c(b, 1, T.int32), *init],
                      [t] * 4, {}, regions=[body])
        return loop.results[0]
    return rule


# --------------------------------------------------------------------------- float remainder

def _while(b: Builder, init: list, cond, body) -> list:
    """A `while` loop over carried values `init`: cond(builder, *carried) -> bool, body(...) -> next."""
    ts = [v.type for v in init]
    c_region, b_region = Region([Value(t) for t in ts]), Region([Value(t) for t in ts])
    c_region.yields = [cond(b.at(c_region), *c_region.params)]
    b_region.yields = list(body(b.at(b_region), *b_region.params))
    return b.emit(Op.WHILE, init, ts, {}, regions=[c_region, b_region]).results


def _rem(b: Builder, args, attrs, target):
    """C's fmod, exactly: |a| reduced by |b| * 2**k for k from the largest that fits down to 0 (each
    subtraction is exact: Sterbenz), the sign of a; NaN for an infinite a, a NaN or a zero b."""
    a, d = args
    if not a.type.is_float:
        raise NotDeclaredError(target.backend, "irem", "integer rem is written in irem by the expand pass")
    t = a.type
    zero, one, two, half = (_c(b, v, t) for v in (0, 1, 2, 0.5))
    x, y = b.prim("abs", a), b.prim("abs", d)
    finite = b.prim("lt", x, _c(b, float("inf"), t))
    usable = b.prim("and", b.prim("and", finite, b.prim("gt", y, zero)), b.prim("lt", y, _c(b, float("inf"), t)))
    x0 = b.select(usable, x, zero)                        # loops run only on ordinary operands
    y0 = b.select(usable, y, one)
    (m,) = _while(b, [y0], lambda c, m: c.prim("le", c.mul(m, two), x0), lambda c, m: [c.mul(m, two)])

    def step(c, r, m):
        return [c.select(c.prim("ge", r, m), c.sub(r, m), r), c.mul(m, half)]
    r, _ = _while(b, [x0, m], lambda c, r, m: c.prim("ge", m, y0), step)
    signed = b.select(b.prim("lt", a, zero), b.neg(r), r)
    signed = b.select(b.prim("eq", a, zero), a, signed)                 # fmod(+-0, y) = +-0
    nan = _c(b, float("nan"), t)
    out = b.select(usable, signed, nan)
    is_inf_d = b.prim("and", finite, b.prim("eq", y, _c(b, float("inf"), t)))
    return b.select(is_inf_d, a, b.select(b.prim("ne", d, d), d, out))   # fmod(x, inf) = x; NaN d stays


FALLBACKS = {
    "erf": _erf,
    "idiv": _idiv,
    "irem": _irem,
    "shl": _shl,
    "shr": _shr,
    "bit_not": _bit_not,
    "rem": _rem,
    "bit_and": _bitwise(lambda b, x, y: b.mul(x, y)),
    "bit_or": _bitwise(lambda b, x, y: b.sub(b.add(x, y), b.mul(x, y))),
    "bit_xor": _bitwise(lambda b, x, y: b.sub(b.add(x, y), b.mul(b.mul(x, y), _c(b, 2, x.type)))),
}
# atomic kinds a target with compare-and-swap gets as CAS loops written by its emitter
CAS_ATOMICS = frozenset({"xchg", "min", "max", "add", "sub"})


# --------------------------------------------------------------------------- the pass

def _lower_region(region: Region, target: Target, mapping: dict[int, Value], depth: int) -> None:
    out = []
    for ins in region.body:
        if mapping:
            ins.args = [mapping.get(a.id, a) for a in ins.args]
        for sub in ins.regions:
            _lower_region(sub, target, mapping, depth)
        if ins.op == Op.PRIM and ins.attrs["name"] not in target.prims:
            out.extend(_replace(ins, target, mapping, depth))
            continue
        if ins.op == Op.ATOMIC and ins.attrs["kind"] not in target.atomics:
            if ins.attrs.get("exclusive"):        # no other thread touches it: a load and a store
                out.extend(_read_modify_write(ins, mapping))
                continue
            if "cas" in target.features and ins.attrs["kind"] in CAS_ATOMICS:
                ins.attrs = {**ins.attrs, "cas": True}
            else:
                raise NotDeclaredError(target.backend, f"atomic_{ins.attrs['kind']}",
                                       "no compare-and-swap ('cas' feature) to write it with")
        if ins.op == Op.NATIVE and "native" not in target.features:
            raise NotDeclaredError(target.backend, "native", "a @gk.func_native snippet")
        if ins.op in STACK and "stack" not in target.features:
            raise NotDeclaredError(target.backend, "stack", "the reverse pass's value stack")
        out.append(ins)
    region.body = out
    if mapping:
        region.yields = [mapping.get(y.id, y) for y in region.yields]


def _read_modify_write(ins: Instr, mapping: dict[int, Value]) -> list[Instr]:
    """An exclusive atomic as a plain load and store (its old value the load's)."""
    tmp = Region()
    b = Builder(tmp, ins.loc)
    arr, idx, v = ins.args[0], ins.args[1:-1], ins.args[-1]
    comp, kind = ins.attrs["comp"], ins.attrs["kind"]
    old = b.load(arr, list(idx), comp=comp)
    new = {"xchg": lambda: v, "add": lambda: b.add(old, v), "sub": lambda: b.sub(old, v),
           "min": lambda: b.prim("min", old, v), "max": lambda: b.prim("max", old, v)}[kind]()
    b.store(arr, list(idx), new, comp=comp)
    mapping[ins.result.id] = old
    return tmp.body


def _replace(ins: Instr, target: Target, mapping: dict[int, Value], depth: int) -> list[Instr]:
    """The instructions computing `ins` (an undeclared prim) from declared ones."""
    name = ins.attrs["name"]
    rule = FALLBACKS.get(name)
    if rule is None or depth > 4:
        raise NotDeclaredError(target.backend, name)
    tmp = Region()
    attrs = {k: v for k, v in ins.attrs.items() if k != "name"}
    value = rule(Builder(tmp, ins.loc), ins.args, attrs, target)
    _lower_region(tmp, target, {}, depth + 1)        # what the expansion used may need lowering in turn
    mapping[ins.result.id] = value
    value.hint = value.hint or ins.result.hint
    return tmp.body


def needs_lowering(fn: Function, target: Target) -> bool:
    """Whether `fn` uses a prim, atomic kind or native code `target` does not declare."""
    for ins in fn.walk():
        if ins.op == Op.PRIM and ins.attrs["name"] not in target.prims:
            return True
        if ins.op == Op.ATOMIC and ins.attrs["kind"] not in target.atomics:
            return True
        if ins.op == Op.NATIVE and "native" not in target.features:
            return True
        if ins.op in STACK and "stack" not in target.features:
            return True
    return False


def lower_capabilities(fn: Function, target: Target) -> Function:
    """Rewrite in place every undeclared prim of `fn` into declared ones; NotDeclaredError where none can."""
    _lower_region(fn.body, target, {}, 0)
    return fn
