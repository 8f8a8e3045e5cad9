"""`import gradkit.warp as wp`: NVIDIA Warp 1.19's public names over gradkit (docs/porting/warp.md).

A frontend over gradkit's IR, passes, backends, tape and debugger: it translates names and semantics and
has no code generator or tape of its own. Kernels and functions defined with `@wp.kernel` / `@wp.func`
compute `%` as Warp does (C's: truncated integer `%`, float `fmod`); `//` floors in both. Warp's devices
"cuda" / "cuda:N" are gradkit's OpenCL devices (the cpu where there is none, said once). Names gradkit does
not have yet (`wp.Volume`; tiles; the builtins in `builtins.MISSING`) raise `WarpFeatureMissing`, never
AttributeError. `wp.HashGrid`, `wp.Bvh` and `wp.Mesh` are gradkit's (geometry.py); `wp.uint64` is the type
of a geometry id as a kernel parameter or struct field (any of the three, bound at launch). Submodules: `gradkit.warp.optim`
(`Adam`, `SGD`), `gradkit.warp.render` (headless: rendering does nothing), `gradkit.warp.types`.
"""

from __future__ import annotations

import math as _math

from .. import __version__ as _gk_version  # noqa: F401
from ..core import types as _T
from ..core.errors import GradkitError as WarpError  # noqa: F401
from ..core.func import func_grad, func_replay  # noqa: F401
from ..core.native import func_native  # noqa: F401
from ..core.struct import struct  # noqa: F401
from ..runtime.arrays.array import array as _GkArray  # noqa: F401
from ..runtime.arrays.creation import from_dlpack, from_numpy  # noqa: F401
from ..runtime.arrays.interop import from_jax, from_torch, to_jax, to_torch  # noqa: F401
from ..runtime.tools import autograd  # noqa: F401
from . import builtins as _builtins
from . import queries as _queries
from . import transforms as _transforms
from .intersect import intersect_tri_tri  # noqa: F401
from .kernels import Kernel  # noqa: F401  (wp.Kernel(func=f): lowered when made, as Warp's)
from . import types  # noqa: F401
from .device import (Device, ScopedDevice, get_cuda_device_count, get_cuda_devices,  # noqa: F401
                     get_device, get_preferred_device, is_cuda_available, set_device, synchronize,
                     synchronize_device)
from .device import (Event, ScopedStream, Stream, get_event_elapsed_time, get_stream,  # noqa: F401
                     record_event, set_stream, synchronize_event, synchronize_stream, wait_event, wait_stream)
from .errors import GEOMETRY, WarpFeatureMissing, missing
from .tape import WarpGradientError  # noqa: F401
from . import runtime as _runtime
from .runtime import (Graph, ScopedCapture, ScopedTimer, Tape, array, array1d, array2d, array3d,  # noqa: F401
                      array4d, capture_begin, capture_end, capture_launch, clone, config, constant, copy,
                      empty_like, full_like, func, kernel, launch, ones_like, overload, zeros_like)
from .types import (bool, float32, float64, int32, int64, matrix, quaternion, uint32,  # noqa: F401,A004
                    uint64, vector)
from .geometry import (Bvh, BvhQuery, HashGrid, HashGridQuery, Mesh, MeshQuery, MeshQueryAABB,  # noqa: F401
                       MeshQueryPoint, MeshQueryRay)
from .grad import grad  # noqa: F401  (wp.grad(f)(x) in kernels: Warp's semantics)

__version__ = "1.19.0"      # the Warp version whose names this dialect follows

globals().update(types.VECTORS)
globals().update(types.MATRICES)
globals().update(types.QUATS)
globals().update(_builtins.SHARED)            # wp.sin, wp.tid, wp.atomic_add, wp.select, ... (gradkit's)
globals().update(_builtins.WARP_MACROS)       # wp.lerp, wp.smoothstep, wp.mod, ... (written here)
globals().update(_transforms.WARP_TRANSFORMS)  # wp.transform, transform_point, ... (transforms.py)
globals().update(_queries.QUERY_MACROS)       # wp.mesh_query_ray_count_intersections (queries.py)

pi = PI = _math.pi
e = E = _math.e
tau = TAU = 2.0 * _math.pi
half_pi = HALF_PI = 0.5 * _math.pi
inf = INF = _math.inf
nan = NAN = _math.nan
ln2 = LN2 = _math.log(2.0)
ln10 = LN10 = _math.log(10.0)
log2e = LOG2E = 1.0 / _math.log(2.0)
log10e = LOG10E = 1.0 / _math.log(10.0)
phi = PHI = (1.0 + _math.sqrt(5.0)) / 2.0

Scalar = Float = _T.float32
Int = _T.int32


def _length_n(make):
    """Warp's creation functions also take the length as `n=` (`wp.empty(n=4, dtype=wp.vec3)`)."""
    def create(*args, n=None, **kwargs):
        if n is not None and not args and kwargs.get("shape") is None:
            kwargs["shape"] = (n,)
        return make(*args, **kwargs)
    create.__name__ = create.__qualname__ = make.__name__
    create.__doc__ = make.__doc__
    return create


zeros, ones, empty, full = (_length_n(f) for f in (_runtime.zeros, _runtime.ones, _runtime.empty, _runtime.full))


def init() -> None:
    """Warp's `wp.init()`: gradkit initialises on import, so nothing to do."""


def is_cpu_available() -> bool:
    return True


def is_cubql_available() -> bool:
    """Warp's cuBQL BVH builder (CUDA only): gradkit has its own builders, so the "cubql" constructor is
    never offered."""
    return False


def get_mempool_used_mem_current(device=None) -> int:
    return 0


def get_mempool_used_mem_high(device=None) -> int:
    return 0


def is_mempool_enabled(device=None) -> bool:
    return False


def force_load(device=None, modules=None) -> None:
    """Kernels compile on first launch in gradkit (and come from its disk cache)."""


def load_module(module=None, device=None, recursive=False) -> None:
    """As force_load."""


def set_module_options(options: dict, module=None) -> None:
    if "enable_backward" in options:
        config.enable_backward = options["enable_backward"]


def get_module_options(module=None) -> dict:
    return {"enable_backward": config.enable_backward, "max_unroll": config.max_unroll}


def __getattr__(name: str):
    """A Warp name gradkit.warp does not provide: a named error, not an AttributeError, for Warp's own
    public names (geometry included); AttributeError for anything else."""
    if name in GEOMETRY:
        return missing(name)
    if name in _builtins.MISSING_SET or name in _WARP_ONLY:
        return _builtins.missing_builtin(name) if name in _builtins.MISSING_SET else missing(name)
    raise AttributeError(f"module 'gradkit.warp' has no attribute {name!r}")


# Warp 1.19 names with no gradkit counterpart (host side); reaching one raises WarpFeatureMissing
_WARP_ONLY = frozenset((
    "Module", "ScopedMempool", "ScopedPeerAccess", "ScopedMemoryTracker", "ScopedCudaProfiler",
    "ScopedAllocator", "ScopedMempoolAccess", "ScopedLogger", "ScopedLogLevel", "Allocator", "Function",
    "Launch", "MemoryKind", "TimingResult", "RegisteredGLBuffer", "GLTextureResource", "jax_kernel",
    "jax_callable", "from_ptr", "from_ipc_handle", "from_paddle", "to_paddle", "to_dlpack", "map",
    "compile_aot_module", "load_aot_module", "capture_save", "capture_load", "capture_if", "capture_while",
    "stream_from_torch",
    "device_from_torch", "device_to_torch", "dtype_from_torch", "dtype_to_torch",
    "timing_begin", "timing_end", "timing_print",
    # half precision: gradkit has no float16 (builtins.MISSING), so none of its vectors and matrices either
    "vec2h", "vec3h", "vec4h", "mat22h", "mat33h", "mat44h", "quath", "transformh", "spatial_vectorh",
    "spatial_matrixh",
))
