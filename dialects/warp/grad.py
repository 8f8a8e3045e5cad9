"""Warp's `wp.grad(f)(args...)`: inside a kernel or @wp.func, the adjoint of every input of `f` at `args`
with the adjoint of each of f's results seeded with ones (`T(1)`: every component of a vector or matrix).
One input gives one value, several a tuple; an integer input's adjoint is zero. `f` is a @wp.func or a
builtin (`wp.grad(wp.atan2)(y, x)` is `(d/dy, d/dx)`). As in Warp 1.19 the call is forward-only: its
results are constants to the backward pass of the kernel around it (stop_gradient).

The adjoint is gradkit's reverse mode (ad/reverse.py) applied to f's lowered IR and inlined where it is
called, so it compiles to plain IR on every backend. A function whose reverse needs the value stack (a loop
carrying what its adjoint reads) is differentiated in forward mode instead, one input component at a time.
"""

from __future__ import annotations

import types as _pytypes

from ..ad.forward import tangent_of_func
from ..ad.reverse import Reverse, _prune_stack
from ..ad.derived import Derived
from ..ad.transforms import DerivedFunc
from ..core import types as T
from ..core.errors import CompileError, compile_error
from ..core.func import Func
from ..core.ir import Builder, Function, Param, Region, Value, copy_instr
from ..core.lang import LangFunction
from ..core.ops import OPAQUE, STACK, Op
from ..core.passes import lower
from ..core.passes.simplify import simplify

_CACHE: dict = {}


def _static(fn):
    fn._gk_static = True    # the frontend calls it at compile time when it appears inside a kernel
    return fn


@_static
def grad(func):
    """`wp.grad(f)`: called inside a kernel or @wp.func with f's arguments, returns the adjoint of each
    input of f (a tuple for several inputs) with f's output adjoints set to ones; forward-only.

    Args:
        func: a @wp.func or a Warp builtin (`wp.atan2`, `wp.length`, ...)."""
    if not (getattr(func, "_gk_func", False) or isinstance(func, LangFunction) and func.kind in ("prim", "macro")):
        raise TypeError(f"grad() expects a Warp function, got {type(func)}")
    key = ("macro", func)
    if key not in _CACHE:
        name = f"grad({func.__name__})"

        def host(*args, **kwargs):
            raise RuntimeError("grad() wrapper can only be called inside Warp kernels and functions.")
        _CACHE[key] = LangFunction(name, "macro", macro=lambda E, *args: _emit(func, E, args), host=host,
                                   doc=f"the adjoints of {func.__name__}'s inputs (Warp's wp.grad)")
    return _CACHE[key]


def _emit(func, E, args):
    """The call `wp.grad(func)(*args)` in the kernel being lowered: a call of func's adjoint function."""
    builtin = isinstance(func, LangFunction)
    if builtin:
        func = _builtin_func(func, tuple(E.type_of(a) for a in args), E)
    if func in E.lw.building:
        E.fail(f"recursion is not supported: wp.grad({func.__name__}) inside {func.__name__} or a function it calls")
    try:
        typed = func.ir_function(E.lw.building)
    except CompileError as exc:
        if builtin:     # the builtin refused these argument types: say so at the call, not in the template
            E.fail(str(exc).splitlines()[0].split("': ", 1)[-1])
        loc = E.lw.src.loc(E.node)
        raise CompileError(f"{exc}\n  (called from '{E.lw.name}' at {loc.file}:{loc.line})") from None
    only = "gradkit's wp.grad differentiates functions of scalars, vectors, quaternions and matrices only"
    if "param_structs" in typed.attrs or "ret_struct" in typed.attrs:
        E.fail(f"'{func.__name__}' takes or returns a struct: {only}")
    for p in typed.params:
        if not (p.type.is_scalar or p.type.is_vector or p.type.is_matrix):
            E.fail(f"'{func.__name__}' takes '{p.name}' of type {p.type.name}: {only}")
    if not typed.ret_types:
        E.fail(f"cannot compute the gradient of '{func.__name__}', which returns nothing")
    key = ("adjoint", func)
    if key not in _CACHE:
        _CACHE[key] = DerivedFunc(f"grad_{func.__name__}", lambda building: _adjoint_func(func, building))
    return E.call(_CACHE[key], *args)


# Calls of a builtin with 1-4 arguments as @wp.funcs of the argument types a call site gives (`_BUILTIN` is
# bound per builtin): the frontend lowers the builtin's overload, macro or primitive, as in any function.
def _call1(a0):
    return _BUILTIN(a0)  # noqa: F821


def _call2(a0, a1):
    return _BUILTIN(a0, a1)  # noqa: F821


def _call3(a0, a1, a2):
    return _BUILTIN(a0, a1, a2)  # noqa: F821


def _call4(a0, a1, a2, a3):
    return _BUILTIN(a0, a1, a2, a3)  # noqa: F821


_TEMPLATES = {1: _call1, 2: _call2, 3: _call3, 4: _call4}


def _builtin_func(fn: LangFunction, arg_types: tuple, E) -> Func:
    key = ("builtin", fn, arg_types)
    if key not in _CACHE:
        template = _TEMPLATES.get(len(arg_types))
        if template is None:
            E.fail(f"gradkit's wp.grad takes builtins of 1 to 4 arguments; {fn.name} is given {len(arg_types)}")
        py = _pytypes.FunctionType(template.__code__, {"_BUILTIN": fn}, fn.name)
        py.__annotations__ = {f"a{k}": t for k, t in enumerate(arg_types)}
        f = Func(py)
        f.__name__ = f.key = fn.name
        _CACHE[key] = f
    return _CACHE[key]


# ---------------------------------------------------------------------------------------- the adjoint IR

def _components(b: Builder, v: Value) -> list[Value]:
    t, i = v.type, (lambda k: b.const(k, T.int32))
    if t.is_scalar:
        return [v]
    if t.is_vector:
        return [b.prim("extract", v, i(k)) for k in range(t.length)]
    return [b.prim("extract", v, i(r), i(c)) for r in range(t.rows) for c in range(t.cols)]


def _adjoint_func(f: Func, building: tuple) -> Function:
    """f's parameters -> the adjoint of each (its type), computed from f's lowered (scalar) IR."""
    typed = f.ir_function(building)
    src = lower(typed)
    scalar_adjoints = _reverse(src, f.__name__)
    params = [Param(p.name, p.type) for p in typed.params]
    body = Region()
    b = Builder(body, typed.loc)
    mapping = {p.value.id: c for p, c in zip(scalar_adjoints.params, [c for q in params for c in _components(b, q.value)])}
    body.body += [copy_instr(ins, mapping) for ins in scalar_adjoints.body.body]
    flat = iter(mapping.get(y.id, y) for y in scalar_adjoints.body.yields)
    outs = []
    for q in params:
        t = q.type
        parts = [next(flat) for _ in range(t.ncomp)]
        v = parts[0] if t.is_scalar else b.prim("construct", *parts, type=t)
        outs.append(b.prim("stop_gradient", v) if t.scalar.is_float else v)   # forward-only (Warp's rule)
    body.yields = outs
    out = Function(f"grad_{f.__name__}", params, body, [q.type for q in params], "func", typed.loc)
    out.attrs = {"n_user_params": len(params)}
    return out


def _reverse(src: Function, name: str) -> Function:
    """Scalar params of `src` -> their adjoints (zero for integers), each float result's adjoint one: reverse
    mode; forward mode per float parameter where the reverse would need the value stack."""
    fwd = src         # lower() made it: a private copy the pass may annotate
    params = [Param(p.name, p.type) for p in src.params]
    fn = Function(f"adj_{name}", params, Region(), [], "func", src.loc)
    rev = Reverse(Derived(fwd, fn, {}, {p.value.id: q.value for p, q in zip(src.params, params)}))
    b = Builder(fn.body, src.loc)
    rev.replay_region(fwd.body, b, True)
    for y in fwd.body.yields:
        if y.type.is_float:
            rev.add_adj(b, y, b.const(1.0, y.type))
    rev.reverse_region(fwd.body, b)
    fn.body.yields = [rev.adj.get(p.value.id) or b.zero(p.type) for p in src.params]
    fn.ret_types = [p.type for p in src.params]
    simplify(fn)
    _prune_stack(fn)
    if any(ins.op in STACK for ins in fn.walk()):
        return _forward(src, name)
    return fn


def _forward(src: Function, name: str) -> Function:
    """The same function by forward mode: one tangent sweep per float parameter, its result tangents summed."""
    for ins in src.walk():
        if ins.op in OPAQUE:
            what = "custom gradient" if ins.op == Op.CALL else "native code"
            raise compile_error(f"grad_{name}", ins.loc, f"wp.grad({name}): the function has a loop whose reverse "
                                f"needs gradkit's value stack and calls {what}, which forward mode cannot "
                                "differentiate")
    tan, float_params = tangent_of_func(src)
    params = [Param(p.name, p.type) for p in src.params]
    fn = Function(f"adj_{name}", params, Region(), [p.type for p in params], "func", src.loc)
    b = Builder(fn.body, src.loc)
    adjoints = {}
    for k in float_params:
        seeds = [b.const(1.0 if j == k else 0.0, src.params[j].type) for j in float_params]
        mapping = {p.value.id: a for p, a in zip(tan.params, [q.value for q in params] + seeds)}
        fn.body.body += [copy_instr(ins, mapping) for ins in tan.body.body]
        tangents = [mapping.get(y.id, y) for y in tan.body.yields[len(src.body.yields):]]
        total = tangents[0] if tangents else b.zero(src.params[k].type)
        for t in tangents[1:]:
            total = b.add(total, b.cast(t, total.type))
        adjoints[k] = b.cast(total, src.params[k].type)
    fn.body.yields = [adjoints.get(k) or b.zero(p.type) for k, p in enumerate(params)]
    simplify(fn)
    return fn

