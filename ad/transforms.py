"""Function transforms usable inside kernels: `gk.jvp(f)` and `gk.grad(f, argnum)`.

Both return new device functions whose IR is derived from `f`'s (forward mode,
ad/forward.py), so they compose: `gk.grad(gk.grad(f))` is the second derivative.
Results are cached per (function, transform, argnum).
"""

from __future__ import annotations

from ..core.errors import CompileError
from ..core.func import Func
from ..core.ir import Builder, Function, Param, Region
from ..core.ops import Op
from ..core.passes import lower
from .forward import tangent_of_func

_CACHE: dict = {}


class DerivedFunc(Func):
    """A device function built from another one's IR rather than from Python source."""

    def __init__(self, name: str, build):
        self.pyfunc, self.options, self.key, self.__name__ = None, {}, name, name
        self.__doc__ = f"derived device function {name}"
        self._build, self._ir = build, None
        self.custom_grad = self.custom_replay = self.native = None

    def ir_function(self, building: tuple = ()) -> Function:
        if self._ir is None:
            self._ir = self._build(building + (self,))
        return self._ir


def _scalar_source(f: Func, building, what: str) -> Function:
    fn = f.ir_function(building)
    for p in fn.params:
        if not p.type.is_scalar:
            raise CompileError(f"gk.{what}({f.__name__}): only scalar parameters are supported, "
                               f"'{p.name}' is {p.type.name}")
    return lower(fn)


def _static(fn):
    fn._gk_static = True   # the frontend calls it at compile time when it appears inside a kernel
    return fn


@_static
def jvp(f: Func) -> Func:
    """`gk.jvp(f)`: a device function taking (primals..., tangents...) and returning (values..., tangents...).

    Args:
        f: a `@gk.func` of float scalars (usable inside kernels; `gk.jvp(gk.jvp(f))` nests)."""
    key = ("jvp", f)
    if key not in _CACHE:
        def build(building):
            out, _ = tangent_of_func(_scalar_source(f, building, "jvp"))
            out.name = f"jvp_{f.__name__}"
            return out
        _CACHE[key] = DerivedFunc(f"jvp_{f.__name__}", build)
    return _CACHE[key]


@_static
def grad(f: Func, argnum: int = 0) -> Func:
    """`gk.grad(f, argnum)`: a device function returning ∂f/∂(argument argnum) for a scalar-valued `f`.

    Args:
        f: a `@gk.func` returning one float (`gk.grad(gk.grad(f))` is the second derivative).
        argnum: the index of the float parameter to differentiate with respect to."""
    key = ("grad", f, argnum)
    if key not in _CACHE:
        def build(building):
            src = _scalar_source(f, building, "grad")
            if len(src.ret_types) != 1 or not src.ret_types[0].is_float:
                raise CompileError(f"gk.grad({f.__name__}): the function must return one float value")
            if not 0 <= argnum < len(src.params) or not src.params[argnum].type.is_float:
                raise CompileError(f"gk.grad({f.__name__}, argnum={argnum}): argument {argnum} must be a float")
            tan, float_params = tangent_of_func(src)
            params = [Param(p.name, p.type) for p in src.params]
            body = Region()
            b = Builder(body, src.loc)
            seeds = [b.const(1.0 if k == argnum else 0.0, src.params[k].type) for k in float_params]
            call = b.emit(Op.CALL, [p.value for p in params] + seeds, tan.ret_types, {"func": tan})
            body.yields = [call.results[-1]]
            out = Function(f"grad_{f.__name__}", params, body, [tan.ret_types[-1]], "func", src.loc)
            return out
        _CACHE[key] = DerivedFunc(f"grad_{f.__name__}_{argnum}", build)
    return _CACHE[key]
