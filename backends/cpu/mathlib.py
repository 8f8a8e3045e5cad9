"""Math builtins for the CPU backend.

float32 sin, cos, exp and log (and log2/log10 from log) are inlineable LLVM IR
polynomials (Cephes-style range reduction and minimax coefficients) built only
from arithmetic, selects and bit casts, so the loop vectorizer turns them into
SIMD code. Measured max error against float64 NumPy on dense sweeps
(tests/backends/test_cpu_math.py): sin/cos ≤ 2 ULP for |x| ≤ 8192 and, beyond, exact argument
reduction in double (trig_reduction.py; under gk.config.fast_math only the first, which gives NaN
past 8192), exp ≤ 2 ULP, log ≤ 2 ULP on normal numbers. Everything else, and every float64 function,
calls the C library (correctly rounded to within 1 ULP, but scalar).
"""

from __future__ import annotations

import ctypes
import ctypes.util

import llvmlite.binding as llvm
from llvmlite import ir

from ...core.builtins import BUILTINS
from .trig_reduction import reduce

F32, F64, I32 = ir.FloatType(), ir.DoubleType(), ir.IntType(32)
_registered: set[str] = set()
_libm = None


def register_libm() -> None:
    """Make the C library's function of every builtin computed by one (`Builtin.cmath`) resolvable by
    JIT-compiled code; idempotent and cheap, so a builtin registered after import is picked up too."""
    global _libm
    missing = {e.cmath for e in BUILTINS.values() if e.cmath is not None} - _registered
    if not missing:
        return
    if _libm is None:
        _libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    for name in sorted(missing):
        llvm.add_symbol(name, ctypes.cast(getattr(_libm, name), ctypes.c_void_p).value)
        _registered.add(name)


def _arity(cname: str) -> int:
    return next(e.arity for e in BUILTINS.values() if e.cmath == cname)


def _poly(b: ir.IRBuilder, x, coeffs):
    """Horner evaluation of coeffs[0]*x^n + ... + coeffs[n]."""
    acc = ir.Constant(x.type, coeffs[0])
    for c in coeffs[1:]:
        acc = b.fadd(b.fmul(acc, x), ir.Constant(x.type, c))
    return acc


def _fabs(b, x):
    return b.bitcast(b.and_(b.bitcast(x, I32), ir.Constant(I32, 0x7FFFFFFF)), F32)


def _pow2i(b, n):
    """2**n as float32 for -126 <= n <= 127 (integer n)."""
    return b.bitcast(b.shl(b.add(n, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


# Past this many inlined float32 sin/cos/exp/log calls in one kernel the math functions are called instead
# of inlined (see MathLib): each inlined, vectorised sin/cos costs ~50 ms of LLVM time, so a straight-line
# body of 1000 of them took minutes to compile; called, they compile once per module.
INLINE_MATH_MAX = 16
POLY_FNS = ("sin", "cos", "exp", "log", "log2", "log10")


def _define(module: ir.Module, name: str, nargs: int = 1, inline: bool = True):
    fn = ir.Function(module, ir.FunctionType(F32, [F32] * nargs), name=name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline" if inline else "noinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, b


def _expf(module, inline=True):
    fn, b = _define(module, "gk_expf", inline=inline)
    (x0,) = fn.args
    c = lambda v: ir.Constant(F32, v)  # noqa: E731
    x = b.select(b.fcmp_ordered(">", x0, c(88.72283)), c(88.72283), x0)
    x = b.select(b.fcmp_ordered("<", x, c(-103.0)), c(-103.0), x)
    fx = b.call(module.declare_intrinsic("llvm.floor", [F32]), [b.fadd(b.fmul(x, c(1.44269504088896341)), c(0.5))])
    r = b.fsub(b.fsub(x, b.fmul(fx, c(0.693359375))), b.fmul(fx, c(-2.12194440e-4)))
    z = b.fmul(r, r)
    p = _poly(b, r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                     5.0000001201e-1])
    y = b.fadd(b.fadd(b.fmul(p, z), r), c(1.0))
    n = b.fptosi(fx, I32)
    n1 = b.ashr(n, ir.Constant(I32, 1))
    res = b.fmul(b.fmul(y, _pow2i(b, n1)), _pow2i(b, b.sub(n, n1)))
    res = b.select(b.fcmp_ordered(">", x0, c(88.72283)), c(float("inf")), res)
    res = b.select(b.fcmp_ordered("<", x0, c(-103.0)), c(0.0), res)
    res = b.select(b.fcmp_unordered("uno", x0, x0), x0, res)
    b.ret(res)
    return fn


def _logf(module, inline=True):
    fn, b = _define(module, "gk_logf", inline=inline)
    (x0,) = fn.args
    c = lambda v: ir.Constant(F32, v)  # noqa: E731
    i = lambda v: ir.Constant(I32, v)  # noqa: E731
    bits = b.bitcast(x0, I32)
    e = b.sub(b.and_(b.lshr(bits, i(23)), i(0xFF)), i(126))
    m = b.bitcast(b.or_(b.and_(bits, i(0x7FFFFF)), i(0x3F000000)), F32)
    small = b.fcmp_ordered("<", m, c(0.707106781186547524))
    e = b.select(small, b.sub(e, i(1)), e)
    m = b.select(small, b.fsub(b.fadd(m, m), c(1.0)), b.fsub(m, c(1.0)))
    z = b.fmul(m, m)
    p = _poly(b, m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                     -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
    y = b.fmul(b.fmul(p, m), z)
    ef = b.sitofp(e, F32)
    y = b.fadd(y, b.fmul(ef, c(-2.12194440e-4)))
    y = b.fsub(y, b.fmul(z, c(0.5)))
    res = b.fadd(b.fadd(m, y), b.fmul(ef, c(0.693359375)))
    res = b.select(b.fcmp_ordered("==", x0, c(0.0)), c(float("-inf")), res)
    res = b.select(b.fcmp_ordered("<", x0, c(0.0)), c(float("nan")), res)
    res = b.select(b.fcmp_ordered("==", x0, c(float("inf"))), x0, res)
    res = b.select(b.fcmp_unordered("uno", x0, x0), x0, res)
    b.ret(res)
    return fn


def _sin_poly(b, x, z):
    """sin x for |x| <= π/4 (z = x²), Cephes' float32 minimax coefficients."""
    return b.fadd(b.fmul(b.fmul(_poly(b, z, [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1]), z), x), x)


def _cos_poly(b, z):
    """cos x for |x| <= π/4 (z = x²)."""
    one, half = ir.Constant(F32, 1.0), ir.Constant(F32, 0.5)
    return b.fadd(b.fsub(b.fmul(b.fmul(_poly(b, z, [2.443315711809948e-5, -1.388731625493765e-3,
                                                    4.166664568298827e-2]), z), z), b.fmul(z, half)), one)


def _sincosf(module, want_sin: bool, wide: bool = True, inline: bool = True):
    """float32 sin or cos: Cephes' float32 reduction (2 ULP for |x| <= 8192) and, with `wide`, an exact
    reduction for larger |x| computed for every lane and selected (branchless, so loops stay SIMD; it costs
    a few times the polynomial path; gk.config.fast_math drops it)."""
    fn, b = _define(module, ("gk_sinf" if want_sin else "gk_cosf") + ("" if wide else "_fast"), inline=inline)
    (x0,) = fn.args
    c = lambda v: ir.Constant(F32, v)  # noqa: E731
    i = lambda v: ir.Constant(I32, v)  # noqa: E731
    x = _fabs(b, x0)
    j = b.fptosi(b.fmul(x, c(1.27323954473516)), I32)
    j = b.and_(b.add(j, i(1)), i(~1))
    y = b.sitofp(j, F32)
    x = b.fsub(b.fsub(b.fsub(x, b.fmul(y, c(0.78515625))), b.fmul(y, c(2.4187564849853515625e-4))),
               b.fmul(y, c(3.77489497744594108e-8)))
    j = b.and_(j, i(7))
    flip = b.icmp_signed(">", j, i(3))
    j = b.select(flip, b.sub(j, i(4)), j)
    z = b.fmul(x, x)
    cos_p, sin_p = _cos_poly(b, z), _sin_poly(b, x, z)
    if want_sin:
        use_cos = b.or_(b.icmp_signed("==", j, i(1)), b.icmp_signed("==", j, i(2)))
        r = b.select(use_cos, cos_p, sin_p)
        neg = b.xor(flip, b.fcmp_ordered("<", x0, c(0.0)))
    else:
        use_sin = b.or_(b.icmp_signed("==", j, i(1)), b.icmp_signed("==", j, i(2)))
        r = b.select(use_sin, sin_p, cos_p)
        neg = b.xor(flip, b.icmp_signed(">", j, i(1)))
    r = b.select(neg, b.fneg(r), r)
    if not wide:
        b.ret(r)
        return fn
    # Beyond |x| = 8192 the float32 reduction above loses the argument: reduce exactly in double
    # (trig_reduction.py), computed for every lane and selected, so loops stay vectorised.
    rb, q = reduce(module, b, x0)
    zb = b.fmul(rb, rb)
    sb, cb = _sin_poly(b, rb, zb), _cos_poly(b, zb)
    odd = b.icmp_signed("!=", b.and_(q, i(1)), i(0))
    if want_sin:        # sin(r + qπ/2) = sin r, cos r, -sin r, -cos r; sin is odd
        far = b.select(odd, cb, sb)
        fneg = b.xor(b.icmp_signed(">", q, i(1)), b.fcmp_ordered("<", x0, c(0.0)))
    else:               # cos(r + qπ/2) = cos r, -sin r, -cos r, sin r; cos is even
        far = b.select(odd, sb, cb)
        fneg = b.or_(b.icmp_signed("==", q, i(1)), b.icmp_signed("==", q, i(2)))
    far = b.select(fneg, b.fneg(far), far)
    ax = _fabs(b, x0)
    big = b.and_(b.fcmp_ordered(">", ax, c(8192.0)), b.fcmp_ordered("<", ax, c(float("inf"))))
    b.ret(b.select(big, far, r))
    return fn


class MathLib:
    """Per-module cache of math function declarations/definitions. With `inline` (kernels with at most
    INLINE_MATH_MAX float32 polynomial calls) the polynomials are inlined into the loop so it vectorises;
    otherwise each is one function the body calls (scalar, but the module compiles in time linear in its
    size)."""

    def __init__(self, module: ir.Module, fast_math: bool = False, inline: bool = True):
        self.module = module
        self.fast_math = fast_math      # float32 sin/cos then hold their bound for |x| <= 8192 only
        self.inline = inline
        self.fns: dict = {}

    def _libm(self, name: str):
        key = ("libm", name)
        if key not in self.fns:
            nargs = _arity(name)
            fn = ir.Function(self.module, ir.FunctionType(F64, [F64] * nargs), name=name)
            fn.attributes.add("nounwind")
            self.fns[key] = fn
        return self.fns[key]

    def _poly_fn(self, name: str):
        if name not in self.fns:
            wide, inline = not self.fast_math, self.inline
            builders = {"exp": _expf, "log": _logf, "sin": lambda m, inline: _sincosf(m, True, wide, inline),
                        "cos": lambda m, inline: _sincosf(m, False, wide, inline)}
            self.fns[name] = builders[name](self.module, inline=inline)
        return self.fns[name]

    def call(self, b: ir.IRBuilder, name: str, args: list):
        t = args[0].type
        if t == F32 and name in POLY_FNS[:4]:
            return b.call(self._poly_fn(name), args)
        if t == F32 and name in ("log2", "log10"):
            scale = 1.4426950408889634 if name == "log2" else 0.4342944819032518
            return b.fmul(b.call(self._poly_fn("log"), args), ir.Constant(F32, scale))
        if t == F32:
            wide = [b.fpext(a, F64) for a in args]
            return b.fptrunc(b.call(self._libm(name), wide), F32)
        return b.call(self._libm(name), args)
