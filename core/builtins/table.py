"""The builtins table itself: `Builtin` (one primitive's type rule, semantics, derivative and lowering),
`BUILTINS` (name -> entry) and `register`. The modules beside it (scalar, linalg, bits, stop_gradient)
fill it; core/builtins/__init__.py imports them all, so the table is complete once the package is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..types import Type

BUILTINS: dict[str, "Builtin"] = {}


class BuiltinTypeError(TypeError):
    """Argument types a builtin does not accept; the frontend turns it into a CompileError."""


@dataclass
class Builtin:
    """One primitive.

    Args:
        name: the prim name used in IR (`ins.attrs["name"]`).
        type_rule: (arg types, attrs) -> result type; raises BuiltinTypeError.
        eval: NumPy implementation over scalars or arrays of scalars (the reference semantics).
        partials: (builder, args, out, attrs) -> one ∂out/∂arg Value (or None for zero) per arg.
        jvp / vjp: optional hand-written rules overriding the ones derived from `partials`.
        decompose: (builder, args, comps, out_type, attrs) -> scalar components of the result,
            for calls on vector/matrix values (run by the scalarize pass).
        arity: number of arguments (None = variadic).
        public: exposed to kernels as `gk.<name>`.
        float_only: integer arguments are cast to float32 by the frontend.
        cmath: the C / OpenCL C math function computing it on float operands (None: none does).
        expand: (builder, args, attrs) -> the result written in other primitives, or None to keep the
            call for these operand types; run by the expand pass on scalar IR, after differentiation.
        domain: per float argument, the interval (lo, hi) where the function is finite and smooth: the
            tests, the conformance suite and the fuzz grammar sample arguments there (None: anywhere).
    """

    name: str
    type_rule: Callable
    eval: Callable | None = None
    partials: Callable | None = None
    jvp: Callable | None = None
    vjp: Callable | None = None
    decompose: Callable | None = None
    arity: int | None = None
    differentiable: bool = True
    doc: str = ""
    public: bool = False
    float_only: bool = False
    cmath: str | None = None
    expand: Callable | None = None
    domain: tuple | None = None

    def result_type(self, arg_types: list[Type], attrs: dict | None = None) -> Type:
        if self.arity is not None and len(arg_types) != self.arity:
            raise BuiltinTypeError(f"{self.name}() takes {self.arity} arguments, got {len(arg_types)}")
        return self.type_rule(list(arg_types), attrs or {})

    # Derived rules -------------------------------------------------------------------
    def apply_jvp(self, b, args, tangents, out, attrs):
        """Tangent of the result given tangents of the args (None = zero tangent)."""
        if self.jvp is not None:
            return self.jvp(b, args, tangents, out, attrs)
        if not self.differentiable or self.partials is None:
            return None
        parts = self.partials(b, args, out, attrs)
        total = None
        for t, d in zip(tangents, parts):
            if t is None or d is None:
                continue
            term = t if d == 1 else b.mul(t, d)
            total = term if total is None else b.add(total, term)
        return total

    def apply_vjp(self, b, args, out, adj, attrs):
        """Adjoints of the args given the adjoint of the result (None entries = no adjoint)."""
        if self.vjp is not None:
            return self.vjp(b, args, out, adj, attrs)
        if not self.differentiable or self.partials is None:
            return [None] * len(args)
        parts = self.partials(b, args, out, attrs)
        return [None if d is None else (adj if d == 1 else b.mul(adj, d)) for d in parts]


def register(builtin: Builtin) -> Builtin:
    if builtin.name in BUILTINS:
        raise ValueError(f"builtin {builtin.name!r} declared twice")
    BUILTINS[builtin.name] = builtin
    return builtin
