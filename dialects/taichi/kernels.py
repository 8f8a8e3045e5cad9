"""`@ti.kernel`, `@ti.func`, `ti.template()`, `@ti.data_oriented`, `ti.ndrange`, `ti.grouped`.

A TiKernel translates itself (translate.py) at its first call per set of compile-time arguments (the
instance of a data-oriented class, `ti.template()` arguments) and per `ti.init`, then each call launches
its gk.kernels in order with `gk.launch` — recorded on a `gk.Tape` (and so on `ti.ad.Tape`) like any
launch. `kernel.grad(*args)` launches their adjoints in reverse order (Taichi's `kernel.grad()`),
reading and accumulating every field's `.grad`.
"""

from __future__ import annotations

import inspect
import itertools
import sys

import numpy as np

import gradkit as gk
from gradkit.core import types as T
from gradkit.core.frontend.context import _in_library

from . import runtime
from .errors import unsupported
from .fields import Field, NdarrayArg, NdarrayType, scalar_type
from .translate import translate


class Template:
    """`ti.template()`: a compile-time argument (a field, a Python value); the kernel is translated for
    each distinct object passed."""


def template():
    return Template()


def _remember_scope(fn) -> None:
    """The locals of the function defining a kernel or func (its enclosing scope), as gk's kernels keep
    them: names a nested kernel uses that are not closure cells."""
    frame = sys._getframe(1)
    while frame is not None and _in_library(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is not None and frame.f_locals is not frame.f_globals:
        fn.__ti_enclosing__ = dict(frame.f_locals)


class TiFunc:
    """`@ti.func`: a function inlined into the kernels that call it (Python scope: called directly)."""

    def __init__(self, fn):
        self.pyfunc = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        _remember_scope(fn)

    def __get__(self, obj, cls=None):
        return self if obj is None else BoundFunc(self, obj)

    def __call__(self, *args, **kwargs):
        return self.pyfunc(*args, **kwargs)


class BoundFunc:
    def __init__(self, func: TiFunc, obj):
        self.func, self.obj = func, obj

    def __call__(self, *args, **kwargs):
        return self.func.pyfunc(self.obj, *args, **kwargs)


def func(fn=None, *, is_real_function: bool = False):
    if is_real_function:
        raise unsupported("ti.real_func / is_real_function=True", "use @ti.func (inlined)")
    if fn is None:
        return lambda f: TiFunc(f)
    return TiFunc(fn)


def real_func(fn):
    raise unsupported("ti.real_func", "use @ti.func (inlined)")


def _arg_type(name, ann):
    if isinstance(ann, Template) or ann is Template or ann is template:
        return None
    if ann is inspect.Parameter.empty:
        raise TypeError(f"@ti.kernel parameter '{name}' needs a type annotation (ti.f32, ti.i32, ti.template(), ...)")
    if isinstance(ann, NdarrayType) or ann is NdarrayType:
        return ann if isinstance(ann, NdarrayType) else NdarrayType()
    if ann is float:
        return runtime.settings.default_fp
    if ann is int:
        return runtime.settings.default_ip
    if isinstance(ann, T.Type) and (ann.is_vector or ann.is_matrix):
        return ann
    return scalar_type(ann, f"parameter '{name}'")


class TiKernel:
    """`@ti.kernel`: call it like a function; `.grad(*args)` runs its adjoint."""

    def __init__(self, fn, obj=None, cache=None, sig=None):
        self.pyfunc = fn
        self.obj = obj
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._sig = inspect.signature(fn) if sig is None else sig
        self._cache = {} if cache is None else cache
        self._base = self
        self._kinds = None          # (settings key, per-parameter argument type or None) for call plans
        self._plans: dict = {}      # plan key -> _Plan (calls with positional arguments only)
        # The plan of the last call, for a kernel without compile-time parameters: (ti.init generation, the
        # data-oriented instance, the plan, number of arguments); every call of a training loop takes it.
        self._last = None

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        bound = TiKernel(self.pyfunc, obj, self._cache, self._sig)     # `robot.step` at every call: cheap
        bound._base = self
        return bound

    # ------------------------------------------------------------------ calling
    def _bind(self, args, kwargs):
        params = list(self._sig.parameters.items())
        static = {}
        if self.obj is not None:
            static[params[0][0]] = self.obj
            params = params[1:]
        try:
            bound = inspect.Signature([p for _, p in params]).bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"kernel '{self.__name__}': {exc}") from None
        bound.apply_defaults()
        arg_types, values, nd = {}, {}, {}
        for name, p in params:
            ann = p.annotation
            if isinstance(ann, str):        # `from __future__ import annotations`
                from .scope import namespace_of
                ann = eval(ann, namespace_of(self.pyfunc))  # noqa: S307 - the user's own annotation
            t = _arg_type(name, ann)
            v = bound.arguments[name]
            if t is None:
                static[name] = v
            elif isinstance(t, NdarrayType):
                nd[name] = (t.spec(v, f"kernel '{self.__name__}' parameter '{name}'"), v)
            else:
                arg_types[name] = t
                values[name] = v
        return static, arg_types, values, nd

    def _translation(self, static, arg_types, nd=None):
        s = runtime.settings
        ret = self._sig.return_annotation
        if isinstance(ret, str):
            from .scope import namespace_of
            ret = eval(ret, namespace_of(self.pyfunc))  # noqa: S307 - the user's own annotation
        ret_type = None if ret in (inspect.Signature.empty, None) else scalar_type(ret) \
            if not (isinstance(ret, T.Type) and not ret.is_scalar) else ret
        key = (s.generation, s.default_fp, s.device.name if s.device else None,
               tuple((k, id(v)) if not isinstance(v, (int, float, str, bool)) else (k, v)
                     for k, v in static.items()),
               tuple((k, v.name) for k, v in arg_types.items()),
               tuple((k, e.name, n) for k, ((e, n), _) in (nd or {}).items()))
        tr = self._cache.get(key)
        if tr is None:
            args = {k: NdarrayArg(e, n, k) for k, ((e, n), _) in (nd or {}).items()}
            tr = self._cache[key] = translate(self, {**static, **args}, arg_types, ret_type)
            tr.keep = list(static.values())        # keep ids valid
            tr.nd_args = args
        return tr

    def _launches(self, args, kwargs):
        runtime.device()
        static, arg_types, values, nd = self._bind(args, kwargs)
        tr = self._translation(static, arg_types, nd)
        back = []
        for name, (_, v) in nd.items():         # ndarray arguments: bound for this call
            if isinstance(v, Field):
                tr.nd_args[name].bound = v.arr
            else:
                a = gk.from_numpy(np.asarray(v), device=runtime.device())
                tr.nd_args[name].bound = a
                if isinstance(v, np.ndarray):
                    back.append((v, a))
            values[name] = v
        self._copy_back = back
        hostns = None
        out = []
        for launch in tr.launches:
            if launch.bounds is not None and hostns is None:
                hostns = self._hostns(static, values, tr)
            dims, los = launch.extents(hostns) if launch.bounds is not None else ((1,), [])
            inputs = [f.arr for f in launch.fields] + [_scalar(values[a], arg_types[a]) for a in launch.args] + los
            if launch.random:
                runtime.settings.calls += 1
                inputs.append((runtime.settings.seed * 1000003 + runtime.settings.calls) & 0x7FFFFFFF)
            out.append((launch, dims, inputs))
        return tr, out

    def _hostns(self, static, values, tr):
        from .scope import namespace_of
        ns = {**namespace_of(self.pyfunc), **static, **values}
        for st in tr.host_assigns:      # top-level locals a loop bound may use (n = x.shape[0])
            try:
                exec(compile(__import__("ast").Module(body=[st], type_ignores=[]), "<bounds>", "exec"), ns)  # noqa: S102
            except Exception:
                pass
        return ns

    # ------------------------------------------------------------------ the call fast path
    def _plan(self, args):
        """The `_Plan` for a call with these positional arguments, None where a call must take the general
        path (keyword or defaulted arguments, ndarray parameters, loop bounds that need the top-level
        locals)."""
        runtime.device()
        base, s = self._base, runtime.settings
        skey = (s.generation, s.default_fp, s.default_ip, self.obj is not None)
        kinds = base._kinds
        if kinds is None or kinds[0] != skey:
            kinds = base._kinds = (skey, self._param_kinds())
        types = kinds[1]
        if types is None or len(args) != len(types):
            return None
        key = [skey, s.device.name if s.device else None, id(self.obj)]
        for v, t in zip(args, types):
            if t is None:                   # compile-time: as `_translation` keys it (by value or identity)
                key.append((v.__class__, v) if isinstance(v, (int, float, str, bool)) else id(v))
        key = tuple(key)
        plan = base._plans.get(key)
        if plan is None:
            static, arg_types, _, nd = self._bind(args, {})
            tr = self._translation(static, arg_types, nd)
            plan = _Plan.build(self, tr, static, types) if not nd else False
            base._plans[key] = plan
        if plan and None not in types:     # the key is the settings' and the instance's alone
            base._last = (s.generation, self.obj, plan, len(types))
        return plan or None

    def _last_plan(self, args):
        """The last call's plan when this call has the same key (see `_last`), else None."""
        last = self._base._last
        if last is not None and last[0] == runtime.settings.generation and last[1] is self.obj \
                and len(args) == last[3]:
            return last[2]
        return None

    def _param_kinds(self):
        """Per positional parameter (after `self`): its scalar type, or None for a compile-time one; None
        when a parameter is an ndarray, variadic or keyword-only (those calls take `_launches`)."""
        params = list(self._sig.parameters.values())[1 if self.obj is not None else 0:]
        out = []
        for p in params:
            if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
                return None
            ann = p.annotation
            if isinstance(ann, str):
                from .scope import namespace_of
                ann = eval(ann, namespace_of(self.pyfunc))  # noqa: S307 - the user's own annotation
            t = _arg_type(p.name, ann)
            if isinstance(t, NdarrayType):
                return None
            out.append(t)
        return out

    def __call__(self, *args, **kwargs):
        plan = None if kwargs else self._last_plan(args) or self._plan(args)
        if plan is not None:
            return plan.call(args)
        tr, launches = self._launches(args, kwargs)
        dev = runtime.device()
        for launch, dims, inputs in launches:
            if 0 in dims:
                continue
            gk.launch(launch.kernel, dims if len(dims) > 1 else dims[0], inputs=inputs, device=dev)
        for v, a in self._copy_back:            # Taichi writes NumPy ndarray arguments in place
            np.copyto(v, a.numpy().reshape(v.shape), casting="unsafe")
        if tr.ret_field is not None:
            return tr.ret_field[None]
        return None

    def grad(self, *args, **kwargs):
        """Taichi's `kernel.grad(*args)`: the adjoint of each launch, last first, accumulating into every
        field's `.grad` (read from the outputs' `.grad`)."""
        plan = None if kwargs else self._last_plan(args) or self._plan(args)
        if plan is not None:
            return plan.grad(args)
        tr, launches = self._launches(args, kwargs)
        dev = runtime.device()
        for launch, dims, inputs in reversed(launches):
            if 0 in dims:
                continue
            gk.launch(launch.kernel, dims if len(dims) > 1 else dims[0], inputs=inputs, device=dev, adjoint=True)

    def source(self, *args, **kwargs) -> str:
        """The generated gradkit kernels (Python text) for these arguments."""
        from .translate import debug_source
        static, arg_types, _, nd = self._bind(args, kwargs)
        runtime.device()
        return debug_source(self._translation(static, arg_types, nd))


class _Plan:
    """A kernel's launches for one set of compile-time arguments, prebuilt for calls with positional
    arguments: per launch its gk.kernel, fields, the positions of the scalar arguments it takes, and its
    loop bounds as code evaluated against the kernel's globals and the call's arguments. A call then
    does what `_launches` + `__call__` do (fields' arrays and loop extents read at each call) without
    binding the signature, building the host namespace or keying the translation."""

    __slots__ = ("tk", "tr", "launches", "static", "scalars", "ns_extra", "local_bounds")

    @classmethod
    def build(cls, tk, tr, static: dict, types: list):
        if tr.host_assigns and any(launch.bounds is not None for launch in tr.launches):
            return False            # bounds reading top-level locals: `_hostns` runs them each call
        names = [p for p in tk._sig.parameters][1 if tk.obj is not None else 0:]
        position = {name: k for k, name in enumerate(names)}
        plan = cls()
        plan.tk, plan.tr, plan.static = tk, tr, static
        plan.scalars = [(name, k, t) for k, (name, t) in enumerate(zip(names, types)) if t is not None]
        plan.launches = []
        py = tk.pyfunc
        shadow = set(getattr(py, "__ti_enclosing__", {})) | set(py.__code__.co_freevars) | set(static) | \
            {name for name, _, _ in plan.scalars}
        plan.local_bounds = False
        for launch in tr.launches:
            bounds = None
            if launch.bounds is not None:
                if not all(_flat_code(c) for b in launch.bounds for c in b):
                    return False    # a comprehension or lambda in a bound: evaluated in one namespace
                bounds = [tuple(_bound(c, shadow) for c in b) for b in launch.bounds]
                plan.local_bounds |= any(kind == "local" for b in bounds for kind, _ in b)
            # (position, type, whether a plain Python number passes as it is: a scalar parameter)
            args = [(position[a], t, t.is_scalar) for a, t in ((a, types[position[a]]) for a in launch.args)]
            plan.launches.append((launch, launch.kernel, launch.fields, args, bounds, launch.random))
        return plan

    def _bounds_ns(self, args) -> tuple[dict, dict]:
        """(globals, locals) for the loop bounds: the kernel's module globals (not copied), then its
        enclosing scope, closure cells, compile-time and call arguments (scope.namespace_of's order)."""
        py = self.tk.pyfunc
        local = dict(getattr(py, "__ti_enclosing__", {}))
        if py.__closure__:
            for var, cell in zip(py.__code__.co_freevars, py.__closure__):
                try:
                    local[var] = cell.cell_contents
                except ValueError:
                    pass
        local.update(self.static)
        for name, k, _ in self.scalars:
            local[name] = args[k]
        return py.__globals__, local

    def call(self, args):
        dev = runtime.settings.device       # set: the plan was made after runtime.device()
        for kernel, dim, inputs in self.launches_for(args):
            if dim is not None:
                gk.launch(kernel, dim, inputs=inputs, device=dev)
        if self.tr.ret_field is not None:
            return self.tr.ret_field[None]
        return None

    def grad(self, args) -> None:
        """`kernel.grad(*args)`: each launch's adjoint, last first (what `TiKernel.grad` does in general)."""
        dev = runtime.settings.device
        for kernel, dim, inputs in reversed(self.launches_for(args)):
            if dim is not None:
                gk.launch(kernel, dim, inputs=inputs, device=dev, adjoint=True)

    def launches_for(self, args) -> list:
        """(gk.kernel, launch dim or None for an empty one, inputs) of each launch for this call."""
        g, local = self._bounds_ns(args) if self.local_bounds else (self.tk.pyfunc.__globals__, None)
        calls = []                  # every extent is evaluated before the first launch, as `_launches` does
        for launch, kernel, fields, arg_pos, bounds, random in self.launches:
            inputs = [f.arr for f in fields]
            for k, t, scalar in arg_pos:
                v = args[k]
                inputs.append(v if scalar and v.__class__ in _NUMBERS else _scalar(v, t))
            dim = 1
            if bounds is not None:
                dims = []
                for (lk, lo), (hk, hi) in bounds:
                    # the user's own loop bounds, read at each call (a constant one was read once)
                    a = lo if lk == "const" else eval(lo, g, local)  # noqa: S307
                    b = hi if hk == "const" else eval(hi, g, local)  # noqa: S307
                    a = int(a)
                    inputs.append(a)
                    dims.append(max(0, int(b) - a))
                dim = tuple(dims) if len(dims) > 1 else dims[0]
                if 0 in dims:
                    dim = None
            if random:
                runtime.settings.calls += 1
                inputs.append((runtime.settings.seed * 1000003 + runtime.settings.calls) & 0x7FFFFFFF)
            calls.append((kernel, dim, inputs))
        return calls


def _bound(code, shadow: set) -> tuple:
    """How a plan evaluates one loop bound: ("const", value) for one that names nothing (`range(4)`),
    ("global", code) for one naming only module globals, ("local", code) for one that needs the call's
    namespace (arguments, compile-time arguments, enclosing or closure variables)."""
    if not code.co_names:
        return "const", eval(code, {"__builtins__": {}})  # noqa: S307 - a constant expression of the user's
    return ("local" if set(code.co_names) & shadow else "global"), code


def _flat_code(code) -> bool:
    """A code object without nested code (comprehensions, lambdas), so that evaluating it with separate
    globals and locals sees the names as one merged namespace does."""
    return not any(hasattr(c, "co_code") for c in code.co_consts)


_NUMBERS = (int, float, bool)


def _scalar(v, t):
    if isinstance(v, Field):
        raise TypeError("a field was passed for a scalar kernel parameter; annotate it ti.template()")
    if t.is_scalar:
        return v.item() if hasattr(v, "item") else v
    return np.asarray(v)


def kernel(fn=None, **options):
    if fn is None:
        return lambda f: kernel(f)
    _remember_scope(fn)
    return TiKernel(fn)


def data_oriented(cls):
    """Taichi's `@ti.data_oriented`: methods that are kernels bind `self` at compile time (done by the
    kernel descriptors themselves); the class is returned unchanged."""
    return cls


def ndrange(*dims):
    """Python scope: the index tuples of the box (kernels translate it into a parallel launch)."""
    ranges = [range(d[0], d[1]) if isinstance(d, (tuple, list)) else range(d) for d in dims]
    return itertools.product(*ranges)


class IndexVector(tuple):
    """An index of ti.grouped in Python scope or in `ti.static(ti.grouped(...))`: a tuple (so `I[0]` is a
    compile-time int in kernels) that kernels also read as a constant int vector (`base + I`), as they read
    a NumPy vector."""

    ndim = 1
    dtype = np.dtype(np.int32)

    @property
    def shape(self):
        return (len(self),)

    @property
    def size(self):
        return len(self)

    def reshape(self, *shape):
        return np.array(self, dtype=np.int32).reshape(*shape)


def grouped(x):
    """Python scope (and ti.static(ti.grouped(...)) in kernels): the index vectors of a field or ti.ndrange."""
    it = itertools.product(*[range(s) for s in x.shape]) if isinstance(x, Field) else x
    return [IndexVector(t) for t in it]
