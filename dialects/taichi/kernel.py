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

    def __init__(self, fn, obj=None, cache=None):
        self.pyfunc = fn
        self.obj = obj
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._sig = inspect.signature(fn)
        self._cache = {} if cache is None else cache
        self._base = self

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        bound = TiKernel(self.pyfunc, obj, self._cache)
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
                from .translate import namespace_of
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
            from .translate import namespace_of
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
        from .translate import namespace_of
        ns = {**namespace_of(self.pyfunc), **static, **values}
        for st in tr.host_assigns:      # top-level locals a loop bound may use (n = x.shape[0])
            try:
                exec(compile(__import__("ast").Module(body=[st], type_ignores=[]), "<bounds>", "exec"), ns)  # noqa: S102
            except Exception:
                pass
        return ns

    def __call__(self, *args, **kwargs):
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
