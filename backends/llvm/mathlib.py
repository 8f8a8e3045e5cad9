"""Vectorisable math functions as inlineable LLVM IR (float32 and float64), built with llvmlite.

LLVM's `llvm.sin.*`, `llvm.exp.*`, ... become scalar libm calls that stop the loop vectoriser, so
every transcendental builtin is emitted here as branch-free IR (range reduction, a polynomial from
coefficients.py, selects for special cases) in an `alwaysinline` internal function; after inlining
the vectoriser turns it into `<8 x float>` / `<4 x double>` code. Only sqrt/floor/ceil/fabs/fma/rint/
copysign intrinsics are used, and those vectorise.

Algorithms (x the argument; "poly" = the fitted polynomial of coefficients.py):
  sin/cos/tan  k = rint(x·2/π), r = x - k·π/2 (3-part Cody-Waite with FMA), sin/cos polys on
               |r| ≤ π/4, quadrant from k mod 4; tan = ±sin/cos or ∓cos/sin (one division).
  exp          k = rint(x/ln2), r = x - k·ln2 (2 parts), 1 + r + r²·poly(r), scaled by 2^k in two
               steps (so results down to the smallest subnormal round once); overflow → inf, → 0 below.
  log/log2/log10  x = 2^e·m, m ∈ [√½, √2), s = f/(2+f) with f = m-1; log(m) = f - (f²/2 - s(f²/2 + R(s²)))
               (fdlibm's arrangement, so the exact f dominates); + e·ln2 (2 parts).
  pow          float32: exp(y·log|x|) in float64; float64: log|x| as a double-double, y·log as a
               double-double, exp(hi)·(1 + lo). C99 special cases (negative base with integral y, 0, ±inf, 1).
  atan/atan2   |x| > 1 → π/2 - atan(1/x) (one division of min/max), |y| > tan(π/8) → π/4 + atan((y-1)/(y+1)).
  asin/acos    |x| ≤ ½: poly; else asin = π/2 - 2·asin(√((1-|x|)/2)) on the same poly.
  sinh/cosh/tanh  |x| < 1 (sinh) / 0.625 (tanh): odd polys; else from exp (e^|x|/2 computed without
               overflow, so cosh/sinh reach their true overflow threshold).

Measured max error in ULP against NumPy float64 (tests/backends/test_llvm_math.py asserts these
bounds; float32 results are compared with the float64 result rounded to float32, float64 results
with NumPy's own float64, which is itself within ~1 ULP):

    function  range tested                float32  float64
    sin, cos  |x| ≤ 1e4 (1e5 for f64)       1        1
    tan       |x| ≤ 1e4                     2        2
    exp       [-100, 88] / [-740, 709]      1        1
    log       (0, 1e30] incl. subnormals    1        1
    log2      same                          2        1
    log10     same                          2        2
    pow       x ∈ (0, 100], y ∈ [-20, 20]   1        2
    atan      [-1e4, 1e4]                   2        2
    atan2     random pairs                  2        2
    asin/acos [-1, 1]                       2        2
    sinh/cosh [-88, 88]                     2        2
    tanh      [-20, 20]                     2        2
Large arguments: sin/cos/tan keep a bounded error up to |x| ≈ 1e5 (float32) / 1e9 (float64); beyond,
the 3-part reduction loses bits gradually (results stay in [-1, 1]); ±inf and NaN give NaN.
"""

from __future__ import annotations

import decimal
import math
import struct

from llvmlite import ir

from .coefficients import COEF

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)


_D = decimal.Context(prec=80)
PI = decimal.Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")
LN2 = decimal.Decimal("0.693147180559945309417232121458176568075500134360255254120680009493393621969694715605")
LOG10_2 = decimal.Decimal("0.30102999566398119521373889472449302676818988146210854131")
PIO2, PIO4 = _D.divide(PI, 2), _D.divide(PI, 4)


def _chop(v: float, nbits: int) -> float:
    """The double v with its lowest `nbits` significand bits cleared."""
    (bits,) = struct.unpack("Q", struct.pack("d", v))
    return struct.unpack("d", struct.pack("Q", bits & ~((1 << nbits) - 1)))[0]


def _split(value: decimal.Decimal, t: ir.Type, parts: int) -> list[float]:
    """`value` as a sum of `parts` numbers of type t, each the rounding of what the previous left over."""
    out, rest = [], value
    for _ in range(parts):
        v = float(rest)
        if t is F32:
            v = struct.unpack("f", struct.pack("f", v))[0]
        out.append(v)
        rest = _D.subtract(rest, decimal.Decimal(v))
    return out


class Ops:
    """Typed float helpers over an IRBuilder: constants, intrinsics, Horner, bit tricks."""

    def __init__(self, lib: "MathLib", b: ir.IRBuilder, t: ir.Type):
        self.lib, self.b, self.t = lib, b, t
        self.is32 = t is F32
        self.it = I32 if self.is32 else I64
        self.mant = 23 if self.is32 else 52
        self.bias = 127 if self.is32 else 1023
        self.bits = 24 if self.is32 else 53

    # constants and plain arithmetic
    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.t, v)

    def ci(self, v: int) -> ir.Constant:
        return ir.Constant(self.it, v)

    def add(self, a, b): return self.b.fadd(a, b)
    def sub(self, a, b): return self.b.fsub(a, b)
    def mul(self, a, b): return self.b.fmul(a, b)
    def div(self, a, b): return self.b.fdiv(a, b)
    def neg(self, a): return self.b.fneg(a)
    def sel(self, c, a, b): return self.b.select(c, a, b)
    def lt(self, a, b): return self.b.fcmp_ordered("<", a, b)
    def gt(self, a, b): return self.b.fcmp_ordered(">", a, b)
    def le(self, a, b): return self.b.fcmp_ordered("<=", a, b)
    def eq(self, a, b): return self.b.fcmp_ordered("==", a, b)
    def isnan(self, a): return self.b.fcmp_unordered("uno", a, a)
    def or_(self, a, b): return self.b.or_(a, b)
    def and_(self, a, b): return self.b.and_(a, b)

    # intrinsics
    def intr(self, name: str, *args):
        return self.b.call(self.lib.intrinsic(name, self.t, len(args)), list(args))

    def fma(self, a, b, c): return self.intr("llvm.fma", a, b, c)
    def fabs(self, a): return self.intr("llvm.fabs", a)
    def rint(self, a): return self.intr("llvm.rint", a)
    def floor(self, a): return self.intr("llvm.floor", a)
    def sqrt(self, a): return self.intr("llvm.sqrt", a)
    def copysign(self, a, s): return self.intr("llvm.copysign", a, s)

    def poly(self, z, name: str):
        """Horner evaluation (with FMA) of the fitted polynomial `name` for this type."""
        coeffs = COEF[name][self.bits][0]
        acc = self.c(coeffs[0])
        for cf in coeffs[1:]:
            acc = self.fma(acc, z, self.c(cf))
        return acc

    # bit tricks
    def to_bits(self, a): return self.b.bitcast(a, self.it)
    def from_bits(self, a): return self.b.bitcast(a, self.t)

    def small_int(self, kf):
        """A float holding a small integer (|k| < 2^20 after clamping) as an int of the matching width."""
        return self.b.fptosi(kf, self.it)

    def pow2(self, k):
        """2^k for an int k with a normal result (k + bias in [1, 2·bias])."""
        return self.from_bits(self.b.shl(self.b.add(k, self.ci(self.bias)), self.ci(self.mant)))


class MathLib:
    """Builds (once per module) the internal, always-inlined math functions a kernel calls."""

    UNARY = ("sin", "cos", "tan", "exp", "log", "log2", "log10", "asin", "acos", "atan",
             "sinh", "cosh", "tanh")
    BINARY = ("pow", "atan2")

    def __init__(self, module: ir.Module):
        self.module = module
        self.funcs: dict[tuple[str, str], ir.Function] = {}

    def intrinsic(self, name: str, t: ir.Type, nargs: int) -> ir.Function:
        return self.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t] * nargs))

    def get(self, name: str, t: ir.Type) -> ir.Function:
        """The function `gk.<name>.<f32|f64>` of this module, built on first use."""
        key = (name, str(t))
        fn = self.funcs.get(key)
        if fn is None:
            nargs = 2 if name in self.BINARY else 1
            sfx = "f32" if t is F32 else "f64"
            fn = ir.Function(self.module, ir.FunctionType(t, [t] * nargs), f"gk.{name}.{sfx}")
            fn.linkage = "internal"
            fn.attributes.add("alwaysinline")
            fn.attributes.add("nounwind")
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            o = Ops(self, b, t)
            b.ret(getattr(self, "_" + name)(o, *fn.args))
            self.funcs[key] = fn
        return fn

    def call(self, b: ir.IRBuilder, name: str, args: list) -> ir.Value:
        return b.call(self.get(name, args[0].type), args)

    # ---------------------------------------------------------------- trigonometric
    def _reduce_pio2(self, o: Ops, x):
        """(r, q, finite): x = q·π/2 + r with |r| ≤ π/4 (q mod 4 as an int), finite = |x| < inf."""
        finite = o.lt(o.fabs(x), o.c(math.inf))
        xs = o.sel(finite, x, o.c(0.0))
        k = o.rint(o.mul(xs, o.c(2 / math.pi)))
        parts = _split(PIO2, o.t, 3)
        r = xs
        for p in parts:
            r = o.fma(o.neg(k), o.c(p), r)
        kmod4 = o.sub(k, o.mul(o.c(4.0), o.floor(o.mul(k, o.c(0.25)))))    # exact: k is an integer
        return r, o.small_int(kmod4), finite

    def _sincos_poly(self, o: Ops, r):
        z = o.mul(r, r)
        s = o.fma(o.mul(z, r), o.poly(z, "sin"), r)
        c = o.fma(o.mul(z, z), o.poly(z, "cos"), o.fma(o.c(-0.5), z, o.c(1.0)))
        return s, c

    def _sin_cos(self, o: Ops, x, shift: int):
        r, q, finite = self._reduce_pio2(o, x)
        if shift:
            q = o.b.add(q, o.ci(shift))
        s, c = self._sincos_poly(o, r)
        odd = o.b.trunc(q, I1)
        v = o.sel(odd, c, s)
        sign = o.b.shl(o.b.and_(q, o.ci(2)), o.ci(30 if o.is32 else 62))     # q&2 → the sign bit
        v = o.from_bits(o.b.xor(o.to_bits(v), sign))
        return o.sel(finite, v, o.c(math.nan))

    def _sin(self, o, x): return self._sin_cos(o, x, 0)
    def _cos(self, o, x): return self._sin_cos(o, x, 1)

    def _tan(self, o: Ops, x):
        r, q, finite = self._reduce_pio2(o, x)
        s, c = self._sincos_poly(o, r)
        odd = o.b.trunc(q, I1)
        t = o.div(o.sel(odd, o.neg(c), s), o.sel(odd, s, c))
        return o.sel(finite, t, o.c(math.nan))

    # ---------------------------------------------------------------- exp and log
    def _exp_scaled(self, o: Ops, x, adj: int = 0):
        """e^x · 2^adj, overflowing to inf and underflowing through subnormals to 0 like exp itself."""
        if o.is32:
            hi, lo = 88.72283935546875, -103.97208404541016
        else:
            hi, lo = 709.782712893384, -745.1332191019412
        hi, lo = hi - adj * math.log(2), lo - adj * math.log(2)
        xc = o.sel(o.isnan(x), o.c(0.0), x)
        xc = o.sel(o.gt(xc, o.c(hi + 1)), o.c(hi + 1), xc)
        xc = o.sel(o.lt(xc, o.c(lo - 1)), o.c(lo - 1), xc)
        k = o.rint(o.mul(xc, o.c(1 / math.log(2))))
        ln2_hi, ln2_lo = _split(LN2, o.t, 2)
        r = o.fma(o.neg(k), o.c(ln2_hi), xc)
        r = o.fma(o.neg(k), o.c(ln2_lo), r)
        p = o.add(o.fma(o.mul(r, r), o.poly(r, "exp"), r), o.c(1.0))
        ki = o.b.add(o.small_int(k), o.ci(adj))
        k1 = o.b.ashr(ki, o.ci(1))
        k2 = o.b.sub(ki, k1)
        v = o.mul(o.mul(p, o.pow2(k1)), o.pow2(k2))
        v = o.sel(o.gt(x, o.c(hi)), o.c(math.inf), v)
        v = o.sel(o.lt(x, o.c(lo)), o.c(0.0), v)
        return o.sel(o.isnan(x), x, v)

    def _exp(self, o, x): return self._exp_scaled(o, x)

    def _log_parts(self, o: Ops, x):
        """(e as float, f, corr) with log(x) = e·ln2 + f - corr, for finite x > 0 (others give junk)."""
        tiny = o.lt(x, o.c(2.0 ** (-126 if o.is32 else -1022)))
        xs = o.sel(tiny, o.mul(x, o.c(2.0 ** o.mant)), x)
        ix = o.to_bits(xs)
        e = o.b.sub(o.b.lshr(ix, o.ci(o.mant)), o.ci(o.bias))
        e = o.b.sub(e, o.b.select(tiny, o.ci(o.mant), o.ci(0)))
        m = o.from_bits(o.b.or_(o.b.and_(ix, o.ci((1 << o.mant) - 1)), o.ci(o.bias << o.mant)))
        big = o.gt(m, o.c(math.sqrt(2.0)))
        m = o.sel(big, o.mul(m, o.c(0.5)), m)
        e = o.b.add(e, o.b.zext(big, o.it))
        f = o.sub(m, o.c(1.0))
        s = o.div(f, o.add(f, o.c(2.0)))
        z = o.mul(s, s)
        hfsq = o.mul(o.mul(f, f), o.c(0.5))
        rr = o.mul(z, o.poly(z, "log"))                    # R(s²) with log1p(f) = 2s + s·R
        corr = o.fma(o.neg(s), o.add(hfsq, rr), hfsq)      # f²/2 - s(f²/2 + R)
        return o.b.sitofp(e, o.t), f, corr

    def _log_special(self, o: Ops, x, v):
        v = o.sel(o.eq(x, o.c(math.inf)), o.c(math.inf), v)
        v = o.sel(o.eq(x, o.c(0.0)), o.c(-math.inf), v)
        bad = o.or_(o.lt(x, o.c(0.0)), o.isnan(x))
        return o.sel(bad, o.c(math.nan), v)

    def _log(self, o: Ops, x):
        ef, f, corr = self._log_parts(o, x)
        ln2_hi, ln2_lo = _split(LN2, o.t, 2)
        lo = o.fma(ef, o.c(ln2_lo), o.neg(corr))
        v = o.add(o.fma(ef, o.c(ln2_hi), f), lo)
        return self._log_special(o, x, v)

    def _log2(self, o: Ops, x):
        ef, f, corr = self._log_parts(o, x)
        v = o.add(ef, o.mul(o.sub(f, corr), o.c(1 / math.log(2))))
        return self._log_special(o, x, v)

    def _log10(self, o: Ops, x):
        ef, f, corr = self._log_parts(o, x)
        hi, lo = _split(LOG10_2, o.t, 2)
        v = o.fma(ef, o.c(hi), o.fma(ef, o.c(lo), o.mul(o.sub(f, corr), o.c(1 / math.log(10)))))
        return self._log_special(o, x, v)

    # ---------------------------------------------------------------- pow
    def _pow(self, o: Ops, x, y):
        ax = o.fabs(x)
        if o.is32:      # float64 log/exp give a correctly rounded-ish float32 result
            d = Ops(self, o.b, F64)
            ax64, y64 = o.b.fpext(ax, F64), o.b.fpext(y, F64)
            ef, f, corr = self._log_parts(d, ax64)
            lg = o.b.fadd(o.b.fmul(ef, d.c(math.log(2))), o.b.fsub(f, corr))
            mag = o.b.fptrunc(self._exp_scaled(d, o.b.fmul(y64, lg)), F32)
        else:
            mag = self._pow_mag64(o, ax, y)
        # special cases (C99 / NumPy)
        yint = o.eq(o.floor(y), y)
        half = o.mul(y, o.c(0.5))
        yodd = o.and_(yint, o.b.fcmp_unordered("!=", o.floor(half), half))
        inf, zero = o.c(math.inf), o.c(0.0)
        xzero = o.eq(ax, zero)
        mag = o.sel(xzero, o.sel(o.lt(y, zero), inf, zero), mag)
        ax_inf = o.eq(ax, inf)
        mag = o.sel(ax_inf, o.sel(o.lt(y, zero), zero, inf), mag)
        ay_inf = o.eq(o.fabs(y), inf)
        gt1 = o.gt(ax, o.c(1.0))
        yinf_val = o.sel(o.eq(ax, o.c(1.0)), o.c(1.0), o.sel(o.b.icmp_unsigned("==", gt1, o.gt(y, zero)), inf, zero))
        mag = o.sel(ay_inf, yinf_val, mag)
        negx = o.b.icmp_signed("<", o.to_bits(x), o.ci(0))                 # sign bit, so -0 counts
        v = o.sel(o.and_(negx, yodd), o.neg(mag), mag)
        v = o.sel(o.and_(o.lt(x, zero), o.and_(o.b.not_(yint), o.b.not_(ay_inf))), o.c(math.nan), v)
        v = o.sel(o.or_(o.isnan(x), o.isnan(y)), o.c(math.nan), v)
        v = o.sel(o.or_(o.eq(y, zero), o.eq(x, o.c(1.0))), o.c(1.0), v)
        return v

    def _pow_mag64(self, o: Ops, ax, y):
        """|x|^y for float64 through a double-double log (finite, positive, normal cases)."""
        tiny = o.lt(ax, o.c(2.0 ** -1022))
        xs = o.sel(tiny, o.mul(ax, o.c(2.0 ** 52)), ax)
        ix = o.to_bits(xs)
        e = o.b.sub(o.b.lshr(ix, o.ci(52)), o.ci(1023))
        e = o.b.sub(e, o.b.select(tiny, o.ci(52), o.ci(0)))
        m = o.from_bits(o.b.or_(o.b.and_(ix, o.ci((1 << 52) - 1)), o.ci(1023 << 52)))
        big = o.gt(m, o.c(math.sqrt(2.0)))
        m = o.sel(big, o.mul(m, o.c(0.5)), m)
        ef = o.b.sitofp(o.b.add(e, o.b.zext(big, I64)), o.t)
        f = o.sub(m, o.c(1.0))                              # exact
        u = o.add(f, o.c(2.0))
        u_lo = o.add(o.sub(o.c(2.0), u), f)                 # 2 + f = u + u_lo exactly
        s = o.div(f, u)
        s_lo = o.div(o.sub(o.fma(o.neg(s), u, f), o.mul(s, u_lo)), u)     # f/(2+f) = s + s_lo
        z = o.mul(s, s)
        tail = o.mul(o.mul(z, s), o.poly(z, "log"))          # log(m) = 2s + 2s_lo + tail
        # L = ef·ln2_hi (exact) + 2s, then the small terms
        ln2_hi = _chop(float(LN2), 12)                      # ef·ln2_hi is exact (|ef| < 2^11)
        ln2_lo = float(_D.subtract(LN2, decimal.Decimal(ln2_hi)))
        a = o.mul(ef, o.c(ln2_hi))
        b2 = o.mul(s, o.c(2.0))
        hi = o.add(a, b2)
        bb = o.sub(hi, a)
        lo = o.add(o.sub(a, o.sub(hi, bb)), o.sub(b2, bb))   # 2Sum: a + b2 = hi + lo exactly
        lo = o.add(lo, o.add(o.fma(ef, o.c(ln2_lo), o.mul(s_lo, o.c(2.0))), tail))
        l_hi = o.add(hi, lo)
        l_lo = o.sub(lo, o.sub(l_hi, hi))
        p_hi = o.mul(y, l_hi)
        p_lo = o.fma(y, l_lo, o.fma(y, l_hi, o.neg(p_hi)))
        p_lo = o.sel(o.lt(o.fabs(p_hi), o.c(math.inf)), p_lo, o.c(0.0))
        ex = self._exp_scaled(o, p_hi)
        return o.fma(ex, p_lo, ex)

    # ---------------------------------------------------------------- inverse trigonometric
    def _atan01(self, o: Ops, y):
        """atan(y) for y in [0, 1] (NaN passes through)."""
        t8 = math.tan(math.pi / 8)
        mid = o.gt(y, o.c(t8))
        u = o.sel(mid, o.div(o.sub(y, o.c(1.0)), o.add(y, o.c(1.0))), y)
        z = o.mul(u, u)
        p = o.fma(o.mul(z, u), o.poly(z, "atan"), u)
        pio4_hi, pio4_lo = _split(PIO4, o.t, 2)
        return o.sel(mid, o.add(o.c(pio4_hi), o.add(p, o.c(pio4_lo))), p)

    def _pio2_minus(self, o: Ops, r):
        hi, lo = _split(PIO2, o.t, 2)
        return o.add(o.c(hi), o.sub(o.c(lo), r))

    def _atan(self, o: Ops, x):
        a = o.fabs(x)
        inv = o.gt(a, o.c(1.0))
        y = o.div(o.sel(inv, o.c(1.0), a), o.sel(inv, a, o.c(1.0)))
        r = self._atan01(o, y)
        r = o.sel(inv, self._pio2_minus(o, r), r)
        return o.copysign(r, x)

    def _atan2(self, o: Ops, y, x):
        ax, ay = o.fabs(x), o.fabs(y)
        swap = o.gt(ay, ax)
        q = o.div(o.sel(swap, ax, ay), o.sel(swap, ay, ax))
        zero, inf = o.c(0.0), o.c(math.inf)
        q = o.sel(o.and_(o.eq(ax, zero), o.eq(ay, zero)), zero, q)
        q = o.sel(o.and_(o.eq(ax, inf), o.eq(ay, inf)), o.c(1.0), q)
        r = self._atan01(o, q)
        r = o.sel(swap, self._pio2_minus(o, r), r)
        pi_hi, pi_lo = _split(PI, o.t, 2)
        negx = o.b.icmp_signed("<", o.to_bits(x), o.ci(0))
        r = o.sel(negx, o.add(o.c(pi_hi), o.sub(o.c(pi_lo), r)), r)
        return o.copysign(r, y)

    def _asin_core(self, o: Ops, x):
        """(p, big): big = |x| > ½; p = asin(|x|) if not big else asin(√((1-|x|)/2))."""
        a = o.fabs(x)
        big = o.gt(a, o.c(0.5))
        z = o.sel(big, o.mul(o.sub(o.c(1.0), a), o.c(0.5)), o.mul(a, a))
        s = o.sel(big, o.sqrt(z), a)
        return o.fma(o.mul(z, s), o.poly(z, "asin"), s), big

    def _asin(self, o: Ops, x):
        p, big = self._asin_core(o, x)
        r = o.sel(big, self._pio2_minus(o, o.mul(p, o.c(2.0))), p)
        return o.copysign(r, x)

    def _acos(self, o: Ops, x):
        p, big = self._asin_core(o, x)
        p2 = o.mul(p, o.c(2.0))
        pi_hi, pi_lo = _split(PI, o.t, 2)
        neg = o.lt(x, o.c(0.0))
        big_v = o.sel(neg, o.add(o.c(pi_hi), o.sub(o.c(pi_lo), p2)), p2)
        small_v = self._pio2_minus(o, o.copysign(p, x))
        return o.sel(big, big_v, small_v)

    # ---------------------------------------------------------------- hyperbolic
    def _odd_small(self, o: Ops, a, name: str):
        z = o.mul(a, a)
        return o.fma(o.mul(z, a), o.poly(z, name), a)

    def _sinh(self, o: Ops, x):
        a = o.fabs(x)
        h = self._exp_scaled(o, a, -1)                      # e^|x| / 2
        big = o.sub(h, o.div(o.c(0.25), h))
        r = o.sel(o.lt(a, o.c(1.0)), self._odd_small(o, a, "sinh"), big)
        return o.copysign(r, x)

    def _cosh(self, o: Ops, x):
        h = self._exp_scaled(o, o.fabs(x), -1)
        return o.add(h, o.div(o.c(0.25), h))

    def _tanh(self, o: Ops, x):
        a = o.fabs(x)
        e2 = self._exp_scaled(o, o.mul(a, o.c(2.0)))
        big = o.sub(o.c(1.0), o.div(o.c(2.0), o.add(e2, o.c(1.0))))
        r = o.sel(o.lt(a, o.c(0.625)), self._odd_small(o, a, "tanh"), big)
        return o.copysign(r, x)
