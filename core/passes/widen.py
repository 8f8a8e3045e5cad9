"""Widen a typed kernel to float64: every float32 scalar, vector, matrix, quaternion and array type becomes its
float64 twin, so gradients can be re-checked without float32 rounding (the debugger's Check view compares
central differences of the widened kernel when the float32 ones are noise).

Only kernels whose IR is self-contained widen: a `call` of a @gk.func (its custom gradient rules are keyed
by the original function) or a `native` snippet (hand-written float code) is refused with `WidenError`.
"""

from __future__ import annotations

from ..ir import Function, copy_function
from .. import types as T


class WidenError(ValueError):
    """The kernel cannot be widened to float64; the message names the instruction and says why."""


def widen_type(t: T.Type) -> T.Type:
    """float32 → float64, and the same inside vectors, matrices, quaternions and arrays; others unchanged."""
    if t is T.float32:
        return T.float64
    if t.is_quat:
        return T.quaternion(widen_type(t.scalar))
    if t.is_vector:
        return T.vector(t.length, widen_type(t.scalar))
    if t.is_matrix:
        return T.matrix((t.rows, t.cols), widen_type(t.scalar))
    if t.is_array:
        return T.array_type(widen_type(t.dtype), t.ndim)
    return t


def _widen_attr(value):
    if isinstance(value, T.Type):
        return widen_type(value)
    if isinstance(value, tuple):
        return tuple(_widen_attr(v) for v in value)
    if isinstance(value, list):
        return [_widen_attr(v) for v in value]
    return value


def widen_floats(fn: Function) -> Function:
    """A float64 copy of typed kernel `fn` (values, parameters, type attributes such as a cast's target);
    WidenError when it calls a @gk.func or native code."""
    out = copy_function(fn)
    for p in out.params:
        p.type = p.value.type = widen_type(p.type)
    out.ret_types = [widen_type(t) for t in out.ret_types]
    for ins in out.walk():
        if ins.op in ("call", "native"):
            what = "a @gk.func" if ins.op == "call" else "native code"
            where = f" at {ins.loc}" if ins.loc else ""
            raise WidenError(f"'{fn.name}' calls {what}{where}: only kernels without helper functions can be "
                             "re-run in float64")
        for v in ins.results:
            v.type = widen_type(v.type)
        for r in ins.regions:
            for v in r.params:
                v.type = widen_type(v.type)
        ins.attrs = {k: _widen_attr(v) for k, v in ins.attrs.items()}
    out.attrs.pop("pass_log", None)
    return out
