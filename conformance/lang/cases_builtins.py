"""Every scalar builtin of API.md, one construct each. The builtins share two kernels (one compile per
device); each construct checks and seeds only its own output column, so a failing builtin is named."""

import math

import numpy as np

import gradkit as gk
from gradkit.core.builtins import BUILTINS

from .harness import Case, In, Out, collect

N = 6

# name -> (NumPy reference, sampling domain), both the builtin's own declaration (core/builtins: `eval`,
# the semantics every backend must match, and `domain`); the kernel below applies them in this order, column k
UNARY_NAMES = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp", "log", "log2", "log10",
               "sqrt", "abs", "floor", "ceil", "round", "sign", "erf", "rsqrt")
UNARY = {name: (BUILTINS[name].eval, BUILTINS[name].domain[0]) for name in UNARY_NAMES}


@gk.kernel
def unary(x: gk.array(dtype=gk.float64, ndim=2), y: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    y[i, 0] = gk.sin(x[i, 0])
    y[i, 1] = gk.cos(x[i, 1])
    y[i, 2] = gk.tan(x[i, 2])
    y[i, 3] = gk.asin(x[i, 3])
    y[i, 4] = gk.acos(x[i, 4])
    y[i, 5] = gk.atan(x[i, 5])
    y[i, 6] = gk.sinh(x[i, 6])
    y[i, 7] = gk.cosh(x[i, 7])
    y[i, 8] = gk.tanh(x[i, 8])
    y[i, 9] = gk.exp(x[i, 9])
    y[i, 10] = gk.log(x[i, 10])
    y[i, 11] = gk.log2(x[i, 11])
    y[i, 12] = gk.log10(x[i, 12])
    y[i, 13] = gk.sqrt(x[i, 13])
    y[i, 14] = gk.abs(x[i, 14])
    y[i, 15] = gk.floor(x[i, 15])
    y[i, 16] = gk.ceil(x[i, 16])
    y[i, 17] = gk.round(x[i, 17])
    y[i, 18] = gk.sign(x[i, 18])
    y[i, 19] = gk.erf(x[i, 19])
    y[i, 20] = gk.rsqrt(x[i, 20])


def _unary_ref(x, y):
    return np.stack([f(x[:, k]) for k, (f, _) in enumerate(UNARY.values())], 1)


_K = len(UNARY)
UNARY_ARGS = [In((N, _K), lo=np.array([d[0] for _, d in UNARY.values()], float),
                 hi=np.array([d[1] for _, d in UNARY.values()], float)), Out((N, _K))]


@gk.kernel
def binary(a: gk.array(dtype=gk.float64), b: gk.array(dtype=gk.float64), c: gk.array(dtype=gk.float64),
           y: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    u = a[i]
    v = b[i]
    w = c[i]
    y[i, 0] = gk.atan2(u, v)
    y[i, 1] = gk.pow(v + 1.5, u)
    y[i, 2] = gk.min(u, v)
    y[i, 3] = gk.max(u, v)
    y[i, 4] = gk.clamp(u, -0.5, w)
    y[i, 5] = gk.select(u > v, u * 2.0, v * w)
    y[i, 6] = gk.where(u > v, u * 2.0, v * w)
    y[i, 7] = gk.min(u, 0.25) + gk.max(1.0 + w, v)


def _binary_ref(a, b, c, y):
    return np.stack([np.arctan2(a, b), (b + 1.5) ** a, np.minimum(a, b), np.maximum(a, b),
                     np.clip(a, -0.5, c), np.where(a > b, b * c, 2 * a), np.where(a > b, 2 * a, b * c),
                     np.minimum(a, 0.25) + np.maximum(1 + c, b)], 1)


BINARY_ARGS = [In((N,), lo=-1.0, hi=1.0), In((N,), lo=-1.0, hi=1.0), In((N,), lo=0.0, hi=0.8), Out((N, 8))]
BINARY_COLUMNS = {"atan2": 0, "pow": 1, "min": 2, "max": 3, "clamp": 4, "select": 5, "where": 6}


@gk.kernel
def atomics_add_sub(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(y, 0, x[i] * x[i])
    gk.atomic_sub(y, 1, gk.sin(x[i]))


@gk.kernel
def atomics_min_max(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_min(y, 0, x[i] * 2.0)
    gk.atomic_max(y, 1, x[i] * 3.0)


def _atomics_add_sub_ref(x, y):
    return y + [np.sum(x * x), -np.sum(np.sin(x))]


def _atomics_min_max_ref(x, y):
    return np.array([min(y[0], np.min(2 * x)), max(y[1], np.max(3 * x))])


# Documented limitation (docs/errors.md): which thread's tangent wins is only known after every thread ran.
MIN_MAX_REFUSAL = {"fwdmode": "forward mode cannot differentiate atomic_m"}


def _atomic_case(name: str, col: int) -> Case:
    kernel, ref = ((atomics_add_sub, _atomics_add_sub_ref) if name in ("atomic_add", "atomic_sub")
                   else (atomics_min_max, _atomics_min_max_ref))
    return Case(name, f"`gk.{name}(arr, index, value)` on a float64 array from many threads", kernel, N,
                [In((N,), lo=-1, hi=1), Out((2,), init=lambda r: np.array([0.5, -0.25]))],
                ref, pick={0: np.s_[col]}, refuses=MIN_MAX_REFUSAL if name in ("atomic_min", "atomic_max") else None)


def _unary_case(k: int, name: str) -> Case:
    zero = " (derivative 0)" if name in ("floor", "ceil", "round", "sign") else ""
    return Case(name, f"`gk.{name}`{zero}",
                unary, N, UNARY_ARGS, _unary_ref, pick={0: np.s_[:, k]})


CASES = collect("builtins", [
    *[_unary_case(k, name) for k, name in enumerate(UNARY)],
    *[Case(name, f"`gk.{name}`" + (" (Warp order: if false, if true)" if name == "select" else ""),
           binary, N, BINARY_ARGS, _binary_ref, pick={0: np.s_[:, col]})
      for name, col in BINARY_COLUMNS.items()],
    Case("min_max_constant", "`gk.min`/`gk.max` with a literal operand", binary, N, BINARY_ARGS, _binary_ref,
         pick={0: np.s_[:, 7]}),
    *[_atomic_case(name, col) for name, col in
      (("atomic_add", 0), ("atomic_sub", 1), ("atomic_min", 0), ("atomic_max", 1))],
])
