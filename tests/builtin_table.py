"""The builtins as one test table: NumPy float64 reference and analytic derivative(s), written here
independently of the builtins table; the sampling domain is the builtin's own (`Builtin.domain`).

Shared by the forward-value tests (tests/core) and the gradient tests (tests/ad).
"""

import math

import numpy as np

import gradkit as gk
from gradkit.core.builtins import BUILTINS


def _domain(name: str) -> tuple:
    """The one argument's sampling interval the builtin declares."""
    return BUILTINS[name].domain[0]


# name -> (gk builtin, numpy reference, analytic derivative(s) or None, sampling domain)
UNARY = {
    "sin": (gk.sin, np.sin, np.cos, _domain("sin")),
    "cos": (gk.cos, np.cos, lambda x: -np.sin(x), _domain("cos")),
    "tan": (gk.tan, np.tan, lambda x: 1 / np.cos(x) ** 2, _domain("tan")),
    "asin": (gk.asin, np.arcsin, lambda x: 1 / np.sqrt(1 - x * x), _domain("asin")),
    "acos": (gk.acos, np.arccos, lambda x: -1 / np.sqrt(1 - x * x), _domain("acos")),
    "atan": (gk.atan, np.arctan, lambda x: 1 / (1 + x * x), _domain("atan")),
    "sinh": (gk.sinh, np.sinh, np.cosh, _domain("sinh")),
    "cosh": (gk.cosh, np.cosh, np.sinh, _domain("cosh")),
    "tanh": (gk.tanh, np.tanh, lambda x: 1 - np.tanh(x) ** 2, _domain("tanh")),
    "exp": (gk.exp, np.exp, np.exp, _domain("exp")),
    "log": (gk.log, np.log, lambda x: 1 / x, _domain("log")),
    "log2": (gk.log2, np.log2, lambda x: 1 / (x * np.log(2)), _domain("log2")),
    "log10": (gk.log10, np.log10, lambda x: 1 / (x * np.log(10)), _domain("log10")),
    "sqrt": (gk.sqrt, np.sqrt, lambda x: 0.5 / np.sqrt(x), _domain("sqrt")),
    "abs": (gk.abs, np.abs, np.sign, _domain("abs")),
    "floor": (gk.floor, np.floor, lambda x: 0 * x, _domain("floor")),
    "ceil": (gk.ceil, np.ceil, lambda x: 0 * x, _domain("ceil")),
    "round": (gk.round, lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), lambda x: 0 * x, _domain("round")),
    "sign": (gk.sign, np.sign, lambda x: 0 * x, _domain("sign")),
    "rsqrt": (gk.rsqrt, lambda x: 1 / np.sqrt(x), lambda x: -0.5 * x ** -1.5, _domain("rsqrt")),
    "erf": (gk.erf, np.vectorize(math.erf), lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x), _domain("erf")),
}

BINARY = {
    "atan2": (gk.atan2, np.arctan2, (lambda y, x: x / (x * x + y * y), lambda y, x: -y / (x * x + y * y)),
              BUILTINS["atan2"].domain),
    "pow": (gk.pow, np.power, (lambda a, b: b * a ** (b - 1), lambda a, b: np.log(a) * a ** b),
            BUILTINS["pow"].domain),
    "min": (gk.min, np.minimum, (lambda a, b: (a <= b) * 1.0, lambda a, b: (a > b) * 1.0), BUILTINS["min"].domain),
    "max": (gk.max, np.maximum, (lambda a, b: (a >= b) * 1.0, lambda a, b: (a < b) * 1.0), BUILTINS["max"].domain),
}

# Python operators, as kernels write them.
OPERATORS = {
    "add": (lambda a, b: a + b, (lambda a, b: 1 + 0 * a, lambda a, b: 1 + 0 * b)),
    "sub": (lambda a, b: a - b, (lambda a, b: 1 + 0 * a, lambda a, b: -1 + 0 * b)),
    "mul": (lambda a, b: a * b, (lambda a, b: b, lambda a, b: a)),
    "div": (lambda a, b: a / b, (lambda a, b: 1 / b, lambda a, b: -a / b ** 2)),
}

def operator_kernel(op: str, T):
    """A kernel applying a Python operator (selected at compile time with gk.static)."""
    @gk.kernel
    def k(a: gk.array(dtype=T), b: gk.array(dtype=T), y: gk.array(dtype=T)):
        i = gk.tid()
        y[i] = (a[i] + b[i] if gk.static(op == "add") else a[i] - b[i] if gk.static(op == "sub")
                else a[i] * b[i] if gk.static(op == "mul") else a[i] / b[i])
    return k


TOL = {gk.float32: dict(rtol=2e-5, atol=2e-6), gk.float64: dict(rtol=1e-11, atol=1e-12)}
