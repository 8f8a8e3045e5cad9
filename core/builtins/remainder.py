"""`rem`: C's truncated remainder, the meaning of `%` in kernels lowered with `remainder="truncated"`
(the frontend option Warp's dialect sets: Warp computes `%` as C's `%` on integers and `fmod` on floats,
so `-7 % 2 == -1` and `-6.5 % 2.0 == -0.5`, where gradkit's default `%` floors as Python does).

The result has the dividend's sign. Floats call C's `fmod` (exact on every backend); integers are
written in `irem` by `expand`, with x rem 0 = 0 and MIN rem -1 = 0 (never a trap), as `%` is.
Derivatives: d/da = 1, d/db = -trunc(a / b) (Warp's adjoint gives b none; this is the true one).
"""

from __future__ import annotations

import numpy as np

from ..types import uint32
from .scalar import _c, elementwise


def _c_rem(a, b):
    """NumPy reference: fmod on floats; on integers C's %, with 0 for a zero divisor (and MIN % -1)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return np.fmod(a, b)
    dt = np.result_type(a, b)
    a, b = a.astype(dt), b.astype(dt)
    bad = b == 0
    if dt.kind == "i":
        bad = bad | (b == -1)                    # x % -1 is 0; NumPy's MIN % -1 would overflow
    safe = np.where(bad, dt.type(1), b).astype(dt)
    with np.errstate(all="ignore"):
        out = np.fmod(a, safe)
    return np.where(bad, dt.type(0), out).astype(dt)


def _trunc(b, q):
    return b.select(b.prim("lt", q, _c(b, q, 0)), b.prim("ceil", q), b.prim("floor", q))


def _expand_rem(b, args, attrs):
    """Integers through the truncating `irem` with the divisor guarded; floats stay a call of fmod."""
    x, d = args
    if x.type.is_float:
        return None
    zero, one = _c(b, x, 0), _c(b, x, 1)
    if x.type is uint32:
        bad = b.prim("eq", d, zero)
    else:
        bad = b.prim("or", b.prim("eq", d, zero), b.prim("eq", d, _c(b, x, -1)))
    return b.select(bad, zero, b.prim("irem", x, b.select(bad, one, d)))


elementwise("rem", _c_rem, lambda b, a, o, at: [1, b.neg(_trunc(b, b.div(a[0], a[1])))], cmath="fmod",
            expand=_expand_rem, doc="a % b with C semantics (truncated; floats: fmod), the sign of a")
