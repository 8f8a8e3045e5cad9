"""Language functions written once in terms of the primitives (`gk.quat_rotate`, ...): a *macro* gets an
emitter and its arguments and builds its result from scalar components and arithmetic. In a kernel the
emitter is the frontend's (core/frontend/macros.py), so the result is ordinary IR that every backend runs
and both AD modes differentiate; called from Python the emitter is NumPy's (below), so the same source
is the host-side implementation.

A macro uses: `E.type_of(x)`, `E.comps(v)` (scalar components, row-major), `E.make(t, comps)`,
`E.scalar(x, t)`, `E.cast(x, t)`, `E.const(value, t)`, math `E.sin/cos/sqrt/atan2/log`, `E.where(cond, a, b)`, comparisons
`E.gt(a, b)`, and `E.fail(message)`; scalars combine with + - * / % and unary -, integers also
with & ^ << >>."""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import types as T
from ..frontend.macros import Advance
from ..lang import LangFunction

MACROS: dict = {}


def macro(name: str, doc: str, advances_state: bool = False):
    """Define `fn(E, *args, **kwargs)` as the language function `gk.<name>` (core/lang). With
    `advances_state` it returns an Advance: a value and the new contents of the local variable given as its first argument
    (Warp's `gk.randf(state)` updates `state`)."""
    def deco(fn):
        fn.__doc__ = doc
        fn.advances_state = advances_state
        MACROS[name] = fn
        LangFunction(name, "macro", macro=fn, host=partial(call_on_host, name)).define()
        return fn
    return deco


class NumpyEmit:
    """The host-side emitter: components are NumPy scalars, results NumPy arrays."""

    sin, cos, sqrt, atan2 = staticmethod(np.sin), staticmethod(np.cos), staticmethod(np.sqrt), staticmethod(np.arctan2)
    log = staticmethod(np.log)

    def __init__(self, name: str):
        self.name = name

    def type_of(self, x) -> T.Type:
        if isinstance(x, bool):
            return T.bool_
        if isinstance(x, int):
            return T.int32 if not T.int32.out_of_range(x) else T.int64
        a = np.asarray(x)
        s = T.from_numpy_dtype(a.dtype)
        if s is None:
            self.fail(f"unsupported value {x!r}")
        if a.ndim == 0:
            return s
        if a.shape == (4,):
            return T.quaternion(s)
        if a.ndim == 1:
            return T.vector(a.shape[0], s)
        return T.matrix(a.shape, s)

    def comps(self, v) -> list:
        a = np.asarray(v)
        return [a.dtype.type(c) for c in a.reshape(-1)]

    def make(self, t, comps):
        return np.array(comps, dtype=t.scalar.np_dtype).reshape(t.shape)

    def scalar(self, x, t):
        return np.asarray(x).astype(t.np_dtype)[()]

    def cast(self, x, t):
        return np.asarray(x).astype(t.np_dtype)[()]

    def const(self, value, t):
        return t.scalar.np_dtype.type(value)

    def where(self, cond, a, b):
        return a if cond else b

    def gt(self, a, b):
        return a > b

    def out(self, x):
        return x

    def fail(self, message: str):
        raise TypeError(f"{self.name}(): {message}")


def call_on_host(name: str, *args, **kwargs):
    """`gk.<macro>(...)` from Python: the macro run by NumpyEmit."""
    with np.errstate(over="ignore"):          # uint32 arithmetic wraps, as in kernels
        out = MACROS[name](NumpyEmit(name), *args, **kwargs)
    return out.value if isinstance(out, Advance) else out
