"""`wp.Kernel(func=f)`, Warp's constructor form of `@wp.kernel`: the kernel is lowered at once, forward and
(with backward enabled) adjoint, as Warp builds a kernel's adjoint at construction, so an error in its
body surfaces there and not at the first launch. `isinstance(k, wp.Kernel)` holds for every gradkit
kernel, `@wp.kernel`'s included."""

from __future__ import annotations

from ..runtime.launch.kernel import Kernel as _GkKernel
from .errors import WarpFeatureMissing


class _KernelType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _GkKernel)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _GkKernel)

    def __call__(cls, func=None, key=None, module=None, options=None, code_transformers=None):
        from .runtime import kernel
        if func is None:
            raise TypeError("wp.Kernel() needs func=, the kernel's Python function")
        if code_transformers:
            raise WarpFeatureMissing("Kernel(code_transformers=)", "AST transformers of Warp's code generator")
        k = kernel(func, enable_backward=(options or {}).get("enable_backward"))
        if key is not None:
            k.key = key
        if k.is_generic:                        # typed per launch: its specialisations lower when made
            return k
        k.typed_ir                              # noqa: B018  (lowers the body: its errors are raised here)
        if k.enable_backward:
            k.ir(adjoint=True)
        return k


class Kernel(metaclass=_KernelType):
    """`wp.Kernel(func=f, key=None, module=None, options=None)`: a gradkit kernel, lowered forward and
    adjoint when made (module= is accepted: gradkit compiles per kernel)."""
