"""`@gk.func`: a device function callable from kernels and other functions."""

from __future__ import annotations

from .config import config, float_type, rules_changed
import inspect

from .frontend import is_generic, lower_function
from .frontend.context import remember_enclosing_scope
from .frontend.source import capture_source
from .locks import COMPILING


class Func:
    """A Python function compiled as a gradkit device function (typed from its annotations)."""

    _gk_func = True     # how the frontend recognises a device function (it sits below this module)

    def __init__(self, pyfunc, **options):
        remember_enclosing_scope(pyfunc)
        capture_source(pyfunc)          # compile the text as it is now (core/frontend/source.py)
        if options.get("default_fp") is not None:
            options["default_fp"] = float_type(options["default_fp"], f"@gk.func {pyfunc.__name__}: default_fp")
        self.pyfunc, self.options = pyfunc, options
        self.key = getattr(pyfunc, "__qualname__", pyfunc.__name__)
        self.__name__ = pyfunc.__name__
        self.__doc__ = pyfunc.__doc__
        self._ir = None
        self._ir_fp = None          # the default_fp _ir was lowered with
        self.custom_grad = None     # a Func set by @gk.func_grad
        self.custom_replay = None   # a Func set by @gk.func_replay
        self.native = None          # snippets set by @gk.func_native
        self._generic = None        # ((index, name, annotation), ...) of generic parameters, once read

    def ir_function(self, building: tuple = (), views: tuple = (), param_types: tuple = ()):
        """The typed IR of this function (built once, then cached). `views` ((param index, base array
        type, number of leading indices), ...) asks for the variant whose array parameters at those indices
        receive sub-array views: the base array, its leading indices appended as trailing int32 params.
        `param_types` ((name, type), ...) gives the generic parameters' types at a call: one variant each."""
        fp = self.default_fp
        if views or param_types:
            return self._view_variant(building, views, fp, param_types)
        if self._ir is None or self._ir_fp is not fp:
            with COMPILING:
                if self._ir is None or self._ir_fp is not fp:
                    self._ir = lower_function(self.pyfunc, "func", building + (self,),
                                              **{**self.options, "default_fp": fp})
                    self._ir_fp = fp
        return self._ir

    @property
    def default_fp(self):
        """The type of this function's float literals and float(x): its own default_fp option, else
        gk.config.default_fp (not the calling kernel's: the function is compiled once for every caller)."""
        return self.options.get("default_fp") or config.default_fp

    def generic_params(self) -> tuple:
        """((index, name, annotation), ...) of the parameters annotated generically (typing.Any, or an
        annotation with `_gk_generic`), which each call types from its arguments; () for most functions."""
        if getattr(self, "_generic", None) is None:     # (subclasses may skip __init__)
            pyfunc = getattr(self, "pyfunc", None)
            if not callable(pyfunc):      # a function built from IR (wp.grad's): typed already
                self._generic = ()
                return ()
            try:
                sig = inspect.signature(pyfunc, eval_str=True, locals=getattr(pyfunc, "__gk_enclosing__", None))
            except Exception:       # an annotation that does not evaluate: the frontend names it
                sig = inspect.signature(pyfunc)
            self._generic = tuple((k, name, p.annotation) for k, (name, p) in enumerate(sig.parameters.items())
                                  if is_generic(p.annotation))
        return self._generic

    def _view_variant(self, building: tuple, views: tuple, fp, param_types: tuple = ()):
        key = (views, fp, param_types)
        with COMPILING:
            variants = self.__dict__.setdefault("_view_variants", {})
            if key not in variants:
                variants[key] = lower_function(self.pyfunc, "func", building + (self,), views=views,
                                               param_types=param_types, **{**self.options, "default_fp": fp})
            return variants[key]

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@gk.func '{self.__name__}' can only be called inside a kernel or another @gk.func")

    def __repr__(self) -> str:
        return f"<gk.func {self.key}>"


def func_grad(f: Func):
    """`@gk.func_grad(f)`: the decorated function is f's custom adjoint (f's inputs, then output adjoints;
    it updates `gk.adjoint[x] += ...`).

    Args:
        f: the `@gk.func` whose adjoint the decorated function replaces. The decorated function takes f's
            parameters followed by the adjoint of each output (`adj_ret` for a single return)."""
    def deco(pyfunc):
        g = Func(pyfunc, grad_of=f, **_own_fp(f))
        f.custom_grad = g
        rules_changed()
        return g
    return deco


def func_replay(f: Func):
    """`@gk.func_replay(f)`: what runs instead of f in the forward replay of the backward pass.

    Args:
        f: the `@gk.func` replayed; the decorated function has the same signature and returns what f does."""
    def deco(pyfunc):
        r = Func(pyfunc, **_own_fp(f))
        f.custom_replay = r
        rules_changed()
        return r
    return deco


def _own_fp(f) -> dict:
    """A custom gradient or replay function computes at the default_fp its function declares."""
    fp = getattr(f, "options", {}).get("default_fp")
    return {"default_fp": fp} if fp is not None else {}
