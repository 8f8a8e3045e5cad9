"""Integer bitwise primitives behind `&`, `|`, `^`, `<<`, `>>` and `~` on int32 / int64 / uint32 values
(elementwise on integer vectors). Shift counts are taken modulo the bit width on every backend (as OpenCL C
and x86 do), so `x << 32` of an int32 is `x`; `>>` is arithmetic for signed types, logical for uint32.
Not differentiable (integer results)."""

from __future__ import annotations

import numpy as np

from .table import BuiltinTypeError, register, Builtin
from .scalar import _decomposer, _elementwise

OPERATORS = {"bit_and": "&", "bit_or": "|", "bit_xor": "^", "shl": "<<", "shr": ">>", "bit_not": "~"}


def _int_rule(name: str, arity: int):
    base = _elementwise(name)

    def rule(types, attrs):
        if any(not getattr(t, "scalar", t).is_int for t in types if not t.is_array):
            shown = ", ".join(t.name for t in types)
            raise BuiltinTypeError(f"'{OPERATORS[name]}' needs integer operands (int32, int64, uint32), got {shown}")
        scalars = [t.scalar for t in types]
        if len(set(scalars)) > 1:
            raise BuiltinTypeError(f"'{OPERATORS[name]}' needs one integer type, got {scalars[0].name} and "
                                   f"{scalars[1].name}; cast one, e.g. gk.{scalars[0].name}(...)")
        return base(types, attrs)
    return rule


def _shift(fn):
    def run(a, n):
        a = np.asarray(a)
        bits = a.dtype.itemsize * 8
        return fn(a, (np.asarray(n).astype(a.dtype) & a.dtype.type(bits - 1)).astype(a.dtype)).astype(a.dtype)
    return run


EVAL = {"bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor,
        "shl": _shift(np.left_shift), "shr": _shift(np.right_shift)}
for _name, _fn in EVAL.items():
    register(Builtin(_name, _int_rule(_name, 2), eval=_fn, arity=2, differentiable=False,
                     decompose=_decomposer(_name), doc=f"a {OPERATORS[_name]} b on integers"))
register(Builtin("bit_not", _int_rule("bit_not", 1), eval=np.invert, arity=1, differentiable=False,
                 decompose=_decomposer("bit_not"), doc="~a on integers"))
