"""Shared helpers for the NumPy backend tests: build lowered IR by hand and run it on fake arrays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gradkit.backends.base import CompileOptions
from gradkit.conformance import irkit
from gradkit.core import ir
from gradkit.core import types as T

plugin = pytest.importorskip("gradkit_numpy_backend", reason="pip install -e examples/numpy_backend")
BE = plugin.NumpyBackend()
DEV = BE.devices()[0]
F32, F64, I32, I64, U32, BOOL = T.float32, T.float64, T.int32, T.int64, T.uint32, T.bool_



# --------------------------------------------------------------------------- building and running IR

K = irkit.K     # a lowered kernel under construction: `K(x=arr(F32), a=F32)`; `k.x` is a parameter's value


def arr(dtype, ndim: int = 1):
    return T.array_type(dtype, ndim)


def tid(b, axis: int = 0, ndim: int = 1):
    return b.emit("tid", [], [I32], {"axis": axis, "ndim": ndim}).result


def shape(b, a, axis: int = 0):
    return b.emit("shape", [a], [I32], {"axis": axis}).result


def c(b, value, t=I32):
    return b.const(value, t)


def for_(b, start, stop, step, init, body):
    """`for iv in range(start, stop, step)` carrying `init`; body(builder, iv, *carried) -> new carried."""
    region = ir.Region(params=[ir.Value(start.type, "iv"), *[ir.Value(v.type) for v in init]])
    region.yields = list(body(b.at(region), *region.params))
    return b.emit("for", [start, stop, step, *init], [v.type for v in init], regions=[region]).results


def if_(b, cond, then, other, types=()):
    """then(builder) / other(builder) -> yielded values (of `types`)."""
    rt, re = ir.Region(), ir.Region()
    rt.yields, re.yields = list(then(b.at(rt)) or []), list(other(b.at(re)) or [])
    return b.emit("if", [cond], list(types), regions=[rt, re]).results


def while_(b, init, cond, body):
    """cond(builder, *carried) -> bool value; body(builder, *carried) -> new carried."""
    rc = ir.Region(params=[ir.Value(v.type) for v in init])
    rb = ir.Region(params=[ir.Value(v.type) for v in init])
    rc.yields = [cond(b.at(rc), *rc.params)]
    rb.yields = list(body(b.at(rb), *rb.params))
    return b.emit("while", list(init), [v.type for v in init], regions=[rc, rb]).results


def run(fn: ir.Function, dim, *args, debug: bool = False, stack_size: int = 64) -> list[np.ndarray]:
    """Launch `fn` on the numpy backend; NumPy array arguments go in as fake gradkit arrays.
    Returns every array argument's contents after the launch, in parameter order."""
    compiled = BE.compile(DEV, fn, CompileOptions(debug=debug, stack_size=stack_size))
    launch_args, arrays = [], []
    for p, a in zip(fn.params, args):
        if p.type.is_array:
            a = np.ascontiguousarray(a, dtype=p.type.scalar.np_dtype)
            buf = BE.alloc(DEV, a.nbytes)
            BE.copy_from_host(DEV, buf, a)
            launch_args.append(SimpleNamespace(buffer=buf, shape=a.shape[:p.type.ndim]))
            arrays.append((buf, a))
        else:
            launch_args.append(a)
    BE.launch(compiled, tuple(dim) if not isinstance(dim, int) else (dim,), launch_args)
    out = []
    for buf, a in arrays:
        host = np.empty_like(a)
        BE.copy_to_host(DEV, buf, host)
        out.append(host)
    return out
