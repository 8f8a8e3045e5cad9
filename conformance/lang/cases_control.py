"""Control flow of the language: `for` over every `range` form and `reversed`, nested loops with dynamic
bounds, `while`, `break`, `continue`, locals carried through loops, `@gk.func` calls with early returns
and tuple returns, `gk.static` unrolling and module constants."""

import numpy as np

import gradkit as gk

from .harness import Case, In, Out, Scalar, collect

A1 = gk.array(dtype=gk.float64)
A2 = gk.array(dtype=gk.float64, ndim=2)
N = 5          # threads
M = 7          # length of the table the loops walk

SCALE = 1.5                   # module constants fold at compile time
WEIGHTS = (0.5, -1.0, 2.0)
USE_SIN = True


@gk.kernel
def ranges(a: A1, x: A1, y: A2, n: int, lo: int, hi: int):
    i = gk.tid()
    u = a[i]
    acc = 0.0
    for j in range(n):
        acc = acc * u + x[j]
    y[i, 0] = acc
    acc = 0.0
    for j in range(lo, hi):
        acc = acc * u + x[j]
    y[i, 1] = acc
    acc = 0.0
    for j in range(lo, n, 2):
        acc = acc * u + x[j]
    y[i, 2] = acc
    acc = 0.0
    for j in range(n - 1, lo - 1, -2):
        acc = acc * u + x[j]
    y[i, 3] = acc
    acc = 0.0
    for j in range(hi, lo):            # empty
        acc = acc + x[j]
    y[i, 4] = acc + u


def _horner(u, coeffs):
    acc = np.zeros_like(u)
    for c in coeffs:
        acc = acc * u + c
    return acc


def _ranges_ref(a, x, y, n, lo, hi):
    return np.stack([_horner(a, x[:n]), _horner(a, x[lo:hi]), _horner(a, x[lo:n:2]),
                     _horner(a, x[n - 1:lo - 1:-2] if lo > 0 else x[n - 1::-2]), a], 1)


RANGE_ARGS = [In((N,)), In((M,)), Out((N, 5)), Scalar(M), Scalar(2), Scalar(6)]


@gk.kernel
def reversed_range(a: A1, x: A1, y: A1, n: int):
    i = gk.tid()
    acc = 0.0
    for j in reversed(range(n)):
        acc = acc * a[i] + x[j]
    for j in reversed(range(1, n, 3)):
        acc = acc * 0.5 + x[j] * x[j]
    y[i] = acc


def _reversed_ref(a, x, y, n):
    acc = _horner(a, x[:n][::-1])
    for j in list(range(1, n, 3))[::-1]:
        acc = acc * 0.5 + x[j] ** 2
    return acc


@gk.kernel
def nested(a: A1, x: A1, y: A1, n: int, m: int):
    i = gk.tid()
    acc = 0.0
    for j in range(n):
        for k in range(j):
            acc += x[j] * x[k] * a[i]
        for k in range(j, m):
            acc = acc * 0.5 + x[k]
    y[i] = acc


def _nested_ref(a, x, y, n, m):
    acc = np.zeros_like(a)
    for j in range(n):
        for k in range(j):
            acc = acc + x[j] * x[k] * a
        for k in range(j, m):
            acc = acc * 0.5 + x[k]
    return acc


@gk.kernel
def while_loop(a: A1, y: A2, n: int):
    i = gk.tid()
    u = a[i]
    k = 0
    acc = 1.0
    while k < n:
        acc = acc * u + 1.0
        k += 1
    y[i, 0] = acc
    w = u
    steps = 0
    while w < 3.0 and steps < 20:
        w = w * 1.5 + 0.25
        steps += 1
    y[i, 1] = w + float(steps)


def _while_ref(a, y, n):
    acc = np.ones_like(a)
    for _ in range(n):
        acc = acc * a + 1
    out2 = []
    for u in a:
        w, steps = u, 0
        while w < 3.0 and steps < 20:
            w, steps = w * 1.5 + 0.25, steps + 1
        out2.append(w + steps)
    return np.stack([acc, out2], 1)


@gk.kernel
def while_one_float(a: A1, y: A1):
    i = gk.tid()
    w = a[i]
    while w < 3.0:
        w = w * w + 0.5
    y[i] = w


def _while_one_float_ref(a, y):
    out = []
    for w in a:
        while w < 3.0:
            w = w * w + 0.5
        out.append(w)
    return np.array(out)


@gk.kernel
def break_continue(a: A1, x: A1, y: A2, n: int):
    i = gk.tid()
    u = a[i]
    acc = 0.0
    for j in range(n):
        acc += x[j] * u
        if acc > 0.8:
            break
    y[i, 0] = acc
    acc = 0.0
    for j in range(n):
        if x[j] < 0.0:
            continue
        acc = acc * u + x[j]
    y[i, 1] = acc
    acc = 0.0
    k = 0
    while k < n:
        k += 1
        if x[k - 1] * u > 0.5:
            continue
        acc = acc + x[k - 1] * u
        if acc < -1.0:
            break
    y[i, 2] = acc


def _break_continue_ref(a, x, y, n):
    rows = []
    for u in a:
        acc = 0.0
        for j in range(n):
            acc += x[j] * u
            if acc > 0.8:
                break
        c0 = acc
        acc = 0.0
        for j in range(n):
            if x[j] < 0:
                continue
            acc = acc * u + x[j]
        c1 = acc
        acc, k = 0.0, 0
        while k < n:
            k += 1
            if x[k - 1] * u > 0.5:
                continue
            acc = acc + x[k - 1] * u
            if acc < -1.0:
                break
        rows.append([c0, c1, acc])
    return np.array(rows)


@gk.kernel
def carried_locals(a: A1, x: A1, y: A2, n: int, m: int):
    i = gk.tid()
    u = a[i]
    p = 1.0
    q = u
    for j in range(n):
        t = p
        p = q
        q = t + q * x[j]          # three locals re-assigned each trip
        if q > 2.0:
            q = q * 0.5
    y[i, 0] = p + q
    total = 0.0
    for j in range(n):
        s = x[j]                  # created in the outer loop ...
        for k in range(m):
            s = s * u + 0.5       # ... updated in the inner one
        total += s
    y[i, 1] = total


def _carried_ref(a, x, y, n, m):
    rows = []
    for u in a:
        p, q = 1.0, u
        for j in range(n):
            p, q = q, p + q * x[j]
            if q > 2:
                q *= 0.5
        total = 0.0
        for j in range(n):
            s = x[j]
            for _ in range(m):
                s = s * u + 0.5
            total += s
        rows.append([p + q, total])
    return np.array(rows)


@gk.func
def clipped_power(u: gk.float64, n: int) -> gk.float64:
    if u < -0.5:
        return -u
    acc = 1.0
    for k in range(n):
        acc = acc * u
        if acc > 0.3:
            return acc + 1.0
    return acc


@gk.kernel
def early_return(a: A1, y: A1, n: int):
    i = gk.tid()
    y[i] = clipped_power(a[i] * 1.5, n)


def _early_ref(a, y, n):
    out = []
    for u in a * 1.5:
        if u < -0.5:
            out.append(-u)
            continue
        acc, r = 1.0, None
        for _ in range(n):
            acc *= u
            if acc > 0.3:
                r = acc + 1
                break
        out.append(acc if r is None else r)
    return np.array(out)


@gk.func
def polar(r: gk.float64, t: gk.float64) -> tuple[gk.float64, gk.float64]:
    return r * gk.cos(t), r * gk.sin(t)


@gk.func
def twice(u: gk.float64) -> gk.float64:
    x, z = polar(u, u * 2.0)
    return x * z + u


@gk.kernel
def func_calls(a: A1, b: A1, y: A2):
    i = gk.tid()
    p, q = polar(a[i], b[i])
    y[i, 0] = p
    y[i, 1] = q
    y[i, 2] = twice(p)


def _func_ref(a, b, y):
    p, q = a * np.cos(b), a * np.sin(b)
    return np.stack([p, q, p * np.cos(2 * p) * p * np.sin(2 * p) + p], 1)


@gk.kernel
def static_constants(a: A1, y: A2):
    i = gk.tid()
    u = a[i]
    acc = 0.0
    for k in gk.static(range(4)):
        acc += float(k + 1) * gk.sin(u * float(k))
    y[i, 0] = acc * gk.static(2.0 ** 3)
    t = 0.0
    for w in gk.static(WEIGHTS):
        t = t * u + w
    y[i, 1] = t * SCALE + float(gk.static(len(WEIGHTS)))
    y[i, 2] = gk.sin(u) if USE_SIN else gk.cos(u)


def _static_ref(a, y):
    acc = sum((k + 1) * np.sin(a * k) for k in range(4))
    return np.stack([8 * acc, _horner(a, WEIGHTS) * SCALE + 3, np.sin(a)], 1)


CASES = collect("control", [
    Case("for_range_n", "`for j in range(n)` with a carried local", ranges, N, RANGE_ARGS, _ranges_ref,
         pick={0: np.s_[:, 0]}),
    Case("for_range_a_b", "`for j in range(a, b)`, and an empty range", ranges, N, RANGE_ARGS, _ranges_ref,
         pick={0: np.s_[:, [1, 4]]}),
    Case("for_range_step", "`for j in range(a, b, 2)`", ranges, N, RANGE_ARGS, _ranges_ref,
         pick={0: np.s_[:, 2]}),
    Case("for_range_negative_step", "`for j in range(b, a, -2)`", ranges, N, RANGE_ARGS, _ranges_ref,
         pick={0: np.s_[:, 3]}),
    Case("for_reversed", "`for j in reversed(range(...))` (1 and 3 arguments)", reversed_range, N,
         [In((N,)), In((M,)), Out((N,)), Scalar(M)], _reversed_ref),
    Case("nested_loops", "nested `for`, inner bounds from int args and the outer loop variable", nested, N,
         [In((N,)), In((M,)), Out((N,)), Scalar(5), Scalar(M)], _nested_ref),
    Case("while", "`while` with a counter, and with a data-dependent condition", while_loop, N,
         [In((N,), lo=0.3, hi=1.5), Out((N, 2)), Scalar(4)], _while_ref),
    Case("while_one_float", "`while` whose only carried local is one float (no counter beside it)",
         while_one_float, N, [In((N,), lo=0.3, hi=1.5), Out((N,))], _while_one_float_ref),
    Case("break_continue", "`break` and `continue` in `for` and `while`", break_continue, N,
         [In((N,)), In((M,)), Out((N, 3)), Scalar(M)], _break_continue_ref),
    Case("locals_in_loops", "locals re-assigned in loops; a local created in an outer loop, updated in an "
         "inner one", carried_locals, N, [In((N,)), In((M,)), Out((N, 2)), Scalar(M), Scalar(3)],
         _carried_ref),
    Case("func_early_return", "`@gk.func` with `return` inside `if` and inside a loop", early_return, N,
         [In((N,)), Out((N,)), Scalar(4)], _early_ref),
    Case("func_tuple_return", "`@gk.func` returning a tuple, unpacked; a func calling a func", func_calls, N,
         [In((N,)), In((N,), lo=-3, hi=3), Out((N, 3))], _func_ref),
    Case("static_and_constants", "`gk.static(range(4))` unrolling, `gk.static(expr)`, module constants "
         "(float, tuple, bool)", static_constants, N, [In((N,)), Out((N, 3))], _static_ref),
])
