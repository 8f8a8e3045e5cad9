"""`import gradkit.taichi as ti`: Taichi 1.7 programs on gradkit's IR, passes, backends, tape and debugger.

A dialect, not a second implementation: fields are gk.arrays (fields.py), a `@ti.kernel` is translated
from its Python source into gk.kernels — one per top-level loop, launched in parallel, and one per run of
serial code (translate.py, kernels.py) —, kernel-side Taichi names are gradkit builtins or macros
(lang.py, macros.py), and `ti.ad.Tape` is a gk.Tape with Taichi's clearing rule (ad.py).
What is supported and what differs: docs/porting/taichi.md.
"""

from __future__ import annotations

import sys as _sys

if __name__ != "gradkit.taichi":        # imported as gradkit.dialects.taichi: one module, one set of fields
    import importlib as _importlib
    _sys.modules[__name__] = _importlib.import_module("gradkit.taichi")
else:
    import gradkit as _gk
    from gradkit.core import types as _T

    from . import ad, lang as _lang, math, types  # noqa: F401
    from .errors import (TaichiNameUnsupportedError, TaichiUnsupportedError, unsupported as _unsupported,  # noqa: F401
                         unsupported_name as _unsupported_name)
    from .fields import (Field, MatrixField, Ndarray, ScalarField, field, i, ij, ijk, ijkl, ijl, ik, ikl, il, j, jk, jkl, jl, k, kl, l,  # noqa: F401,E741
                         ndarray, root)
    from .kernels import (BoundFunc, TiFunc, TiKernel, data_oriented, func, grouped, kernel, ndrange,  # noqa: F401
                         real_func, template)
    from .lang import (Matrix, Vector, atan2, atomic_add, atomic_and, atomic_max, atomic_min, atomic_or, atomic_sub,
                       atomic_xor, cast, ceil, floor, max, min, pow, random, round, rsqrt,  # noqa: F401,A004
                       select, sqr)
    from .runtime import (amdgpu, arm64, cpu, cuda, dx11, dx12, gpu, init, metal, opencl, reset, vulkan,  # noqa: F401
                          x64)
    from .ad import clear_all_gradients  # noqa: F401
    from .structs import Struct, StructField, dataclass  # noqa: F401

    # scalar types: gradkit's own (ti.f32 is gk.float32; `ti.f32(x)` casts inside kernels)
    f32 = float32 = _gk.float32
    f64 = float64 = _gk.float64
    i32 = int32 = _gk.int32
    i64 = int64 = _gk.int64
    u32 = uint32 = _gk.uint32
    u1 = _gk.bool

    class _UnsupportedType:
        def __init__(self, name):
            self._ti_unsupported_type = name

        def __repr__(self):
            return f"ti.{self._ti_unsupported_type} (not supported by gradkit.taichi)"

    f16 = float16 = _UnsupportedType("f16")
    i8, i16, u8, u16, u64 = (_UnsupportedType(n) for n in ("i8", "i16", "u8", "u16", "u64"))
    int8, int16, uint8, uint16, uint64 = i8, i16, u8, u16, u64

    # math: gradkit's builtins, differentiable with the builtins table
    sqrt, exp, log, sin, cos, tan, tanh = _gk.sqrt, _gk.exp, _gk.log, _gk.sin, _gk.cos, _gk.tan, _gk.tanh
    asin, acos, atan = _gk.asin, _gk.acos, _gk.atan
    abs = _gk.abs  # noqa: A001
    static = _gk.static
    from .decompose import polar_decompose, svd, sym_eig  # noqa: F401

    def sync() -> None:
        _gk.synchronize()

    def loop_config(**kwargs) -> None:
        """Taichi's scheduling hint; gradkit chooses its own block sizes (accepted, no effect)."""

    def block_local(*fields) -> None:
        """Taichi's shared-memory hint (accepted, no effect)."""

    def no_activate(*fields) -> None:
        """Sparse-only hint (accepted, no effect)."""

    _UNSUPPORTED = {
        "GUI": "ti.GUI (gradkit.taichi is headless; draw with matplotlib from to_numpy())",
        "ui": "ti.ui (GGUI)",
        "SparseMatrixBuilder": "ti.linalg.SparseMatrixBuilder",
        "sparse_matrix_builder": "ti.types.sparse_matrix_builder",
        "linalg": "ti.linalg",
        "Mesh": "ti.Mesh",
        "Texture": "ti.Texture",
        "profiler": "ti.profiler",
        "deactivate": "sparse SNodes (ti.deactivate)",
        "is_active": "sparse SNodes (ti.is_active)",
        "append": "dynamic SNodes (ti.append)",
        "length": "dynamic SNodes (ti.length)",
        "raw_div": "ti.raw_div", "raw_mod": "ti.raw_mod",
        "stop_grad": "ti.stop_grad", "func_real": "real functions",
        "experimental": "ti.experimental",
        "graph": "ti.graph",
        "aot": "ti.aot",
    }

    def __getattr__(name: str):
        if name in _UNSUPPORTED:
            raise _unsupported(_UNSUPPORTED[name])
        if name.startswith("__"):                # Python's own probes (__path__, __file__, ...)
            raise AttributeError(f"module 'gradkit.taichi' has no attribute {name!r}")
        raise _unsupported_name("gradkit.taichi", name)
