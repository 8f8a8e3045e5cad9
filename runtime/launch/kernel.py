"""`@gk.kernel`: a Python function compiled per device and variant (forward, adjoint, tangent).

The kernel keeps its typed IR (from the frontend), lowered IR per variant (from
core/passes and ad/), and one compiled specialisation per (device, variant,
code-affecting settings), each with a pre-built argument binder for fast launches.
"""

from __future__ import annotations

import contextlib
import warnings

from ...ad.pipeline import VARIANTS, build_variant, for_backend, seeded_variant, variant_log
from ...ad.variants import FORWARD, SEEDED, VariantKey, variant_key
from ...ad.uniform import NotUniform
from ...backends.analysis import written_params
from ...backends.base import CompileOptions
from ...core import config as _settings     # the module: its rules_generation counter
from ...core.config import config, float_type
from ...core.frontend import lower_function
from ...core.frontend.context import remember_enclosing_scope
from ...core.frontend.source import capture_source
from ...core.errors import CompileError, GradientRuleWarning
from ...core.func import Func
from ...core.ir import Function, format_function
from ...core.locks import compiling
from ...core.native import check_snippets
from ...core.types import ArrayType
from ...core.passes.scalarize import user_params
from ...core.passes.shifts import has_exclusive_adds
from ...core.passes.widen import widen_floats
from .bind import make_binder
from .bounds import plan as bounds_plan, scan as scan_accesses
from .cache import default_cache
from .device import get_device
from .kernel_facts import KernelFacts


def repeatable_launch(impl):
    """The backend's `relaunch`, or None where a subclass overrides `launch` but not `relaunch` (a plugin
    wrapping the CPU backend's launch, as the plugin tutorial's counting backend does): its `launch` takes only
    (compiled, dims, args), and repeating the CPU backend's packed launch would bypass it."""
    relaunch = getattr(impl, "relaunch", None)
    if relaunch is None:
        return None
    mro = type(impl).__mro__
    owner = {name: next((k for k in mro if name in vars(k)), None) for name in ("launch", "relaunch")}
    if owner["launch"] is None or owner["relaunch"] is None or issubclass(owner["relaunch"], owner["launch"]):
        return relaunch
    return None


class Specialization:
    """One compiled variant of a kernel on one device, with what a launch needs precomputed."""

    __slots__ = ("fn", "compiled", "options", "device", "variant", "launch", "relaunch", "written", "split", "has_split",
                 "nan_reread", "tid_ndim", "exclusive", "bounds", "bounds_fast", "bounds_rest", "adjoint_sources")

    def __init__(self, fn: Function, compiled, options: CompileOptions, device, variant: VariantKey = FORWARD,
                 bounds: tuple = ()):
        self.fn, self.compiled, self.options, self.device = fn, compiled, options, device
        self.variant = variant
        self.launch = device.impl.launch
        # a backend that can repeat a launch as packed (the CPU backend): `relaunch(compiled, token)` -> ran?,
        # and `launch(..., again=token)` (runtime/launch/plan.py); None: every launch packs
        self.relaunch = repeatable_launch(device.impl)
        self.tid_ndim = fn.attrs.get("tid_ndim", 1)
        self.split = fn.attrs.get("param_split", [])
        self.has_split = any(n > 1 for _, n in self.split)
        self.written = written_params(fn)
        # own-element adds without atomics, which another written parameter could race with (launch.py)
        self.exclusive = len(self.written) > 1 and has_exclusive_adds(fn)
        self.nan_reread = None          # runtime/launch/nan_check.py: written params the kernel reads back
        # an adjoint's gradient parameters: the user-level parameter each is the gradient of
        of = fn.attrs.get("adj_of")
        self.adjoint_sources = [user_params(fn)[k] for k in of] if of is not None else []
        # the forward kernel's unconditional affine accesses, proven in bounds at each launch
        # (runtime/launch/bounds.py): `x[i + c]` as one comparison of extents each, the rest in full; None: none
        self.bounds = bounds
        fast, self.bounds_rest = bounds_plan(self.bounds)
        self.bounds_fast = fast if self.bounds else None


def _name(variant) -> str:
    """A variant's name: VariantKey.name, or the declared name given as a string ("forward_ad")."""
    return variant if variant.__class__ is str else variant.name


def _key(variant) -> VariantKey:
    """The interned VariantKey of a key or a declared variant name."""
    return variant.interned() if variant.__class__ is VariantKey else VariantKey.parse(variant)


@contextlib.contextmanager
def _too_deep(name: str, variant):
    """A pass or code generator that runs out of Python stack on deeply nested IR (inlined @gk.func bodies
    can nest deeper than kernel source may) is a CompileError naming the kernel, not a RecursionError."""
    try:
        yield
    except RecursionError:
        raise CompileError(f"kernel '{name}' ({_name(variant)}): the code is too deeply nested to compile (blocks "
                           "inside blocks, including the bodies of inlined @gk.func calls); flatten it or move "
                           "inner parts into separate launches") from None


class Kernel:
    """A compiled-on-demand gradkit kernel. Launch it with `gk.launch(kernel, dim, inputs, outputs)`.
    Made by `@gk.kernel`; it compiles on its first launch per device and argument types.

    Args:
        pyfunc: the Python function whose source is the kernel (parameters annotated with gradkit types).
        enable_backward: compile an adjoint; False makes `tape.backward` and `adjoint=True` launches through
            it an error (a kernel that is never differentiated).
        max_unroll: unroll `for` loops over constant ranges of at most this many iterations (without
            `break`/`continue`) into straight-line code; None: keep them loops.
        default_fp: the type of float literals and `float(x)` in the body (gk.float32 or gk.float64); None
            follows `gk.config.default_fp`.
        remainder: "floored" (Python's `%` and `//`, the default) or "truncated" (Warp's kernels: `%` is C's,
            the sign of the dividend, floats fmod; `/` of two integers truncates; `*` with a matrix is
            the matrix product).
        loop_locals: "scoped" (the default: a local first assigned inside a loop body cannot be read after
            the loop) or "last" (Warp's kernels: after the loop it holds the last trip's value, zero when
            the loop never ran)."""

    _gk_kernel = True

    def __init__(self, pyfunc, enable_backward: bool = True, max_unroll: int | None = None,
                 default_fp=None, remainder: str = "floored", loop_locals: str = "scoped"):
        remember_enclosing_scope(pyfunc)
        capture_source(pyfunc)          # compile the text as it is now, whatever happens to the file later
        # the type of float literals and float(x) in the body; None follows gk.config.default_fp
        self.default_fp = None if default_fp is None else float_type(default_fp, "@gk.kernel default_fp")
        self.pyfunc = pyfunc
        self.key = pyfunc.__name__
        self.__name__ = pyfunc.__name__
        self.__doc__ = pyfunc.__doc__
        self.enable_backward = enable_backward
        self.recorded = True            # False after @gk.no_grad: launches never go on a tape
        # ((parameter index, name, struct type), ...) of struct and struct-array parameters, which compile
        # to one parameter per field; set with the binder (launches read it right after binder())
        self.struct_params: tuple = ()
        self.max_unroll = max_unroll
        self.remainder = remainder      # `%` in the body: "floored" (Python's) or "truncated" (C's, Warp's)
        self.loop_locals = loop_locals  # a loop body's own locals after the loop: "scoped" (error) or "last" (Warp's)
        self.param_types: tuple = ()    # ((name, type), ...): generic parameters' types (gradkit.warp's overloads)
        self._typed: Function | None = None
        self._typed_fp = None           # (own, gk.config) default_fp of _typed (None: set by widened())
        self._lowered: dict[str, Function] = {}
        self._folds: dict[VariantKey, bool] = {}   # seeded adjoint variant -> whether its seeds fold
        self._rules_generation = _settings.rules_generation
        self._specs: dict[tuple, Specialization] = {}
        self._last_spec: tuple | None = None   # (device, variant, codegen key, Specialization)
        self._binder = None
        self._plan = None               # the last forward launch, bound (runtime/launch/plan.py)
        self._plan_other = None         # the plan before it (double-buffered arrays alternate between two)
        self._plan_misses = 0
        self._facts: KernelFacts | None = None
        self._array_args: tuple = ()    # indices of the array parameters (set with the binder)
        self.rules_warned = False

    # IR ----------------------------------------------------------------------
    @property
    def typed_ir(self) -> Function:
        # the kernel's default_fp, and gk.config's (which @gk.func callees without their own follow); a change
        # of gk.config.default_fp also bumps rules_generation, so every lowered variant is rebuilt
        fp = (self.default_fp or config.default_fp, config.default_fp)
        if self._typed is None or self._typed_fp not in (None, fp):
            with compiling():
                if self._typed is None or self._typed_fp not in (None, fp):
                    self._typed = lower_function(self.pyfunc, "kernel", max_unroll=self.max_unroll,
                                                 default_fp=fp[0], remainder=self.remainder,
                                                 loop_locals=self.loop_locals, param_types=self.param_types)
                    self._typed_fp = fp
        return self._typed

    @property
    def params(self) -> list[tuple[str, object]]:
        return [(p.name, p.type) for p in self.typed_ir.params]


    def lowered(self, variant: VariantKey | str = FORWARD) -> Function:
        """The lowered IR of `variant` (a VariantKey or a declared name, "forward_ad" included)."""
        name = _name(variant)
        fn = self._lowered.get(name)
        if fn is not None and self._rules_generation == _settings.rules_generation:
            return fn
        with compiling(), _too_deep(self.key, name):
            return self._lower(name)

    def _lower(self, name: str) -> Function:
        if self._rules_generation != _settings.rules_generation:    # a custom rule was attached since
            self._lowered.clear()
            self._rules_generation = _settings.rules_generation
        fn = self._lowered.get(name)
        if fn is None and SEEDED in name:
            key = VariantKey.parse(name)
            fn = seeded_variant(self.lowered(key.unseeded), key.seeds)
            self._lowered[name] = fn
        if fn is None:
            spec = VARIANTS.get(name)
            if spec is None:
                raise ValueError(f"unknown kernel variant {name!r}; expected one of {tuple(VARIANTS)}")
            if name.startswith("adjoint"):
                self._require_backward()
            source = self.typed_ir if spec.source is None else self.lowered(spec.source)
            fn = build_variant(name, source)
            self._lowered[name] = fn
        return fn

    def seeded(self, base: VariantKey | str, positions: tuple[int, ...]) -> VariantKey:
        """The variant of adjoint `base` taking the gradients at `positions` (adjoint parameters) as one
        value each (ad/uniform.py); `base` itself when the adjoint needs them as arrays."""
        base = _key(base)
        variant = base.seeded(positions)
        if variant not in self._folds:
            try:
                self.lowered(variant)
                self._folds[variant] = True
            except NotUniform:
                self._folds[variant] = False
        return variant if self._folds[variant] else base

    def facts(self) -> KernelFacts:
        """What the runtime derives from this kernel's IR (runtime/launch/kernel_facts.py), for the rules in force."""
        f = self._facts
        if f is None or f.generation != _settings.rules_generation:
            f = self._facts = KernelFacts(self, _settings.rules_generation)
        return f

    def consumable(self) -> tuple:
        """User-level parameters whose gradient the adjoint reads at an overwriting store but does not reset
        (ad/consume.py): on a tape whose earlier launches used that memory, the consuming adjoint runs."""
        return self.facts().consumable

    def gather_sources(self) -> tuple:
        """The parameters whose gradients the stencil adjoint gathers (ad/gather.py); () when it scatters."""
        return tuple(self.lowered("adjoint_gather").attrs.get("gather_sources", ()))

    def backend_ir(self, variant: VariantKey | str, device) -> Function:
        """The IR `device`'s backend compiles for `variant`: the variant with the primitives the backend
        does not implement expanded (core/passes/expand.py)."""
        native = frozenset(getattr(device.impl, "native_prims", ()))
        key = (_name(variant), native)
        fn = self._lowered.get(key)
        if fn is None or self._rules_generation != _settings.rules_generation:
            fn = self._lowered[key] = for_backend(self.lowered(variant), native)
        return fn

    def pass_log(self, variant: VariantKey | str = FORWARD, device=None) -> list[tuple[str, str]]:
        """(pass name, printed IR after it) for every pass building `variant`, AD passes included; with a
        device, the backend stage too. Recomputed on each call: for the debugger, not for launches."""
        native = None
        if device is not None:
            native = frozenset(getattr(get_device(device).impl, "native_prims", ()))
        with compiling(), _too_deep(self.key, variant):
            return variant_log(self.typed_ir, _name(variant), native)

    def warn_rules(self) -> None:
        """Warn once about rule violations certain from the source (on the first launch a tape records:
        a kernel never differentiated, an optimiser step say, stays quiet)."""
        self.rules_warned = True
        for v in self.facts().rule_violations:
            warnings.warn(v.describe(self.key), GradientRuleWarning, stacklevel=4)

    def _require_backward(self) -> None:
        if not self.enable_backward:
            raise RuntimeError(f"kernel '{self.key}' was declared with enable_backward=False")

    def ir(self, adjoint: bool = False, tangent: bool = False, lowered: bool | None = None,
           variant: VariantKey | str | None = None) -> str:
        """The printed core IR: typed IR by default, the lowered adjoint/tangent IR when asked, or that of
        `variant` (a launch record's, say).

        Args:
            adjoint: the reverse (adjoint) kernel's IR.
            tangent: the tangent (forward-mode) kernel's IR.
            lowered: the forward kernel after the lowering passes, instead of the typed IR.
            variant: a variant name or key, e.g. a launch record's `variant` / `adjoint_variant` (what ran)."""
        if variant is not None or adjoint or tangent:
            return format_function(self.lowered(variant if variant is not None else variant_key(adjoint, tangent)))
        return format_function(self.lowered(FORWARD) if lowered else self.typed_ir)

    def source(self, device=None, adjoint: bool = False, tangent: bool = False,
               variant: VariantKey | str | None = None) -> str:
        """The generated code (LLVM IR, OpenCL C, ...) for `device`: of the forward kernel, its adjoint or
        tangent, or of `variant` (the one a launch record says ran).

        Args:
            device: a device name or `gk.Device`; None: the current device.
            adjoint: the reverse (adjoint) kernel's code.
            tangent: the tangent (forward-mode) kernel's code.
            variant: a variant name or key, e.g. a launch record's `variant` / `adjoint_variant` (what ran)."""
        dev = get_device(device)
        spec = self.specialization(dev, variant if variant is not None else variant_key(adjoint, tangent))
        return dev.impl.source(spec.compiled)

    # Compilation --------------------------------------------------------------
    def specialization(self, device, variant: VariantKey | str = FORWARD) -> Specialization:
        codegen = config.codegen_key()
        last = self._last_spec          # the previous lookup's answer: most launches repeat it
        if last is not None and last[0] is device and last[1] is variant and last[2] == codegen:
            return last[3]
        variant = _key(variant)          # a name, or a key made outside variant_key
        key = (device.name, variant.name, *codegen)
        spec = self._specs.get(key)
        if spec is not None:
            self._last_spec = (device, variant, codegen, spec)
            return spec
        with compiling(), _too_deep(self.key, variant):
            return self._specs.get(key) or self._compile(key, device, variant)

    def _compile(self, key: tuple, device, variant: VariantKey) -> Specialization:
        """Lower and compile `variant` for `device` (under COMPILING)."""
        fn = self.backend_ir(variant, device)
        try:
            check_snippets(fn, device.backend)
        except CompileError as exc:
            raise CompileError(f"kernel '{self.key}' on device '{device.name}': {exc}") from None
        # the forward kernel's affine accesses are proven at each launch; under debug those go unchecked
        # per thread
        bounds, proven = scan_accesses(fn) if variant is FORWARD else ((), frozenset())
        proven = proven if config.debug else frozenset()
        options = CompileOptions(debug=config.debug, stack_size=config.adjoint_stack_size,
                                 fast_math=config.fast_math, cache=default_cache(), proven=proven)
        compiled = device.impl.compile(device.info, fn, options)
        spec = self._specs[key] = Specialization(fn, compiled, options, device, variant, bounds)
        return spec

    def binder(self):
        """The argument converter of launches (built with the typed IR, which also sets struct_params)."""
        if self._binder is None:
            self.struct_params = self.typed_ir.attrs.get("param_structs", ())
            self._array_args = tuple(self.array_param_indices())   # where bound arguments are arrays
            self._binder = make_binder(self.key, self.params)
        return self._binder

    def widened(self) -> Kernel:
        """This kernel with every float32 type made float64 (core/passes/widen.py), for re-checking its
        gradients without float32 rounding; WidenError when it calls a @gk.func or native code."""
        wide = Kernel(self.pyfunc, enable_backward=self.enable_backward, max_unroll=self.max_unroll,
                      remainder=self.remainder, loop_locals=self.loop_locals)
        wide._typed = widen_floats(self.typed_ir)
        return wide

    def array_param_indices(self) -> list[int]:
        return [k for k, (_, t) in enumerate(self.params) if isinstance(t, ArrayType)]

    def grad(self, dim, inputs=(), outputs=(), device=None):
        """Taichi's `kernel.grad()`: run the adjoint using every array's `.grad`.

        Args:
            dim: the launch grid, as the forward launch's.
            inputs: the forward launch's inputs.
            outputs: the forward launch's outputs (their `.grad` are the incoming gradients).
            device: where to run; None: the arrays' device."""
        from .launch import launch
        return launch(self, dim, inputs, outputs, device=device, adjoint=True)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"kernel '{self.key}' is launched with gk.launch({self.key}, dim, inputs=[...], outputs=[...])")

    def __repr__(self) -> str:
        return f"<gk.kernel {self.key}>"


def kernel(fn=None, *, enable_backward: bool = True, max_unroll: int | None = None, default_fp=None,
           remainder: str = "floored", loop_locals: str = "scoped"):
    """Decorator: `@gk.kernel` or `@gk.kernel(enable_backward=..., max_unroll=..., default_fp=gk.float64)`.
    `remainder="truncated"` makes `%` in the body C's (the sign of the dividend; floats: fmod), as Warp's
    kernels compute it; the default "floored" is Python's. `@gk.func(remainder=...)` takes it too.

    Args:
        fn: the function decorated (given when used bare, `@gk.kernel`).
        enable_backward: compile an adjoint; False makes `tape.backward` and `adjoint=True` launches through
            it an error (a kernel that is never differentiated).
        max_unroll: unroll `for` loops over constant ranges of at most this many iterations (without
            `break`/`continue`) into straight-line code; None: keep them loops.
        default_fp: the type of float literals and `float(x)` in the body (gk.float32 or gk.float64); None
            follows `gk.config.default_fp`.
        remainder: "floored" (Python's `%` and `//`, the default) or "truncated" (Warp's kernels: `%` is C's,
            the sign of the dividend, floats fmod; `/` of two integers truncates; `*` with a matrix is
            the matrix product).
        loop_locals: "scoped" (the default: a local first assigned inside a loop body cannot be read after
            the loop) or "last" (Warp's kernels: after the loop it holds the last trip's value, zero when
            the loop never ran)."""
    if fn is None:
        return lambda f: Kernel(f, enable_backward=enable_backward, max_unroll=max_unroll,
                                default_fp=default_fp, remainder=remainder, loop_locals=loop_locals)
    return Kernel(fn, enable_backward=enable_backward, max_unroll=max_unroll, default_fp=default_fp,
                  remainder=remainder, loop_locals=loop_locals)


def func(fn=None, **options):
    """Decorator: `@gk.func` marks a device function callable from kernels and other functions; it may
    return a value or a tuple, and is differentiated with the kernels that call it.

    Args:
        fn: the function decorated (given when used bare, `@gk.func`).
        options: as `@gk.kernel`'s: `max_unroll`, `default_fp`, `remainder`, `loop_locals`."""
    if fn is None:
        return lambda f: Func(f, **options)
    return Func(fn, **options)
