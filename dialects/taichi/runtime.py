"""`ti.init` and the dialect's settings: the gradkit device that Taichi's `arch` maps to, `default_fp`,
`default_ip`, `debug`, the random seed, and the registry of every field (for `clear_all_gradients`).

`arch` → device: `ti.cpu` (and `ti.x64`, `ti.arm64`) → "cpu"; `ti.gpu`, `ti.opencl`, `ti.cuda`, `ti.vulkan`,
`ti.metal`, `ti.dx11` → gradkit's "opencl" device where an OpenCL platform exists, else "cpu" with one note.
`device=` (gradkit's own keyword, not Taichi's) picks any gradkit device by name ("numpy", "opencl:1").
"""

from __future__ import annotations

import sys
import weakref

import gradkit as gk
from gradkit.core import types as T

# Taichi's archs, as names; what each means on gradkit is `_device_for`
cpu, x64, arm64 = "cpu", "x64", "arm64"
gpu, cuda, opencl, vulkan, metal, dx11, dx12, amdgpu = ("gpu", "cuda", "opencl", "vulkan", "metal", "dx11",
                                                        "dx12", "amdgpu")
_CPU_ARCHS = {cpu, x64, arm64}
_GPU_ARCHS = {gpu, cuda, opencl, vulkan, metal, dx11, dx12, amdgpu}


class _Settings:
    """What `ti.init` set. `generation` counts inits: kernels translated under an earlier one retranslate."""

    def __init__(self):
        self.device = None              # a gk.Device; None until ti.init (then "cpu")
        self.arch = cpu
        self.default_fp = T.float32
        self.default_ip = T.int32
        self.debug = False
        self.seed = 0
        self.calls = 0                  # kernel calls using ti.random: each gets its own stream
        self.generation = 0
        self.fields: list = []          # weak references to every field made since ti.init
        self.initialized = False


settings = _Settings()


def _note(message: str) -> None:
    print(f"[gradkit.taichi] {message}", file=sys.stderr)


def _device_for(arch, device) -> gk.Device:
    if device is not None:
        return gk.get_device(device)
    name = arch if isinstance(arch, str) else getattr(arch, "name", str(arch))
    if name in _CPU_ARCHS:
        return gk.get_device("cpu")
    if name in _GPU_ARCHS:
        try:
            return gk.get_device("opencl")
        except gk.DeviceError as exc:
            _note(f"arch={name}: no OpenCL device ({str(exc).splitlines()[0]}); running on the cpu")
            return gk.get_device("cpu")
    raise ValueError(f"ti.init(arch={arch!r}): unknown arch; gradkit.taichi knows {sorted(_CPU_ARCHS | _GPU_ARCHS)}")


def init(arch=None, default_fp=None, default_ip=None, debug: bool = False, random_seed: int = 0,
         device: str | None = None, **options) -> None:
    """Taichi's `ti.init`: pick the device, the default float and integer types and debug mode.

    Fields made before are forgotten by `clear_all_gradients` (as Taichi invalidates them); kernels
    retranslate. Taichi options that change nothing here (`offline_cache`, `kernel_profiler`,
    `log_level`, `fast_math`, ...) are accepted; `fast_math=True` turns on gk.config.fast_math."""
    settings.device = _device_for(arch if arch is not None else cpu, device)
    settings.arch = arch if arch is not None else cpu
    settings.default_fp = _scalar(default_fp, T.float32, "default_fp", float_only=True)
    settings.default_ip = _scalar(default_ip, T.int32, "default_ip", int_only=True)
    settings.debug = bool(debug)
    gk.config.debug = bool(debug)
    if "fast_math" in options:
        gk.config.fast_math = bool(options["fast_math"])
    settings.seed = int(random_seed)
    settings.calls = 0
    settings.generation += 1
    settings.fields = []
    settings.initialized = True


def reset() -> None:
    """Taichi's `ti.reset`: forget fields and translations (arrays already made stay valid)."""
    settings.generation += 1
    settings.fields = []


def _scalar(t, default, what, float_only=False, int_only=False):
    if t is None:
        return default
    t = T.as_type(t)
    if float_only and not (t.is_scalar and t.is_float) or int_only and not (t.is_scalar and t.is_int):
        raise TypeError(f"ti.init({what}={t.name}): expected a {'float' if float_only else 'integer'} type")
    return t


def device() -> gk.Device:
    """The device fields live on and kernels run on (ti.init's; "cpu" before any ti.init, as Taichi's
    implicit init)."""
    if settings.device is None:
        init()
    return settings.device


def register_field(f) -> None:
    settings.fields.append(weakref.ref(f))


def live_fields() -> list:
    out = [r() for r in settings.fields]
    return [f for f in out if f is not None]
