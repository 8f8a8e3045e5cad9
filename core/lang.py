"""Python-side names of the kernel language: `gk.sin`, `gk.tid`, `gk.static`, `gk.atomic_add`, ...

Inside kernels the frontend recognises these objects and emits IR. Called from
plain Python, math builtins evaluate with NumPy (handy for references);
kernel-only functions raise a clear error.

This module holds the names the frontend itself lowers (primitives, atomics, tid, static, adjoint). The
library, written in the language and so imported above it, adds its macros and decompositions with
`LangFunction.define` (core/library); each such LangFunction carries what lowering and host calls need.
"""

from __future__ import annotations

import numpy as np

from .builtins import BUILTINS


# One-line docs (help(gk.sin), the API reference) of the builtins whose table entry carries none.
DOCS = {
    "floor": "the largest integer value <= x (zero gradient)", "ceil": "the smallest integer value >= x (zero gradient)",
    "exp": "e to the power x", "log": "the natural logarithm", "log2": "the base-2 logarithm",
    "log10": "the base-10 logarithm", "sin": "sine (radians)", "cos": "cosine (radians)", "tan": "tangent (radians)",
    "asin": "arcsine, in [-π/2, π/2]", "acos": "arccosine, in [0, π]", "atan": "arctangent, in (-π/2, π/2)",
    "sinh": "hyperbolic sine", "cosh": "hyperbolic cosine", "tanh": "hyperbolic tangent",
    "dot": "the dot product of two vectors", "cross": "the cross product of two 3-vectors",
    "length_sq": "the squared length of a vector, dot(v, v)", "outer": "the outer product of two vectors (a matrix)",
    "transpose": "the transpose of a matrix", "determinant": "the determinant of a square matrix",
    "inverse": "the inverse of a square matrix", "trace": "the sum of a square matrix's diagonal",
    "identity": "the n x n identity matrix of dtype, both given by keyword: identity(n=3, dtype=gk.float32)",
}


class LangFunction:
    """A name of the kernel language; `kind` tells the frontend how to lower a call of it.

    Args:
        macro: kind "macro": `fn(E, *args, **kwargs)` building the result with an emitter (core/library).
        host: kinds "macro" and "library": the implementation a call from plain Python runs.
        resolve: kind "library": argument type -> (the @gk.func computing it, "") or (None, why not).
        outputs: kind "library": the names of its results (Warp's out-argument form assigns locals).
    """

    def __init__(self, name: str, kind: str, prim: str | None = None, doc: str = "", *, macro=None, host=None,
                 resolve=None, outputs: tuple = ()):
        self.name, self.kind, self.prim = name, kind, prim or name
        self.macro, self.host, self.resolve, self.outputs = macro, host, resolve, outputs
        self.__name__ = name
        self.__doc__ = doc or (BUILTINS[self.prim].doc if self.prim in BUILTINS else
                               macro.__doc__ if kind == "macro" else "") or DOCS.get(name, "")

    def define(self) -> LangFunction:
        """Make this a name of the language: in NAMES, and `gk.<name>` (gradkit exports this module's)."""
        NAMES[self.name] = self
        globals()[self.name] = self
        return self

    def __call__(self, *args, **kwargs):
        if self.kind == "prim" and BUILTINS[self.prim].eval is not None:
            if self.name == "select":           # Warp order: select(cond, value_if_false, value_if_true)
                args = (args[0], args[2], args[1])
            return BUILTINS[self.prim].eval(*[np.asarray(a) for a in args], **kwargs)
        if self.kind == "static":
            return args[0]
        if self.kind == "macro" or self.kind == "library":
            return self.host(*args, **kwargs)
        raise RuntimeError(f"gk.{self.name}() can only be called inside a @gk.kernel or @gk.func")

    def __repr__(self) -> str:
        return f"<gradkit builtin {self.name}>"


PUBLIC_PRIMS = [name for name, entry in BUILTINS.items() if entry.public]

NAMES: dict[str, LangFunction] = {n: LangFunction(n, "prim") for n in PUBLIC_PRIMS}
NAMES["select"] = LangFunction("select", "prim", "where",
                               doc="select(cond, value_if_false, value_if_true) — Warp's argument order")
NAMES["mul"] = LangFunction("mul", "prim", "matmul", doc="matrix product (same as @)")
for _kind in ("add", "sub", "min", "max"):
    NAMES[f"atomic_{_kind}"] = LangFunction(f"atomic_{_kind}", "atomic", _kind,
                                            doc=f"atomic {_kind} into arr[idx...]; returns the old value")
NAMES["tid"] = LangFunction("tid", "tid", doc="the thread index (a tuple for multi-dimensional launches)")
NAMES["static"] = LangFunction("static", "static", doc="evaluate an expression at compile time")
NAMES["adjoint"] = LangFunction("adjoint", "adjoint",
                                doc="inside a @gk.func_grad function: gk.adjoint[x] is the adjoint of input x")

globals().update(NAMES)     # core/library defines the rest (macros, decompositions) with LangFunction.define
