"""The backend plugin interface: the whole contract between gradkit and a backend.

A backend turns *lowered* core IR (every value scalar; see core/ir.py) into
something it can launch, owns device memory, and launches. Built-ins and
third-party plugins implement exactly this class and register it under the
entry-point group ``gradkit.backends``. backends/README.md documents it.

Lowered IR a backend receives (`compile(device, fn, options)`):
  * `fn.params`: arrays (`ArrayType(dtype, ndim)`; vector/matrix dtypes are stored
    as `ncomp` consecutive scalars per element) and scalars (float32/64, int32/64,
    uint32, bool). Vector/matrix parameters were already split into scalars.
  * Ops: const, prim (scalar names from core/builtins), tid, shape, load/store/atomic
    (with `comp` = component index, never None), if, for, while, push, pop.
    No `call`, no vector values.
  * Semantics a backend must keep: `idiv` / `irem` are C's truncating integer `/` and `%`
    (the divisor is never 0, nor -1 with the type's minimum); `cast` float→int truncates
    toward zero; `round` is half away from zero; comparisons on NaN are false except `ne`.
    Python's floored `//` and `%` (`floordiv`, `mod`: x // 0 == x % 0 == 0), `clamp`, `sign`
    and integer `abs` arrive written in other primitives, unless listed in `native_prims`.
  * A builtin with a `cmath` name is that C99 / OpenCL C math function on float operands.
  * `tid[axis=k, ndim=n]`: coordinate k of the thread in the n-D launch grid `dim`
    (row-major: the last axis varies fastest). `shape[axis=k] arr`: extent k of arr.
  * `push`/`pop` (reverse-mode value stack): per-thread LIFO of `options.stack_size`
    slots (8 bytes each). A push onto a full stack must not write; it records
    `KernelFault(STACK_OVERFLOW, site=ins.attrs["stack"])`, and a later pop of an empty
    stack returns 0. After the launch the backend raises `fault_error(...)`.
  * `options.debug`: check every load/store/atomic index against the array's extent
    (those at the positions in `options.proven` may go unchecked: the runtime proves
    them in bounds before every launch); an out-of-range access is skipped (loads give 0) and recorded as
    `KernelFault(OUT_OF_BOUNDS, site=<index into bounds_sites(fn)>, value=<index>,
    extent=<extent>, axis=<k>)`; raise `fault_error(...)` after the launch.

Launch arguments (`launch(compiled, dim, args)`): one entry per `fn.params`, in order:
for an array parameter a runtime array object exposing `.buffer` (this backend's
buffer) and `.shape` (a tuple; arrays are contiguous and row-major, so no strides are
passed); for a scalar parameter a Python or NumPy scalar already of the right kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..core.errors import StackOverflowError
from ..core.ir import Function, Instr
from ..core.ops import MEMORY


@dataclass
class DeviceInfo:
    """One device a backend offers: `name` as users write it ("opencl:0"), a readable description."""

    name: str
    description: str
    ordinal: int = 0
    properties: dict = field(default_factory=dict)   # e.g. {"fp64": True, "compute_units": 16}


@dataclass
class CompileOptions:
    """Settings that change generated code (all part of any cache key)."""

    debug: bool = False          # bounds checks
    stack_size: int = 4096       # reverse-mode value-stack slots per thread
    fast_math: bool = False      # float math may reassociate / use approximate reciprocals (gk.config.fast_math)
    cache: Any = None            # a runtime.launch.cache.KernelCache (get(key) -> bytes|None, put(key, bytes)), or None
    # positions in bounds_sites(fn) of the accesses the runtime proves in bounds before every launch
    # (runtime/launch/bounds.py): under `debug` their per-access checks are hoisted there, not repeated per thread
    proven: frozenset = frozenset()

    def key(self) -> str:
        key = f"debug={self.debug};stack={self.stack_size}" + (";fast" if self.fast_math else "")
        if self.debug and self.proven:
            key += ";proven=" + ",".join(map(str, sorted(self.proven)))
        return key

    def checks(self, site: int) -> bool:
        """Whether the generated code checks the access at position `site` of bounds_sites(fn)."""
        return self.debug and site not in self.proven


class KernelCache(Protocol):
    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, data: bytes) -> None: ...


class Backend:
    """Base class of every backend plugin. Subclass and override every method below."""

    name: str = "base"
    # The contract version this plugin was written against (gradkit.backends.CONTRACT_VERSION when it was
    # written; None: older than versioning, read as 1). It implies the capabilities below unless given.
    contract_version: int | None = None
    # Optional: what the plugin implements, a gradkit.backends.capabilities.Capabilities or a dict with any of
    # "primitives", "atomics", "features"; None: whatever its contract_version implies
    # (backends/capabilities.py HISTORY). gradkit lowers what is missing before `compile` (erf as
    # polynomials, idiv/irem, shifts, bit operations, CAS-loop atomics) or raises a CompileError naming it.
    capabilities: Any = None
    # Primitives with an `expand` rule in core/builtins that this backend implements itself, so the expand
    # pass leaves them (by default every such call arrives written in other primitives).
    native_prims: frozenset = frozenset()
    # Adjoints of stencils (shifted reads) as gathers without atomics (ad/gather.py) rather than atomic
    # scatters: right where contended atomic adds are slow (GPUs; PoCL: W4 backward 220 -> 63 ms). A backend
    # whose atomics are cheap says False (the LLVM CPU backend: 15 ms scatter vs 46-53 ms gather, not vectorised).
    prefers_gather: bool = True

    # Devices -------------------------------------------------------------------
    def devices(self) -> list[DeviceInfo]:
        """The devices this backend can use right now (raise DeviceError explaining why if none)."""
        raise NotImplementedError

    # Memory --------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> Any:
        """A zero-filled buffer of `nbytes` on `device`."""
        raise NotImplementedError

    def copy_from_host(self, device: DeviceInfo, dst: Any, src: np.ndarray) -> None:
        """Copy a C-contiguous host array into buffer `dst` (same byte size)."""
        raise NotImplementedError

    def copy_to_host(self, device: DeviceInfo, src: Any, dst: np.ndarray) -> None:
        """Copy buffer `src` into the C-contiguous host array `dst`."""
        raise NotImplementedError

    def copy(self, device: DeviceInfo, dst: Any, src: Any, nbytes: int) -> None:
        """Device-to-device copy of `nbytes`."""
        raise NotImplementedError

    def fill_zero(self, device: DeviceInfo, buf: Any, nbytes: int) -> None:
        """Set the first `nbytes` of `buf` to zero."""
        raise NotImplementedError

    def host_view(self, device: DeviceInfo, buf: Any) -> np.ndarray | None:
        """A uint8 NumPy view of the buffer's memory if it lives in host memory (zero-copy), else None."""
        return None

    def adopt_host(self, device: DeviceInfo, host: np.ndarray) -> Any | None:
        """Optional: a buffer over the memory of host array `host` (zero-copy sharing with PyTorch/JAX), or
        None when the device cannot use host memory as it is (then gradkit copies)."""
        return None

    # Code ----------------------------------------------------------------------
    def compile(self, device: DeviceInfo, fn: Function, options: CompileOptions) -> Any:
        """Compile lowered IR for `device`; the result is passed back to `launch` and `source`."""
        raise NotImplementedError

    def launch(self, compiled: Any, dim: tuple[int, ...], args: list) -> None:
        """Run `compiled` over the grid `dim` (1-4 ints) with one argument per parameter."""
        raise NotImplementedError

    def synchronize(self, device: DeviceInfo) -> None:
        """Wait until every launch on `device` has finished."""

    def source(self, compiled: Any) -> str:
        """The generated code (LLVM IR, OpenCL C, ...) as text, for users and the debugger."""
        raise NotImplementedError


# --------------------------------------------------------------------------- faults raised by kernels

STACK_OVERFLOW = 1
OUT_OF_BOUNDS = 2


@dataclass
class KernelFault:
    """What a kernel recorded when it hit a fault (first one wins)."""

    code: int
    site: int = 0
    value: int = 0
    extent: int = 0
    axis: int = 0


def bounds_sites(fn: Function) -> list[Instr]:
    """The load/store/atomic instructions of `fn` in program order; a bounds fault's `site` indexes this."""
    return [ins for ins in fn.walk() if ins.op in MEMORY]


def fault_error(fn: Function, fault: KernelFault, options: CompileOptions) -> Exception:
    """The Python exception for a fault recorded by a launch of `fn`."""
    if fault.code == STACK_OVERFLOW:
        loops = fn.attrs.get("stack_sites", {})
        loc = loops.get(fault.site)
        where = f" in the loop at {loc.file}:{loc.line}" if loc is not None else ""
        return StackOverflowError(
            f"kernel '{fn.attrs.get('source_name', fn.name)}': the reverse pass's value stack overflowed{where} "
            f"(capacity {options.stack_size} slots per thread). Raise gk.config.adjoint_stack_size "
            f"(e.g. gk.config.adjoint_stack_size = {options.stack_size * 4}) or shorten the loop.")
    if fault.code == OUT_OF_BOUNDS:
        sites = bounds_sites(fn)
        ins = sites[fault.site] if 0 <= fault.site < len(sites) else None
        arr = ins.args[0].hint if ins is not None else "?"
        loc = f" at {ins.loc.file}:{ins.loc.line}" if ins is not None and ins.loc is not None else ""
        return IndexError(
            f"kernel '{fn.attrs.get('source_name', fn.name)}': index {fault.value} out of range for axis "
            f"{fault.axis} of array '{arr}' with extent {fault.extent}{loc}")
    return RuntimeError(f"kernel '{fn.name}' reported unknown fault code {fault.code}")
