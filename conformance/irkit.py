"""Lowered IR written by hand and run on any device through the backend interface — what a backend receives
from gradkit, without the frontend or AD in between (the suite's op-by-op and fault checks use it)."""

from __future__ import annotations

import numpy as np

import gradkit as gk
from gradkit.ad.pipeline import for_backend
from gradkit.backends.base import CompileOptions
from gradkit.core import ir
from gradkit.core import types as T
from gradkit.core.builtins import BUILTINS


def A(dtype, ndim: int = 1) -> T.ArrayType:
    return T.array_type(dtype, ndim)


class K:
    """A lowered kernel under construction: `K(x=A(T.float32), a=T.float32)`; `k.x` is a parameter's value,
    `k.b` the builder, `k.tid()` a thread coordinate."""

    def __init__(self, **params):
        self.params = [ir.Param(name, t) for name, t in params.items()]
        self.body = ir.Region()
        self.b = ir.Builder(self.body)

    def __getattr__(self, name):
        for p in self.__dict__.get("params", []):
            if p.name == name:
                return p.value
        raise AttributeError(name)

    def add_param(self, name: str, t) -> ir.Value:
        p = ir.Param(name, t)
        self.params.append(p)
        return p.value

    def tid(self, axis: int = 0, ndim: int = 1) -> ir.Value:
        return self.b.emit("tid", [], [T.int32], {"axis": axis, "ndim": ndim}, hint=f"t{axis}").result

    def fn(self, name: str = "k") -> ir.Function:
        fn = ir.Function(name, self.params, self.body, [])
        ir.verify(fn, scalar_only=True)
        return fn


def launch(device: str, fn: ir.Function, dim, args: list, **options) -> None:
    """Compile `fn` for `device` as the runtime does (after the backend stage: expand what the backend does
    not implement natively) and launch it over `dim` with gradkit arrays / scalars `args`."""
    dev = gk.get_device(device)
    compiled = dev.impl.compile(dev.info, for_backend(fn, dev.impl.native_prims), CompileOptions(**options))
    dev.impl.launch(compiled, tuple(dim) if not isinstance(dim, int) else (dim,), args)
    dev.impl.synchronize(dev.info)


def apply(device: str, name: str, inputs: list[np.ndarray], types: list, **attrs) -> np.ndarray:
    """Prim `name` (with `attrs`) on the device, one thread per element of the equally long `inputs`."""
    k = K(**{f"x{j}": A(t) for j, t in enumerate(types)})
    i = k.tid()
    vals = [k.b.load(getattr(k, f"x{j}"), [i], comp=0) for j in range(len(types))]
    r = k.b.prim(name, *vals, **attrs)
    out = k.add_param("out", A(r.type))
    k.b.store(out, [i], r, comp=0)
    n = len(inputs[0])
    arrays = [gk.array(np.asarray(x).astype(t.np_dtype), dtype=t, device=device) for x, t in zip(inputs, types)]
    result = gk.zeros(n, dtype=r.type, device=device)
    launch(device, k.fn(f"prim_{name}"), n, [*arrays, result])
    return result.numpy()


def result_type(name: str, types: list, attrs: dict | None = None):
    return BUILTINS[name].result_type(types, attrs or {})
