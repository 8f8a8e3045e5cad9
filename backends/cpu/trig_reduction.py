"""Argument reduction of float32 sin/cos for any finite |x|, in scalar or vector LLVM IR (no calls, branches or
table loads).

A float32 x is M·2^e with M a 24-bit integer; writing e + 10 = 24a + b (0 <= b < 24) and M·2^b = N1·2^24 + N0
(both below 2^24), x = N1·2^(24(a+1) - 10) + N0·2^(24a - 10). Six constants U_a = 2^(24a - 10) mod 2π, each
split into three doubles (26, 27 and 53 significant bits, from π to 240 digits), make both products exact;
each is reduced by π/2 in double with a three-part Cody–Waite split, and their sum once more. What comes out
is the float32 remainder r in [-π/4, π/4] and the quadrant q (|x| = r + q·π/2 modulo 2π); the caller
evaluates its polynomials on r."""

from __future__ import annotations

import functools
from decimal import Decimal, getcontext

from llvmlite import ir

E_MIN, E_MAX = -10, 104          # x = M·2^e: |x| > 8192 has e >= -10; the largest float32 has e = 104
BLOCKS = (E_MAX - E_MIN) // 24 + 2   # U_0 .. U_5


def _pi(digits: int = 240) -> Decimal:
    """π by Machin's formula, 16·atan(1/5) - 4·atan(1/239), to `digits` digits."""
    getcontext().prec = digits + 10

    def atan_inv(n: int) -> Decimal:
        x, total, k, sign = Decimal(1) / n, Decimal(0), 1, 1
        term = x
        while term > Decimal(10) ** -(digits + 5):
            total += sign * term / k
            x /= n * n
            term, k, sign = x, k + 2, -sign
        return total
    return 16 * atan_inv(5) - 4 * atan_inv(239)


def _bits(v: Decimal, bits: int) -> float:
    """v truncated to its leading `bits` significant bits (exact as a double)."""
    if v == 0:
        return 0.0
    e = int(v.copy_abs().ln() / Decimal(2).ln()) + 1         # 2^(e-1) <= |v| < 2^e, give or take one
    scale = Decimal(2) ** (bits - e)
    return float(Decimal(int(v * scale)) / scale)


@functools.cache
def constants() -> tuple[list[tuple[float, float, float]], tuple[float, float, float], float]:
    """(U_a = 2^(24a + E_MIN) mod 2π as (hi, mid, lo) for a < BLOCKS, the three-part π/2, 2/π)."""
    pi = _pi()
    two_pi = 2 * pi
    blocks = []
    for a in range(BLOCKS):
        v = (Decimal(2) ** (24 * a + E_MIN)) % two_pi
        h = _bits(v, 26)
        m = _bits(v - Decimal(h), 27)
        blocks.append((h, m, float(v - Decimal(h) - Decimal(m))))
    half = pi / 2
    p1 = float(Decimal(int(half * 2 ** 26)) / 2 ** 26)              # 27 bits: k·p1 exact for k < 2^26
    p2 = float(Decimal(int((half - Decimal(p1)) * 2 ** 53)) / 2 ** 53)
    p3 = float(half - Decimal(p1) - Decimal(p2))
    return blocks, (p1, p2, p3), float(2 / pi)


def reduce(L, b: ir.IRBuilder, x0) -> tuple:
    """(r, q): float32 r in [-π/4, π/4] and int32 quadrant q in 0..3 with |x0| = r + q·π/2 (mod 2π), of the
    scalar or vector types of `L` (mathlib.Lanes). Meaningful for finite |x0| >= 2^(E_MIN + 23); other lanes
    get some finite r (callers select them away)."""
    blocks, (p1, p2, p3), two_over_pi = constants()
    i = lambda v: ir.Constant(L.i32, v)  # noqa: E731
    d = lambda v: ir.Constant(L.f64, v)  # noqa: E731
    rint = L.intrinsic("rint", L.f64)
    bits = b.bitcast(x0, L.i32)
    idx = b.sub(b.and_(b.lshr(bits, i(23)), i(0xFF)), i(150 + E_MIN))          # e - E_MIN
    idx = b.select(b.icmp_signed("<", idx, i(0)), i(0), idx)
    idx = b.select(b.icmp_signed(">", idx, i(E_MAX - E_MIN)), i(E_MAX - E_MIN), idx)
    a = b.udiv(idx, i(24))
    shift = b.zext(b.sub(idx, b.mul(a, i(24))), L.i64)
    n = b.shl(b.zext(b.or_(b.and_(bits, i(0x7FFFFF)), i(0x800000)), L.i64), shift)   # M·2^b < 2^47
    n0 = b.sitofp(b.and_(n, ir.Constant(L.i64, 0xFFFFFF)), L.f64)
    n1 = b.sitofp(b.lshr(n, ir.Constant(L.i64, 24)), L.f64)

    def block(k):
        """U_k's three parts, chosen by compares and selects (no table load)."""
        parts = [d(v) for v in blocks[0]]
        for j in range(1, BLOCKS):
            hit = b.icmp_signed("==", k, i(j))
            parts = [b.select(hit, d(v), p) for v, p in zip(blocks[j], parts)]
        return parts

    def reduced(v):
        """(v - k·π/2, k) for a double v below 2^26·π/2."""
        k = b.call(rint, [b.fmul(v, d(two_over_pi))])
        return b.fsub(b.fsub(b.fsub(v, b.fmul(k, d(p1))), b.fmul(k, d(p2))), b.fmul(k, d(p3))), k

    terms, quads = [], []
    for count, k in ((n1, b.add(a, i(1))), (n0, a)):
        hi, mid, lo = block(k)
        r, q = reduced(b.fmul(count, hi))                # exact product: 24 × 26 bits
        terms += [r, b.fmul(count, mid), b.fmul(count, lo)]
        quads.append(q)
    total = terms[0]
    for t in terms[1:]:
        total = b.fadd(total, t)
    r, q = reduced(total)
    quad = b.fadd(b.fadd(quads[0], quads[1]), q)
    return b.fptrunc(r, L.f32), b.and_(b.fptosi(quad, L.i32), i(3))
