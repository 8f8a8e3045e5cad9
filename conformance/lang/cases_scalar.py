"""Scalar expressions of the language: arithmetic operators (float and int), comparisons, boolean logic,
conditional expressions, augmented assignment on locals, casts, and a float32 variant."""

import numpy as np

import gradkit as gk

from .harness import Case, Const, In, Out, collect

A1 = gk.array(dtype=gk.float64)
A2 = gk.array(dtype=gk.float64, ndim=2)
N = 6


@gk.kernel
def arith(a: A1, b: A1, y: A2):
    i = gk.tid()
    u = a[i]
    v = b[i]
    y[i, 0] = u + v
    y[i, 1] = u - v
    y[i, 2] = u * v
    y[i, 3] = u / v
    y[i, 4] = -u + 2.0
    y[i, 5] = u ** 2 + v ** 3.0
    y[i, 6] = v ** u + u ** 0.5
    y[i, 7] = (u * 3.0) // v + u
    y[i, 8] = (u * 3.0) % v
    y[i, 9] = (-u * 3.0) % v + (-u * 3.0) // v


def _arith_ref(a, b, y):
    y = np.stack([a + b, a - b, a * b, a / b, -a + 2, a ** 2 + b ** 3, b ** a + a ** 0.5,
                  np.floor_divide(3 * a, b) + a, np.mod(3 * a, b),
                  np.mod(-3 * a, b) + np.floor_divide(-3 * a, b)], 1)
    return y


ARITH_ARGS = [In((N,), lo=0.2, hi=2.0), In((N,), lo=0.5, hi=1.5), Out((N, 10))]


@gk.kernel
def int_arith(a: gk.array(dtype=int), b: gk.array(dtype=int), y: gk.array(dtype=int, ndim=2)):
    i = gk.tid()
    u = a[i]
    v = b[i]
    y[i, 0] = u + v
    y[i, 1] = u - v
    y[i, 2] = u * v
    y[i, 3] = u // v
    y[i, 4] = u % v
    y[i, 5] = -u
    y[i, 6] = u ** 2
    y[i, 7] = (u + i) * 3 - v // 2


def _int_arith_ref(a, b, y):
    i = np.arange(len(a))
    return np.stack([a + b, a - b, a * b, a // b, a % b, -a, a ** 2, (a + i) * 3 - b // 2], 1)


@gk.kernel(remainder="truncated")
def c_int_arith(a: gk.array(dtype=int), b: gk.array(dtype=int), y: gk.array(dtype=int, ndim=2)):
    i = gk.tid()
    u = a[i]
    v = b[i]
    y[i, 0] = u / v
    y[i, 1] = u % v
    y[i, 2] = u // v
    w = u
    w /= v
    y[i, 3] = w


def _c_int_arith_ref(a, b, y):
    q = np.trunc(a / b)
    return np.stack([q, a - q * b, np.floor_divide(a, b), q], 1)


@gk.kernel(remainder="truncated")
def c_float_rem(a: A1, b: A1, y: A1):
    i = gk.tid()
    y[i] = (a[i] * 3.0) % b[i] + (-a[i] * 3.0) % b[i] * 0.5


def _c_float_rem_ref(a, b, y):
    return np.fmod(3 * a, b) + 0.5 * np.fmod(-3 * a, b)


def _nonzero_ints(rng):
    v = rng.integers(1, 7, N) * rng.choice([-1, 1], N)
    return v


@gk.kernel
def compare(a: A1, b: A1, k: gk.array(dtype=int), y: A2):
    i = gk.tid()
    u = a[i]
    v = b[i]
    y[i, 0] = u if u < v else 2.0 * v
    y[i, 1] = u if u <= v else 2.0 * v
    y[i, 2] = u if u > v else 2.0 * v
    y[i, 3] = u if u >= v else 2.0 * v
    y[i, 4] = u * 3.0 if k[i] == 2 else v
    y[i, 5] = u * 3.0 if k[i] != 2 else v
    y[i, 6] = u * v if -0.5 < u < v else u - v
    y[i, 7] = u + 1.0 if u == u else v


def _compare_ref(a, b, k, y):
    return np.stack([np.where(a < b, a, 2 * b), np.where(a <= b, a, 2 * b), np.where(a > b, a, 2 * b),
                     np.where(a >= b, a, 2 * b), np.where(k == 2, 3 * a, b), np.where(k != 2, 3 * a, b),
                     np.where((-0.5 < a) & (a < b), a * b, a - b), a + 1], 1)


@gk.kernel
def logic(a: A1, b: A1, y: A2):
    i = gk.tid()
    u = a[i]
    v = b[i]
    p = u > 0.0
    q = v > 0.0
    y[i, 0] = u if p and q else v
    y[i, 1] = u if p or q else v
    y[i, 2] = u if not p else v
    y[i, 3] = u * v if (p and not q) or (q and not p) else u + v
    y[i, 4] = u if not (u > 0.5 or v < -0.5) and u < v else -v


def _logic_ref(a, b, y):
    p, q = a > 0, b > 0
    return np.stack([np.where(p & q, a, b), np.where(p | q, a, b), np.where(~p, a, b),
                     np.where(p ^ q, a * b, a + b), np.where(~((a > 0.5) | (b < -0.5)) & (a < b), a, -b)], 1)


@gk.kernel
def cond_expr(a: A1, y: A1):
    i = gk.tid()
    u = a[i]
    w = u * u if u > 0.0 else gk.sin(u)
    y[i] = (w * 2.0 if w > 0.3 else w - 1.0) if u > -0.5 else gk.exp(u)


def _cond_expr_ref(a, y):
    w = np.where(a > 0, a * a, np.sin(a))
    return np.where(a > -0.5, np.where(w > 0.3, 2 * w, w - 1), np.exp(a))


@gk.kernel
def if_elif_else(a: A1, b: A1, y: A1):
    i = gk.tid()
    u = a[i]
    r = 0.0
    if u < -0.3:
        r = u * u
        s = 1.0
    elif u < 0.3:
        r = gk.sin(u) + b[i]
        s = 2.0
    else:
        s = 3.0
        if b[i] > 0.0:
            r = u * b[i]
        else:
            r = u - b[i]
    y[i] = r * s


def _if_ref(a, b, y):
    return np.where(a < -0.3, a * a, np.where(a < 0.3, 2 * (np.sin(a) + b),
                                              3 * np.where(b > 0, a * b, a - b)))


@gk.kernel
def local_augassign(a: A1, y: A1):
    i = gk.tid()
    z = a[i]
    z += 1.5
    z *= a[i]
    z -= 0.25
    z /= 2.0 + a[i] * a[i]
    z **= 2
    y[i] = z


def _augassign_ref(a, y):
    return (((a + 1.5) * a - 0.25) / (2 + a * a)) ** 2


@gk.kernel
def casts(a: A1, y: A2, yi: gk.array(dtype=int, ndim=2)):
    i = gk.tid()
    u = a[i]
    y[i, 0] = gk.float64(gk.float32(u)) * 2.0
    y[i, 1] = gk.float32(u) + gk.float64(i)     # float(u) would be a weak float32 (docs/api/types.rst)
    y[i, 2] = gk.float64(int(u * 10.0)) + u
    yi[i, 0] = gk.int32(u * 10.0)
    yi[i, 1] = int(u * -10.0)


def _casts_ref(a, y, yi):
    # float32 rounding is left out of the reference (a staircase has no useful finite differences): the
    # value tolerance of this case covers it, the derivative of a float cast is 1
    return (np.stack([2 * a, a + np.arange(len(a)), np.trunc(a * 10) + a], 1),
            np.stack([np.trunc(a * 10), np.trunc(-a * 10)], 1))


@gk.kernel
def arith32(a: gk.array(dtype=float), b: gk.array(dtype=float), y: gk.array(dtype=float, ndim=2)):
    i = gk.tid()
    u = a[i]
    v = b[i]
    y[i, 0] = u * v - u / v
    y[i, 1] = -u ** 2 + v ** 0.5
    y[i, 2] = u if u > v else v * 2.0
    z = u
    z *= v
    z += 1.0
    y[i, 3] = z


def _arith32_ref(a, b, y):
    z = a * b + 1
    return np.stack([a * b - a / b, -a ** 2 + b ** 0.5, np.where(a > b, a, 2 * b), z], 1)


CASES = collect("scalar", [
    Case("add_sub_mul_div", "`+ - * /` and unary `-` on float64", arith, N, ARITH_ARGS, _arith_ref,
         pick={0: np.s_[:, 0:5]}),
    Case("pow_operator", "`**` with int and float exponents, variable base and exponent", arith, N,
         ARITH_ARGS, _arith_ref, pick={0: np.s_[:, 5:7]}),
    Case("floordiv_mod_float", "`//` and `%` on floats (Python floor semantics, negative operands)", arith, N,
         ARITH_ARGS, _arith_ref, pick={0: np.s_[:, 7:10]}),
    Case("int_arith", "`+ - * // % **` and unary `-` on int32, negative operands", int_arith, N,
         [Const(lambda r: r.integers(-20, 20, N)), Const(_nonzero_ints), Out((N, 8), gk.int32)],
         _int_arith_ref, diff=False),
    Case("c_int_arith", "`remainder=\"truncated\"` (Warp's kernels): int `/` and `%` truncate as C's, `//` floors, "
         "`/=`", c_int_arith, N,
         [Const(lambda r: r.integers(-20, 20, N)), Const(_nonzero_ints), Out((N, 4), gk.int32)],
         _c_int_arith_ref, diff=False),
    Case("c_float_rem", "`remainder=\"truncated\"`: float `%` is C's fmod (the dividend's sign)", c_float_rem, N,
         [In((N,), lo=0.2, hi=2.0), In((N,), lo=0.5, hi=1.5), Out((N,))], _c_float_rem_ref),
    Case("comparisons", "`< <= > >= == !=` and chained `a < b < c` (float and int)", compare, N,
         [In((N,)), In((N,)), Const(lambda r: r.integers(0, 4, N)), Out((N, 8))], _compare_ref),
    Case("bool_logic", "`and`, `or`, `not` on comparison results", logic, N,
         [In((N,)), In((N,)), Out((N, 5))], _logic_ref),
    Case("cond_expr", "conditional expressions `a if c else b`, nested", cond_expr, N,
         [In((N,)), Out((N,))], _cond_expr_ref),
    Case("if_elif_else", "`if/elif/else` with locals assigned in branches, nested `if`", if_elif_else, N,
         [In((N,)), In((N,)), Out((N,))], _if_ref),
    Case("local_augassign", "`+= -= *= /= **=` on locals", local_augassign, N,
         [In((N,)), Out((N,))], _augassign_ref),
    Case("casts", "`gk.float32(x)`, `gk.float64(x)`, `float(x)`, `int(x)`, `gk.int32(x)`", casts, N,
         [In((N,), lo=-2, hi=2), Out((N, 3)), Out((N, 2), gk.int32)], _casts_ref,
         tol=dict(rtol=1e-6, atol=1e-7)),
    Case("float32_arith", "float32 arithmetic, `**`, comparison and local augmented assignment", arith32, N,
         [In((N,), gk.float32, 0.2, 2.0), In((N,), gk.float32, 0.5, 1.5), Out((N, 4), gk.float32)],
         _arith32_ref, eps=1e-5),
])
