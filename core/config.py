"""Global settings (`gk.config`): caching, debug checks, value-stack size, fast math, default float type."""

from __future__ import annotations

import os

from . import types as T

# Bumped whenever a custom rule (func_grad / func_replay / func_native) is attached to a function, and when
# default_fp changes: kernels compiled before lower and compile again (part of Config.codegen_key()).
rules_generation = 0


def rules_changed() -> None:
    global rules_generation
    rules_generation += 1


_FLAGS = ("cache", "debug", "check_nan", "check_ad", "fast_math", "verbose", "snapshot_launches",
          "trust_cache_dir")
_SIZES = {"adjoint_stack_size": (1, 1 << 24), "snapshot_max_bytes": (0, 1 << 40)}


def float_type(value, where: str) -> T.ScalarType:
    """`value` checked as a default float type (`default_fp`): gk.float32 or gk.float64."""
    if value is T.float32 or value is T.float64:
        return value
    raise TypeError(f"{where} must be gk.float32 or gk.float64, got {getattr(value, 'name', None) or repr(value)}")


class Config:
    """Mutable process-wide settings; read at compile or launch time. Every assignment is validated: an
    unknown name, a non-bool flag or an out-of-range size raises naming the setting (nothing changes)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _FLAGS:
            if not isinstance(value, bool) and value not in (0, 1):
                raise TypeError(f"gk.config.{name} must be True or False, got {value!r}")
            value = bool(value)
        elif name in _SIZES:
            lo, hi = _SIZES[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"gk.config.{name} must be an int, got {type(value).__name__} {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"gk.config.{name} must be between {lo} and {hi}, got {value}")
        elif name == "default_fp":
            value = float_type(value, "gk.config.default_fp")
            if vars(self).get(name, value) is not value:
                rules_changed()      # kernels and functions compiled for the other type lower again
        else:
            raise AttributeError(f"gk.config has no setting '{name}'; the settings are: "
                                 f"{', '.join((*_FLAGS, *_SIZES, 'default_fp'))}")
        object.__setattr__(self, name, value)

    def __init__(self) -> None:
        self.cache: bool = os.environ.get("GRADKIT_CACHE", "1") != "0"
        # use a kernel-cache folder or entry even when someone else could have written it (docs/security.md)
        self.trust_cache_dir: bool = os.environ.get("GRADKIT_TRUST_CACHE_DIR", "0") == "1"
        self.debug: bool = False           # bounds checks in generated code
        self.check_nan: bool = False       # NaN/Inf scan after every launch
        self.check_ad: bool = False        # gradient rule checks on every tape
        self.adjoint_stack_size: int = 4096  # per-thread value-stack slots of the reverse pass
        # Taichi's fast_math (off by default here): float arithmetic may be reassociated and contracted, and
        # x / sqrt(y) may use reciprocal-square-root estimates (a few ulp; 1/sqrt(0) may read NaN)
        self.fast_math: bool = False
        self.verbose: bool = False
        self.snapshot_max_bytes: int = 16 << 20  # debug bundles: cap per array snapshot
        self.snapshot_launches: bool = False     # tapes keep per-launch before/after array snapshots
        # the type of float literals, float(x) and `float` annotations of locals in kernels and functions
        # that declare no default_fp of their own (Taichi's ti.init(default_fp=...)); see docs/api/types.rst
        self.default_fp: T.ScalarType = T.float32

    def codegen_key(self) -> tuple:
        """The settings that change generated code: kernels compiled under other values are recompiled."""
        return (self.debug, self.adjoint_stack_size, self.fast_math, rules_generation, self.default_fp)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"


config = Config()
