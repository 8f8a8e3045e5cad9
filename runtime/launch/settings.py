"""`unchanged(key)`: whether gk.config's code-generation settings are still `key` (a `codegen_key()`),
compared field by field without building a new key: the prepared adjoint asks this on every launch, where
building and comparing the tuple cost ~0.3 µs (issue 43, W5). `plain_launch_key()`: the key the pre-bound
launch compares inline (runtime/launch/launch.py), the code-generation settings plus check_nan."""

from __future__ import annotations

from ...core import config as _settings
from ...core.config import config


def _fields() -> tuple:
    c = config
    return (c.debug, c.adjoint_stack_size, c.fast_math, _settings.rules_generation, c.default_fp)


# codegen_key()'s fields as `_fields` reads them; if core/config.py changes the key, compare it whole
_SAME_FIELDS = _fields() == config.codegen_key()


def unchanged(key: tuple) -> bool:
    """True when `config.codegen_key()` would equal `key`."""
    if not _SAME_FIELDS:
        return key == config.codegen_key()
    c = config
    debug, stack, fast, generation, fp = key
    return c.debug is debug and c.fast_math is fast and c.default_fp is fp and \
        c.adjoint_stack_size == stack and _settings.rules_generation == generation


def plain_launch_key() -> tuple | None:
    """`codegen_key()` + (check_nan,) in the order launch.py's pre-bound path builds it from gk.config
    (debug, adjoint_stack_size, fast_math, rules_generation, default_fp, check_nan); None when
    codegen_key() has other fields (then no pre-bound launch matches: every launch takes the full path)."""
    return (*config.codegen_key(), config.check_nan) if _SAME_FIELDS else None
