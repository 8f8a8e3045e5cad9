"""Language functions written once in terms of the primitives (`gk.quat_rotate`, ...): a *macro* gets an
emitter and its arguments and builds its result from scalar components and arithmetic. In a kernel the
emitter is the frontend's (core/frontend/macros.py), so the result is ordinary IR that every backend runs
and both AD modes differentiate; called from Python the emitter is NumPy's (below), so the same source
is the host-side implementation.

A macro uses: `E.type_of(x)`, `E.comps(v)` (scalar components, row-major), `E.make(t, comps)`,
`E.scalar(x, t)`, `E.const(value, t)`, math `E.sin/cos/sqrt/atan2`, `E.where(cond, a, b)`, comparisons
`E.gt(a, b)`, and `E.fail(message)`; scalars combine with + - * / and unary -."""

from __future__ import annotations

import numpy as np

from .. import types as T

MACROS: dict = {}


def macro(name: str, doc: str):
    """Register `fn(E, *args, **kwargs)` as the language function `gk.<name>`."""
    def deco(fn):
        fn.__doc__ = doc
        MACROS[name] = fn
        return fn
    return deco


class NumpyEmit:
    """The host-side emitter: components are NumPy scalars, results NumPy arrays."""

    sin, cos, sqrt, atan2 = staticmethod(np.sin), staticmethod(np.cos), staticmethod(np.sqrt), staticmethod(np.arctan2)

    def __init__(self, name: str):
        self.name = name

    def type_of(self, x) -> T.Type:
        a = np.asarray(x)
        s = T.float64 if a.dtype == np.float64 else T.float32 if a.dtype == np.float32 else \
            (T.float32 if a.dtype.kind in "iub" or isinstance(x, float) else None)
        if isinstance(x, float):
            s = T.float64
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
        return t.np_dtype.type(x)

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
    return MACROS[name](NumpyEmit(name), *args, **kwargs)


from . import quat as _quat  # noqa: E402,F401  (registers the quaternion functions)
