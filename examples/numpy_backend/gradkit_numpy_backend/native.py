"""`@gk.func_native` snippets for the numpy plugin: the body of a Python function over NumPy arrays, run once
per launch for every thread that reaches the call (vectorised like the rest of the interpreter).

Calling convention (key `"numpy"`): each scalar parameter is a NumPy array with one entry per calling
thread, each array parameter the array's flat scalar data (row-major, `ncomp` scalars per element, writable).
The forward and replay bodies `return` the result (an array over the calling threads) when the function has
one. The adjoint body also sees `adj_ret` (the result's adjoint per thread), `adj_<p>` for every float array
(its adjoint's flat data, to add into) and a zero `adj_<p>` per float scalar that it updates
(`adj_a += ...`, or `adj_a = adj_a + ...`); it must not `return`.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np

from gradkit.core.errors import CompileError
from gradkit.core.builtins.printing import PrintSpec

_compiled: dict = {}


def function(spec, variant: str):
    """The snippet of `spec` for `variant` as a Python function (compiled once per snippet text)."""
    body = spec.snippet("numpy", variant)
    names = [name for name, _ in spec.params]
    if variant == "adjoint":
        names += (["adj_ret"] if spec.ret_type is not None else [])
        names += [f"adj_{spec.params[k][0]}" for k in spec.float_arrays()]
        outs = [f"adj_{spec.params[k][0]}" for k in spec.float_scalars()]
        names += outs
        tail = f"\n    return ({''.join(o + ', ' for o in outs)})\n"
    else:
        tail = "\n"
    key = (body, tuple(names), variant)
    fn = _compiled.get(key)
    if fn is None:
        source = f"def gk_native({', '.join(names)}):\n{textwrap.indent(textwrap.dedent(body), '    ')}\n" \
                 f"    pass{tail}"
        scope = {"np": np}
        try:
            exec(compile(source, f"<gk.func_native {spec.name} {variant}>", "exec"), scope)
        except SyntaxError as exc:
            raise CompileError(f"numpy backend: native function '{spec.name}' ({variant}): the snippet is not "
                               f"valid Python: {exc}") from None
        fn = _compiled[key] = scope["gk_native"]
    return fn


def call(run, ins, lanes) -> None:
    """Run the `native` instruction `ins` for the threads `lanes` (None: all) of interpreter `run`."""
    spec, variant = ins.attrs["native"], ins.attrs["variant"]
    if isinstance(spec, PrintSpec):
        if variant == "forward":
            print_lanes(run, ins, spec, lanes)
        return
    count = run.n if lanes is None else len(lanes)
    if count == 0:
        for r in ins.results:
            run.env[r.id] = np.zeros(run.n, r.type.np_dtype)
        return

    def value(a):
        if a.type.is_array:
            return run.arrays[a.id].flat
        v = np.broadcast_to(np.asarray(run.env[a.id]), (run.n,))
        return (v if lanes is None else v[lanes]).copy()

    args = [value(a) for a in ins.args]
    if variant == "adjoint":
        args += [np.zeros(count, spec.params[k][1].np_dtype) for k in spec.float_scalars()]
    out = function(spec, variant)(*args)
    results = list(out) if variant == "adjoint" else ([out] if ins.results else [])
    for r, got in zip(ins.results, results):
        full = np.zeros(run.n, r.type.np_dtype)
        full[slice(None) if lanes is None else lanes] = np.broadcast_to(np.asarray(got, r.type.np_dtype), (count,))
        run.env[r.id] = full


def print_lanes(run, ins, spec, lanes) -> None:
    """A kernel's print (gradkit/core/builtins/printing.py) for the threads `lanes`, in thread order: each line
    formatted in Python with C's printf semantics, written to sys.stdout and flushed (the replay and the
    adjoint print nothing)."""
    ids = np.arange(run.n) if lanes is None else lanes
    if len(ids) == 0:
        return
    cols = [np.broadcast_to(np.asarray(run.env[a.id]), (run.n,)) for a in ins.args]
    sys.stdout.write("".join(spec.py_format([c[i] for c in cols]) for i in ids))
    sys.stdout.flush()
