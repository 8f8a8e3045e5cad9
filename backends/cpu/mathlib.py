"""Math builtins for the CPU backend.

float32 sin, cos, exp and log (and log2/log10 from log) are LLVM IR polynomials (Cephes-style range
reduction and minimax coefficients), built once for scalars and once per vector width: a kernel declares
them with their vector variants (LLVM's vector-function ABI), so loops that call them vectorise, and
they are defined and inlined after -O3 (`define_called`). Measured max error against float64 NumPy on
dense sweeps (tests/backends/test_cpu.py): sin/cos ≤ 2 ULP for |x| ≤ 8192 and, beyond, exact argument
reduction in double (trig_reduction.py), taken only by the vectors that hold such a lane (under
gk.config.fast_math only the first, which gives NaN past 8192), exp ≤ 2 ULP, log ≤ 2 ULP on normal
numbers. Everything else, and every float64 function, calls the C library (correctly rounded to within
1 ULP, but scalar).
"""

from __future__ import annotations

import functools
import re

from llvmlite import ir

from ...core.builtins import BUILTINS
from .irtext import replace_declarations
from .trig_reduction import reduce

F32, F64, I32, I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)


def _arity(cname: str) -> int:
    return next(e.arity for e in BUILTINS.values() if e.cmath == cname)


def _poly(b: ir.IRBuilder, x, coeffs):
    """Horner evaluation of coeffs[0]*x^n + ... + coeffs[n]."""
    acc = ir.Constant(x.type, coeffs[0])
    for c in coeffs[1:]:
        acc = b.fadd(b.fmul(acc, x), ir.Constant(x.type, c))
    return acc


class Lanes:
    """The types of one math function's body: scalars (width None) or vectors of `width` lanes, so one
    builder makes both the scalar function and the vector variants the loop vectorizer calls."""

    def __init__(self, module: ir.Module, width: int | None = None):
        self.module, self.width = module, width
        self.f32, self.f64, self.i32, self.i64 = (self.of(t) for t in (F32, F64, I32, I64))

    def of(self, t):
        return t if self.width is None else ir.VectorType(t, self.width)

    def intrinsic(self, name: str, t):
        """llvm.<name> of one argument of type `t` (llvmlite's declare_intrinsic knows no vector types)."""
        scalar = t if self.width is None else t.element
        suffix = {F32: "f32", F64: "f64"}[scalar]
        full = f"llvm.{name}." + (suffix if self.width is None else f"v{self.width}{suffix}")
        return self.module.globals.get(full) or ir.Function(self.module, ir.FunctionType(t, [t]), full)


def _fabs(b, L: Lanes, x):
    return b.bitcast(b.and_(b.bitcast(x, L.i32), ir.Constant(L.i32, 0x7FFFFFFF)), L.f32)


def _pow2i(b, L: Lanes, n):
    """2**n as float32 for -126 <= n <= 127 (integer n)."""
    return b.bitcast(b.shl(b.add(n, ir.Constant(L.i32, 127)), ir.Constant(L.i32, 23)), L.f32)


# Past this many float32 sin/cos/exp/log calls in one kernel the math functions are called instead of
# inlined (see MathLib): each inlined, vectorised sin/cos costs ~50 ms of LLVM time, so a straight-line
# body of 1000 of them took minutes to compile; called, they compile once per module.
INLINE_MATH_MAX = 16
POLY_FNS = ("sin", "cos", "exp", "log", "log2", "log10")
WIDTHS = (2, 4, 8, 16, 32)      # the vector variants offered to the loop vectorizer
FAR = 8192.0                    # sin/cos: past this |x| the float32 reduction loses the argument


def _expf(b, L: Lanes, x0):
    c = lambda v: ir.Constant(L.f32, v)  # noqa: E731
    x = b.select(b.fcmp_ordered(">", x0, c(88.72283)), c(88.72283), x0)
    x = b.select(b.fcmp_ordered("<", x, c(-103.0)), c(-103.0), x)
    fx = b.call(L.intrinsic("floor", L.f32), [b.fadd(b.fmul(x, c(1.44269504088896341)), c(0.5))])
    r = b.fsub(b.fsub(x, b.fmul(fx, c(0.693359375))), b.fmul(fx, c(-2.12194440e-4)))
    z = b.fmul(r, r)
    p = _poly(b, r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                     5.0000001201e-1])
    y = b.fadd(b.fadd(b.fmul(p, z), r), c(1.0))
    n = b.fptosi(fx, L.i32)
    n1 = b.ashr(n, ir.Constant(L.i32, 1))
    res = b.fmul(b.fmul(y, _pow2i(b, L, n1)), _pow2i(b, L, b.sub(n, n1)))
    res = b.select(b.fcmp_ordered(">", x0, c(88.72283)), c(float("inf")), res)
    res = b.select(b.fcmp_ordered("<", x0, c(-103.0)), c(0.0), res)
    return b.select(b.fcmp_unordered("uno", x0, x0), x0, res)


def _logf(b, L: Lanes, x0):
    c = lambda v: ir.Constant(L.f32, v)  # noqa: E731
    i = lambda v: ir.Constant(L.i32, v)  # noqa: E731
    bits = b.bitcast(x0, L.i32)
    e = b.sub(b.and_(b.lshr(bits, i(23)), i(0xFF)), i(126))
    m = b.bitcast(b.or_(b.and_(bits, i(0x7FFFFF)), i(0x3F000000)), L.f32)
    small = b.fcmp_ordered("<", m, c(0.707106781186547524))
    e = b.select(small, b.sub(e, i(1)), e)
    m = b.select(small, b.fsub(b.fadd(m, m), c(1.0)), b.fsub(m, c(1.0)))
    z = b.fmul(m, m)
    p = _poly(b, m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                     -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
    y = b.fmul(b.fmul(p, m), z)
    ef = b.sitofp(e, L.f32)
    y = b.fadd(y, b.fmul(ef, c(-2.12194440e-4)))
    y = b.fsub(y, b.fmul(z, c(0.5)))
    res = b.fadd(b.fadd(m, y), b.fmul(ef, c(0.693359375)))
    res = b.select(b.fcmp_ordered("==", x0, c(0.0)), c(float("-inf")), res)
    res = b.select(b.fcmp_ordered("<", x0, c(0.0)), c(float("nan")), res)
    res = b.select(b.fcmp_ordered("==", x0, c(float("inf"))), x0, res)
    return b.select(b.fcmp_unordered("uno", x0, x0), x0, res)


def _sin_poly(b, x, z):
    """sin x for |x| <= π/4 (z = x²), Cephes' float32 minimax coefficients."""
    return b.fadd(b.fmul(b.fmul(_poly(b, z, [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1]), z), x), x)


def _cos_poly(b, z):
    """cos x for |x| <= π/4 (z = x²)."""
    one, half = ir.Constant(z.type, 1.0), ir.Constant(z.type, 0.5)
    return b.fadd(b.fsub(b.fmul(b.fmul(_poly(b, z, [2.443315711809948e-5, -1.388731625493765e-3,
                                                    4.166664568298827e-2]), z), z), b.fmul(z, half)), one)


def _sincos_near(b, L: Lanes, x0, want_sin: bool):
    """float32 sin or cos by Cephes' float32 reduction: 2 ULP for |x| <= FAR."""
    c = lambda v: ir.Constant(L.f32, v)  # noqa: E731
    i = lambda v: ir.Constant(L.i32, v)  # noqa: E731
    x = _fabs(b, L, x0)
    j = b.fptosi(b.fmul(x, c(1.27323954473516)), L.i32)
    j = b.and_(b.add(j, i(1)), i(~1))
    y = b.sitofp(j, L.f32)
    x = b.fsub(b.fsub(b.fsub(x, b.fmul(y, c(0.78515625))), b.fmul(y, c(2.4187564849853515625e-4))),
               b.fmul(y, c(3.77489497744594108e-8)))
    j = b.and_(j, i(7))
    flip = b.icmp_signed(">", j, i(3))
    j = b.select(flip, b.sub(j, i(4)), j)
    z = b.fmul(x, x)
    cos_p, sin_p = _cos_poly(b, z), _sin_poly(b, x, z)
    swap = b.or_(b.icmp_signed("==", j, i(1)), b.icmp_signed("==", j, i(2)))
    if want_sin:
        r = b.select(swap, cos_p, sin_p)
        neg = b.xor(flip, b.fcmp_ordered("<", x0, c(0.0)))
    else:
        r = b.select(swap, sin_p, cos_p)
        neg = b.xor(flip, b.icmp_signed(">", j, i(1)))
    return b.select(neg, b.fneg(r), r)


def _sincos_far(b, L: Lanes, x0, want_sin: bool):
    """float32 sin or cos by the exact reduction in double (trig_reduction.py): 2 ULP for finite |x| > FAR."""
    c = lambda v: ir.Constant(L.f32, v)  # noqa: E731
    i = lambda v: ir.Constant(L.i32, v)  # noqa: E731
    rb, q = reduce(L, b, x0)
    zb = b.fmul(rb, rb)
    sb, cb = _sin_poly(b, rb, zb), _cos_poly(b, zb)
    odd = b.icmp_signed("!=", b.and_(q, i(1)), i(0))
    if want_sin:        # sin(r + qπ/2) = sin r, cos r, -sin r, -cos r; sin is odd
        far = b.select(odd, cb, sb)
        fneg = b.xor(b.icmp_signed(">", q, i(1)), b.fcmp_ordered("<", x0, c(0.0)))
    else:               # cos(r + qπ/2) = cos r, -sin r, -cos r, sin r; cos is even
        far = b.select(odd, sb, cb)
        fneg = b.or_(b.icmp_signed("==", q, i(1)), b.icmp_signed("==", q, i(2)))
    return b.select(fneg, b.fneg(far), far)


def _sincos(b, L: Lanes, x0, want_sin: bool, fn: ir.Function):
    """sin or cos for any finite x: the near reduction, and the far one only when a lane needs it — one
    well-predicted branch per call (per vector in vectorised loops), so the common case costs the
    polynomial alone (W1 forward: 17 -> ~3 ms, the far path computed and selected for every lane)."""
    near = _sincos_near(b, L, x0, want_sin)
    ax = _fabs(b, L, x0)
    c = lambda v: ir.Constant(L.f32, v)  # noqa: E731
    big = b.and_(b.fcmp_ordered(">", ax, c(FAR)), b.fcmp_ordered("<", ax, c(float("inf"))))
    anyb = big if L.width is None else b.icmp_unsigned("!=", b.bitcast(big, ir.IntType(L.width)),
                                                        ir.Constant(ir.IntType(L.width), 0))
    entry = b.block
    far_bb, done = fn.append_basic_block("far"), fn.append_basic_block("done")
    # Cold: LLVM then lays the loop out for the near path and keeps its spills in the far block.
    b.cbranch(anyb, far_bb, done).set_weights([1, 1 << 20])
    b.position_at_end(far_bb)
    far = b.select(big, _sincos_far(b, L, x0, want_sin), near)
    b.branch(done)
    b.position_at_end(done)
    out = b.phi(L.f32)
    out.add_incoming(near, entry)
    out.add_incoming(far, far_bb)
    return out


# -- the functions kernels call --------------------------------------------------------------------------
#
# A kernel's module declares each float32 math function it calls (gk_sinf, ...) with its vector variants
# (gk_sinf_v8, ...: LLVM's vector-function ABI), so the loop vectorizer keeps loops that call them SIMD
# without seeing their bodies, and -O3 works on a small function. After -O3, `define_called` puts in the
# definitions of what is called, scalar and vector, inlined (`alwaysinline`) unless the kernel has more
# than INLINE_MATH_MAX calls. Inlined after vectorisation, a sin/cos keeps its branch around the far
# reduction per vector instead of having it if-converted into every lane.

_NAME = re.compile(r"gk_(sin|cos|exp|log)f(_fast)?(_called)?(?:_v(\d+))?")


def math_name(fn: str, fast_math: bool, inline: bool) -> str:
    """The scalar function's name for builtin `fn` (sin, cos, exp, log)."""
    fast = "_fast" if fast_math and fn in ("sin", "cos") else ""
    return f"gk_{fn}f{fast}{'' if inline else '_called'}"


def declarations(names) -> str:
    """LLVM IR declaring the scalar functions `names` with their vector variants, kept alive for the
    vectorizer by llvm.compiler.used."""
    lines, used = [], []
    attrs = "nounwind willreturn memory(none)"
    for name in sorted(names):
        variants = ",".join(f"_ZGV_LLVM_N{w}v_{name}({name}_v{w})" for w in WIDTHS)
        lines.append(f'declare float @{name}(float) {attrs} "vector-function-abi-variant"="{variants}"')
        for w in WIDTHS:
            lines.append(f"declare <{w} x float> @{name}_v{w}(<{w} x float>) {attrs}")
            used.append(f"ptr @{name}_v{w}")
    if used:
        lines.append(f"@llvm.compiler.used = appending global [{len(used)} x ptr] [{', '.join(used)}], "
                     f'section "llvm.metadata"')
    return "\n".join(lines) + "\n"


@functools.cache
def definition(name: str) -> tuple[str, tuple[str, ...]]:
    """LLVM IR defining the math function `name` (scalar or a vector variant), internal, and the
    declarations of the intrinsics it calls."""
    m = _NAME.fullmatch(name)
    fn, fast, called, width = m.group(1), m.group(2), m.group(3), m.group(4)
    module = ir.Module()
    L = Lanes(module, int(width) if width else None)
    f = ir.Function(module, ir.FunctionType(L.f32, [L.f32]), name=name)
    f.linkage = "internal"
    f.attributes.add("noinline" if called else "alwaysinline")
    f.attributes.add("nounwind")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    (x,) = f.args
    if fn in ("sin", "cos"):
        want_sin = fn == "sin"
        r = _sincos_near(b, L, x, want_sin) if fast else _sincos(b, L, x, want_sin, f)
    else:
        r = (_expf if fn == "exp" else _logf)(b, L, x)
    b.ret(r)
    text = str(module)
    for k, node in re.findall(r"^!(\d+) = (!\{[^\n]*\})$", text, re.M):  # the far branch's weights: inline
        text = re.sub(rf"!prof !{k}\b", f"!prof {node}", text)                # them, the body moves modules
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("define "))
    end = lines.index("}", start)
    intrinsics = tuple(line for line in lines if line.startswith("declare "))
    return "\n".join(lines[start:end + 1]), intrinsics


_CALLED = re.compile(r'^(?!declare)[^\n]*call [^\n]*@"?(gk_(?:sin|cos|exp|log)f\w*)"?\(', re.M)
_USED = re.compile(r'^@llvm\.compiler\.used = [^\n]*$\n?', re.M)


def define_called(text: str) -> str:
    """The module text with the math functions it calls defined (and llvm.compiler.used, which only kept
    their vector variants declared for the vectorizer, dropped); `text` itself when it calls none."""
    names = set(_CALLED.findall(text))
    if not names:
        return text
    text = _USED.sub("", text)
    defs = {n: definition(n) for n in sorted(names)}
    text = replace_declarations(text, {n: body for n, (body, _) in defs.items()})
    intrinsics = {line for _, decls in defs.values() for line in decls}
    missing = [line for line in sorted(intrinsics)
               if not re.search(rf'^declare [^\n]*@"?{re.escape(_declared_name(line))}"?\(', text, re.M)]
    return text + "\n" + "\n".join(missing) + "\n" if missing else text


def _declared_name(line: str) -> str:
    return re.search(r'@"?([\w.]+)"?\(', line).group(1)


class MathLib:
    """The math functions one kernel module calls: C library declarations, and the float32 polynomials
    declared with their vector variants (`declarations`, placed by `declare`; defined after -O3 by
    `define_called`). With `inline` (kernels with at most INLINE_MATH_MAX float32 polynomial calls) the
    definitions are inlined; otherwise each is one function the body calls (the module then compiles in time
    linear in its size)."""

    def __init__(self, module: ir.Module, fast_math: bool = False, inline: bool = True):
        self.module = module
        self.fast_math = fast_math      # float32 sin/cos then hold their bound for |x| <= 8192 only
        self.inline = inline
        self.fns: dict = {}
        self.declared: set[str] = set()   # scalar polynomial functions, declared with their vector variants

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
            full = math_name(name, self.fast_math, self.inline)
            self.fns[name] = ir.Function(self.module, ir.FunctionType(F32, [F32]), name=full)
            self.declared.add(full)
        return self.fns[name]

    def declare(self, text: str) -> str:
        """The module text with the polynomials' declarations carrying their vector variants."""
        if not self.declared:
            return text
        return replace_declarations(text, dict.fromkeys(self.declared, "")) + "\n" + declarations(self.declared)

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
