"""Warp's host API over gradkit's runtime: arrays (`wp.array(...)` and `wp.array[float]`), `wp.launch`
with Warp's arguments, graph capture replayed from Python, `wp.Tape`, `wp.ScopedTimer`, `wp.config`."""

from __future__ import annotations

import contextlib
import time
import typing

from .. import core as _core  # noqa: F401
from ..core import types as T
from ..core.config import config as _gk_config
from ..runtime.arrays import array as _array_mod
from ..runtime.arrays import creation as _creation
from ..runtime.arrays.host_ops import copy as _gk_copy
from ..core.errors import CompileError
from ..core.frontend.context import remember_enclosing_scope
from ..core.func import Func
from ..runtime.launch.kernel import Kernel
from ..runtime.launch.launch import launch as _gk_launch
from .device import to_gk
from .errors import WarpFeatureMissing
from .generic import AnyArray, GenericKernel, has_generic
from .transforms import multiplies_transforms
from .tape import Tape as _WarpTape, consume_for_adjoint_launch, retain

_GkArray = _array_mod.array


def _dtype(dtype):
    return None if dtype is None else T.as_type(dtype)


# --------------------------------------------------------------------------- arrays

class _ArrayType(type):
    """`wp.array` is gradkit's array: called it makes one, subscripted it is a kernel annotation
    (`wp.array[float]`, `wp.array2d[wp.vec3]`), and isinstance() checks gradkit arrays."""

    def __call__(cls, data=None, dtype=None, shape=None, strides=None, ptr=None, capacity=None, device=None,
                 pinned=False, copy=True, owner=False, deleter=None, ndim=None, grad=None,
                 requires_grad=False, retain_grad=False):
        if ptr is not None or capacity is not None or strides is not None:
            raise WarpFeatureMissing("array(ptr=, capacity=, strides=)", "arrays over foreign pointers or with "
                                     "explicit strides; use wp.from_torch / gradkit's DLPack interop")
        if cls.ndim_default and ndim is None and data is None and shape is None:
            ndim = cls.ndim_default
        if dtype is typing.Any and data is None and shape is None:     # a generic kernel's annotation
            return AnyArray(ndim or 1)
        a = _GkArray(data, dtype=_dtype(dtype), shape=shape, device=to_gk(device), requires_grad=requires_grad,
                     ndim=ndim)
        if grad is not None and isinstance(a, _GkArray):
            a.requires_grad = True
            _gk_copy(a.grad, grad)
        return retain(a, retain_grad) if retain_grad else a

    def __getitem__(cls, item):
        dtype, ndim = (item, cls.ndim_default or 1) if not isinstance(item, tuple) else item
        if dtype is typing.Any:
            return AnyArray(ndim)
        return _GkArray(dtype=_dtype(dtype), ndim=ndim)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _GkArray)


class array(metaclass=_ArrayType):
    ndim_default = None


class array1d(metaclass=_ArrayType):
    ndim_default = 1


class array2d(metaclass=_ArrayType):
    ndim_default = 2


class array3d(metaclass=_ArrayType):
    ndim_default = 3


class array4d(metaclass=_ArrayType):
    ndim_default = 4


def zeros(shape=None, dtype=float, device=None, requires_grad=False, pinned=False, retain_grad=False, **kwargs):
    return retain(_creation.zeros(shape if shape is not None else 0, dtype=_dtype(dtype), device=to_gk(device),
                       requires_grad=requires_grad), retain_grad)


def ones(shape=None, dtype=float, device=None, requires_grad=False, pinned=False, retain_grad=False, **kwargs):
    return retain(_creation.ones(shape if shape is not None else 0, dtype=_dtype(dtype), device=to_gk(device),
                      requires_grad=requires_grad), retain_grad)


def empty(shape=None, dtype=float, device=None, requires_grad=False, pinned=False, retain_grad=False, **kwargs):
    return retain(_creation.empty(shape if shape is not None else 0, dtype=_dtype(dtype), device=to_gk(device),
                       requires_grad=requires_grad), retain_grad)


def full(shape=None, value=0, dtype=None, device=None, requires_grad=False, pinned=False, retain_grad=False,
         **kwargs):
    if dtype is None:                   # Warp infers it from the value
        dtype = float if isinstance(value, float) else int if isinstance(value, int) else None
    return retain(_creation.full(shape if shape is not None else 0, value, dtype=_dtype(dtype),
                                 device=to_gk(device), requires_grad=requires_grad), retain_grad)


def _like(src, device, requires_grad):
    return (src.shape, src.dtype, to_gk(device) or src.device,
            src.requires_grad if requires_grad is None else requires_grad)


def zeros_like(src, device=None, requires_grad=None, pinned=None, retain_grad=False):
    shape, dtype, dev, rg = _like(src, device, requires_grad)
    return retain(_creation.zeros(shape, dtype=dtype, device=dev, requires_grad=rg), retain_grad)


def ones_like(src, device=None, requires_grad=None, pinned=None, retain_grad=False):
    shape, dtype, dev, rg = _like(src, device, requires_grad)
    return retain(_creation.ones(shape, dtype=dtype, device=dev, requires_grad=rg), retain_grad)


def empty_like(src, device=None, requires_grad=None, pinned=None, retain_grad=False):
    shape, dtype, dev, rg = _like(src, device, requires_grad)
    return retain(_creation.empty(shape, dtype=dtype, device=dev, requires_grad=rg), retain_grad)


def full_like(src, value, device=None, requires_grad=None, pinned=None, retain_grad=False):
    shape, dtype, dev, rg = _like(src, device, requires_grad)
    return retain(_creation.full(shape, value, dtype=dtype, device=dev, requires_grad=rg), retain_grad)


def clone(src, device=None, requires_grad=None, pinned=None, retain_grad=False):
    shape, dtype, dev, rg = _like(src, device, requires_grad)
    out = _creation.empty(shape, dtype=dtype, device=dev, requires_grad=rg)
    _gk_copy(out, src)
    return retain(out, retain_grad)


def copy(dest, src, dest_offset: int = 0, src_offset: int = 0, count: int = 0):
    """Warp's copy: count 0 copies everything from the offsets on."""
    if _capturing():
        _CAPTURE[-1].ops.append((copy, (dest, src, dest_offset, src_offset, count), {}))
        return
    _gk_copy(dest, src, dest_offset, src_offset, count or None)


# --------------------------------------------------------------------------- kernels

class WarpKernel(Kernel):
    """A kernel defined by `@wp.kernel`: gradkit's, refusing what Warp means differently in its typed IR
    (`a * b` of two transforms is Warp's transform_multiply: a WarpFeatureMissing naming it)."""

    is_generic = False

    @property
    def typed_ir(self):
        fn = Kernel.typed_ir.fget(self)
        if getattr(self, "_warp_checked", None) is not fn:
            if multiplies_transforms(fn):
                raise WarpFeatureMissing("transform * transform", f"kernel '{self.key}' multiplies two transforms "
                                         "with `*` (Warp's transform_multiply); write wp.transform_multiply(a, b)")
            self._warp_checked = fn
        return fn


class GenericWarpKernel(GenericKernel, WarpKernel):
    """A `@wp.kernel` with generic parameters (`typing.Any`, `wp.array[Any]`): `wp.launch` runs the
    specialisation for its arguments' types (generic.py), made once per signature; `wp.overload` makes one
    ahead. It has no IR of its own."""

    def __init__(self, pyfunc, **options):
        WarpKernel.__init__(self, pyfunc, **options)

        def make(param_types):
            scope = pyfunc.__dict__.get("__gk_enclosing__")
            k = WarpKernel(pyfunc, **options)
            if scope is not None:           # the defining scope, not the launching one
                pyfunc.__gk_enclosing__ = scope
            k.param_types = param_types
            k.key, k.recorded = self.key, self.recorded
            return k
        self._init_generic(make)

    @property
    def typed_ir(self):
        _, name, ann = self._generic[0]
        raise CompileError(f"kernel '{self.key}' is generic (parameter '{name}' is {ann!r}): wp.launch specialises "
                           "it from its arguments' types, wp.overload(kernel, [types...]) ahead of a launch")


def _warp_builtins(fn):
    """`fn` with Python's min / max / abs / print in its body meaning Warp's (fmin/fmax NaN rules, Warp's tie and
    zero gradients), as in a Warp kernel, where they are Warp's builtins."""
    from .builtins import WARP_MACROS
    fn.__gk_builtins__ = {name: WARP_MACROS[name] for name in ("min", "max", "abs", "print")}
    return fn


# Warp's rules in the frontend: C's integer `%` and `/`, float fmod, `*` of matrices; a local first assigned
# inside a loop body holds its last trip's value after the loop
WARP_RULES = {"remainder": "truncated", "loop_locals": "last"}


def kernel(f=None, *, enable_backward=None, module=None, launch_bounds=None, **options):
    """`@wp.kernel`: a gradkit kernel with Warp's arithmetic (C's integer `%` and `/`, float fmod, `*` of
    matrices), Warp's loop locals (read after the loop: the last trip's value) and Python's min / max / abs
    as Warp's."""
    def make(fn):
        backward = config.enable_backward if enable_backward is None else enable_backward
        _warp_builtins(fn)
        remember_enclosing_scope(fn)        # string annotations ('Any') resolve in the defining scope
        cls = GenericWarpKernel if has_generic(fn) else WarpKernel
        return cls(fn, enable_backward=bool(backward), max_unroll=config.max_unroll, **WARP_RULES)
    return make if f is None else make(f)


def func(f=None, *, name=None, **options):
    """`@wp.func`: a gradkit device function with Warp's arithmetic, as `@wp.kernel`'s."""
    def make(fn):
        return Func(_warp_builtins(fn), **WARP_RULES)
    return make if f is None else make(f)


def overload(kernel, arg_types=None):
    """`wp.overload(kernel, [types...])` / `wp.overload(kernel, {"name": type})`: the specialisation of a
    generic kernel for those types, registered so launches whose arguments have them reuse it; as a decorator
    over a body-less function of the kernel's name with concrete annotations, the same from its annotations."""
    if not isinstance(kernel, Kernel):
        fn = kernel
        kernel = getattr(fn, "__globals__", {}).get(getattr(fn, "__name__", None))
        if not isinstance(kernel, Kernel):
            raise RuntimeError(f"Failed to find a kernel named '{getattr(fn, '__name__', fn)}' in module "
                               f"{getattr(fn, '__module__', '?')}")
        from .generic import annotations
        arg_types = [ann for _, ann in annotations(fn)]
    if not getattr(kernel, "is_generic", False):
        raise RuntimeError(f"Only generic kernels can be overloaded.  Kernel {kernel.key} is not generic")
    return kernel.overload([] if arg_types is None else arg_types)


def _specialised(kernel, inputs, outputs):
    """The kernel a launch runs: a generic kernel's specialisation for its arguments' types."""
    if getattr(kernel, "is_generic", False):
        return kernel.resolve(list(inputs or ()) + list(outputs or ()))
    return kernel


def constant(x):
    """`wp.constant(x)`: module-level values are folded into kernels by gradkit anyway."""
    return x


# --------------------------------------------------------------------------- launch and capture

class Graph:
    """A captured sequence of launches and copies, replayed by `wp.capture_launch` (from Python)."""

    def __init__(self, device=None):
        self.device, self.ops = device, []


_CAPTURE: list[Graph] = []


def _capturing() -> bool:
    return bool(_CAPTURE)


def launch(kernel, dim=None, inputs=(), outputs=(), adj_inputs=(), adj_outputs=(), device=None, stream=None,
           adjoint=False, record_tape=True, record_cmd=False, max_blocks=0, block_dim=256):
    if record_cmd:
        raise WarpFeatureMissing("launch(record_cmd=True)", "replay the launch with wp.launch instead")
    if isinstance(dim, list):
        dim = tuple(dim)
    kernel = _specialised(kernel, inputs, outputs)
    args = dict(inputs=list(inputs or ()), outputs=list(outputs or ()), device=to_gk(device), adjoint=adjoint,
                adj_inputs=list(adj_inputs) if adj_inputs else None,
                adj_outputs=list(adj_outputs) if adj_outputs else None, record_tape=record_tape)
    if adjoint:         # Warp's stores reset the gradient they read when it is the array's own .grad
        args["consume"] = consume_for_adjoint_launch(kernel, args["inputs"] + args["outputs"],
                                                     list(adj_inputs or ()) + list(adj_outputs or ()))
    if _capturing():
        _CAPTURE[-1].ops.append((_gk_launch, (kernel, dim), args))
        return None
    _gk_launch(kernel, dim, **args)
    return None


class ScopedCapture:
    """`with wp.ScopedCapture() as capture:` records the block's `wp.launch` and `wp.copy` calls without
    running them (as Warp's capture does), and a `wp.Tape`'s recording, backward, zero and reset (Tape
    below); `wp.capture_launch(capture.graph)` replays them with the same arguments. Other work in the
    block (array methods) runs at once."""

    def __init__(self, device=None, stream=None, force_module_load=None, external=False, apic=False,
                 capture_mode=None):
        self.device, self.graph, self.active = device, None, False

    def __enter__(self) -> "ScopedCapture":
        self.graph = Graph(self.device)
        _CAPTURE.append(self.graph)
        self.active = True
        return self

    def __exit__(self, *exc) -> None:
        _CAPTURE.remove(self.graph)
        self.active = False


def capture_begin(device=None, stream=None, force_module_load=None, external=False, **kwargs) -> None:
    _CAPTURE.append(Graph(device))


def capture_end(device=None, stream=None) -> Graph:
    return _CAPTURE.pop()


def capture_launch(graph: Graph, stream=None) -> None:
    for fn, args, kwargs in graph.ops:
        fn(*args, **kwargs)


# --------------------------------------------------------------------------- tape and timer

class Tape(_WarpTape):
    """`wp.Tape()`: Warp 1.19's tape semantics over gradkit's (tape.py), with `record_scope`.

    Inside a capture (`wp.ScopedCapture`, `capture_begin`), `with tape:`, `backward`, `zero` and `reset` are
    captured with the launches, in order, and run at each `wp.capture_launch`, as Warp's graph holds the
    forward and the adjoint kernels (example_diffray captures its whole taped step on a CUDA device). Each
    replay starts the records afresh and keeps the gradients, which Warp's replays add into as well."""

    def __enter__(self) -> "Tape":
        if _capturing():
            _CAPTURE[-1].ops.append((self._replay_enter, (), {}))
            self._captured_by = _CAPTURE[-1]
            return self
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb) -> None:
        graph = self.__dict__.pop("_captured_by", None)
        if graph is None:
            return super().__exit__(exc_type, exc, tb)
        if exc_type is None:
            graph.ops.append((super().__exit__, (None, None, None), {}))
        return None

    def _replay_enter(self) -> None:
        self.forget_records()
        super().__enter__()

    def backward(self, loss=None, grads: dict | None = None) -> None:
        if _capturing():
            _CAPTURE[-1].ops.append((super().backward, (loss, grads), {}))
            return
        super().backward(loss, grads)

    def zero(self) -> None:
        if _capturing():
            _CAPTURE[-1].ops.append((super().zero, (), {}))
            return
        super().zero()

    def reset(self) -> None:
        if _capturing():
            _CAPTURE[-1].ops.append((super().reset, (), {}))
            return
        super().reset()

    @contextlib.contextmanager
    def record_scope(self, name: str, color=None):
        with self.scope(name):
            yield self


class ScopedTimer:
    """Warp's ScopedTimer: prints `name took x ms` when `print`; `active=False` times nothing; `dict`
    collects the elapsed milliseconds under `name`."""

    def __init__(self, name, active=True, print=True, detailed=False, dict=None, use_nvtx=False,
                 color="rapids", synchronize=False, cuda_filter=0, report_func=None, skip_tape=False):
        self.name, self.active, self.print, self.dict = name, active, print, dict
        self.synchronize, self.report_func = synchronize, report_func
        self.elapsed = 0.0

    def __enter__(self) -> "ScopedTimer":
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if not self.active:
            return
        if self.synchronize:
            from .device import synchronize
            synchronize()
        self.elapsed = (time.perf_counter() - self._t0) * 1e3
        if self.dict is not None:
            self.dict.setdefault(self.name, []).append(self.elapsed)
        if self.print:
            print(f"{self.name} took {self.elapsed:.2f} ms")


# --------------------------------------------------------------------------- config

class _Config:
    """`wp.config`: Warp's settings; those with a gradkit meaning write gradkit's (`verify_fp` is
    `check_nan`, `mode = "debug"` is `debug`, `cache_kernels` is `cache`), the rest are kept and do
    nothing."""

    _MAP = {"verify_fp": "check_nan", "cache_kernels": "cache"}

    def __init__(self):
        object.__setattr__(self, "_own", {"enable_backward": True, "max_unroll": None, "quiet": False,
                                          "verbose": False, "mode": "release", "verify_cuda": False,
                                          "print_launches": False, "kernel_cache_dir": None,
                                          "enable_vector_component_overwrites": False, "lineinfo": False})

    def __getattr__(self, name):
        if name in self._MAP:
            return getattr(_gk_config, self._MAP[name])
        if name == "mode":
            return "debug" if _gk_config.debug else self._own["mode"]
        if name in self._own:
            return self._own[name]
        raise AttributeError(f"wp.config has no setting {name!r}")

    def __setattr__(self, name, value) -> None:
        if name in self._MAP:
            setattr(_gk_config, self._MAP[name], value)
        elif name == "mode":
            _gk_config.debug = value == "debug"
        self._own[name] = value


config = _Config()
