"""gradkit: a differentiable kernel framework — kernels in Python, fast on CPU and GPU, exact gradients.

`import gradkit as gk`; the public API is documented in README.md and the API contract.
"""

from __future__ import annotations

__version__ = "0.1.0"

import os as _os

from .core.config import config
from .core.errors import (CacheTrustWarning, CompileError, DeviceError, DeviceMemoryError, GradientCheckError,
                          GradientRuleError, GradientRuleWarning, GradientHazardWarning, GradkitError, NaNError,
                          StackOverflowError)
from .core import library as _library  # noqa: F401  (defines gk.quat_*, gk.rand*, gk.svd3, ... in core.lang)
from .core.lang import *  # noqa: F401,F403  (sin, cos, ..., tid, static, atomic_add, ...)
from .core.lang import NAMES as _LANG_NAMES
from .core.types import (bool_ as bool, float32, float64, int32, int64, mat22, mat22d, mat33, mat33d, mat44,  # noqa: A001
                         mat44d, matrix, quat, quatd, quaternion, uint32, vec2, vec2d, vec2i, vec3, vec3d, vec3i, vec4,
                         vec4d, vec4i, vector)
from .runtime.arrays.array import array, array1d, array2d, array3d, array4d
from .runtime.arrays.creation import empty, from_dlpack, from_numpy, full, ones, ones_like, zeros, zeros_like
from .runtime.arrays.host_ops import copy
from .runtime.launch.device import Device, ScopedDevice, get_device, get_devices, set_device, synchronize
from .runtime.launch.kernel import Kernel, func, kernel
from .core.func import func_grad, func_replay
from .core.struct import struct
from .core.native import func_native
from .runtime.launch.launch import launch
from .runtime.tape.tape import LaunchRecord, ScopedTimer, Tape
from .runtime.arrays.grad_state import GradientNotKeptError
from .runtime.tape.forward_mode import ForwardMode
from .runtime.tape.checkpoint import checkpoint, grad_for, grad_replaced, no_grad
from .runtime.arrays.interop import from_jax, from_torch, jax_function, to_jax, to_torch, torch_function
from .ad.transforms import grad, jvp
from . import backends  # noqa: E402  (gk.backends.available())
from .runtime.tools import autograd  # noqa: E402  (gk.autograd.jacobian, gradcheck, ...)
from .runtime.tools import optim  # noqa: E402  (gk.optim.SGD, gk.optim.Adam)
from .geometry import Bvh, HashGrid, Mesh  # noqa: E402  (geometry/: host builds over core/library's queries)
from . import sparse  # noqa: E402  (gk.sparse: BSR matrices, kernels over the language)
from . import linalg  # noqa: E402  (gk.linalg: cg, bicgstab, gmres, differentiable through the solve)

__all__ = [
    "config", "CacheTrustWarning", "CompileError", "DeviceError", "DeviceMemoryError", "GradientCheckError", "GradientNotKeptError", "GradientRuleError", "GradientRuleWarning", "GradientHazardWarning",
    "GradkitError", "NaNError", "StackOverflowError", "float32", "float64", "int32", "int64", "uint32", "bool",
    "quat", "quatd", "quaternion", "vec2", "vec3", "vec4", "vec2d", "vec3d", "vec4d", "vec2i", "vec3i", "vec4i", "mat22", "mat33", "mat44",
    "mat22d", "mat33d", "mat44d", "vector", "matrix", "array", "array1d", "array2d", "array3d", "array4d",
    "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "copy", "from_numpy", "from_dlpack",
    "to_torch", "from_torch", "torch_function", "to_jax", "from_jax", "jax_function", "Device",
    "ScopedDevice", "get_device", "get_devices", "set_device", "synchronize", "Kernel", "kernel", "func",
    "func_grad", "func_replay", "struct", "func_native", "launch", "Tape", "LaunchRecord", "ScopedTimer", "ForwardMode", "checkpoint", "grad_replaced", "grad_for", "no_grad", "grad", "jvp", "backends", "autograd", "optim", "viz", "HashGrid", "Bvh", "Mesh", "sparse", "linalg", *_LANG_NAMES,
]


def __getattr__(name: str):
    """`gk.viz` (kernel_graph, tape_graph, load_bundle) is imported on first use: its GraphViz, JSON and
    zip helpers cost ~5 ms of every `import gradkit`, and most scripts never draw."""
    if name == "viz":
        import importlib
        return importlib.import_module(__name__ + ".viz")   # (`from . import viz` would call back here)
    raise AttributeError(f"module 'gradkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"viz"})


# Dialects (dialects/<name>/) are subpackages of gradkit under their own names: `import gradkit.taichi`.
# They are not top-level folders because the repository root is on sys.path in a checkout, where a
# `taichi/` folder would shadow the real Taichi; the wheel ships them as gradkit/dialects/<name>/.
__path__.append(_os.path.join(_os.path.dirname(__file__), "dialects"))
del _os


class _DialectAlias:
    """`gradkit.dialects.<name>[.<sub>]` is the module `gradkit.<name>[.<sub>]`, not a second copy of it: one
    set of each dialect's modules and state (fields, settings), whichever name imported it first."""

    prefix = __name__ + ".dialects."

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(self.prefix):
            import importlib.util
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        import importlib
        return importlib.import_module(__name__ + "." + spec.name[len(self.prefix):])

    def exec_module(self, module) -> None:
        """The canonical module already ran."""


import sys as _sys  # noqa: E402  (the finder goes in once gradkit itself is importable)
if not any(isinstance(f, _DialectAlias) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _DialectAlias())
del _sys
