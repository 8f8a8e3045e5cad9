"""`@gk.func`: a device function callable from kernels and other functions."""

from __future__ import annotations

from .locks import COMPILING

# Bumped whenever a custom rule (func_grad / func_replay / func_native) is attached to a function: kernels
# compiled before lower and compile again (part of config.codegen_key()).
rules_generation = 0


def rules_changed() -> None:
    global rules_generation
    rules_generation += 1


class Func:
    """A Python function compiled as a gradkit device function (typed from its annotations)."""

    _gk_func = True

    def __init__(self, pyfunc, **options):
        from .frontend.context import remember_enclosing_scope
        remember_enclosing_scope(pyfunc)
        self.pyfunc, self.options = pyfunc, options
        self.key = getattr(pyfunc, "__qualname__", pyfunc.__name__)
        self.__name__ = pyfunc.__name__
        self.__doc__ = pyfunc.__doc__
        self._ir = None
        self.custom_grad = None     # a Func set by @gk.func_grad
        self.custom_replay = None   # a Func set by @gk.func_replay
        self.native = None          # snippets set by @gk.func_native

    def ir_function(self, building: tuple = (), views: tuple = ()):
        """The typed IR of this function (built once, then cached). `views` ((param index, base array
        type, number of leading indices), ...) asks for the variant whose array parameters at those indices
        receive sub-array views: the base array, its leading indices appended as trailing int32 params."""
        if views:
            return self._view_variant(building, views)
        if self._ir is None:
            from .frontend import lower_function
            with COMPILING:
                if self._ir is None:
                    self._ir = lower_function(self.pyfunc, "func", building + (self,), **self.options)
        return self._ir

    def _view_variant(self, building: tuple, views: tuple):
        from .frontend import lower_function
        with COMPILING:
            variants = self.__dict__.setdefault("_view_variants", {})
            if views not in variants:
                variants[views] = lower_function(self.pyfunc, "func", building + (self,), views=views,
                                                 **self.options)
            return variants[views]

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@gk.func '{self.__name__}' can only be called inside a kernel or another @gk.func")

    def __repr__(self) -> str:
        return f"<gk.func {self.key}>"


def func_grad(f: Func):
    """`@gk.func_grad(f)`: the decorated function is f's custom adjoint (f's inputs, then output adjoints;
    it updates `gk.adjoint[x] += ...`)."""
    def deco(pyfunc):
        g = Func(pyfunc, grad_of=f)
        f.custom_grad = g
        rules_changed()
        return g
    return deco


def func_replay(f: Func):
    """`@gk.func_replay(f)`: what runs instead of f in the forward replay of the backward pass."""
    def deco(pyfunc):
        r = Func(pyfunc)
        f.custom_replay = r
        rules_changed()
        return r
    return deco
