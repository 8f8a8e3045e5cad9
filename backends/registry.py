"""Backend plugin registry: finds plugins through the entry-point group ``gradkit.backends``.

A plugin is declared as ``name = "package.module:BackendClass"`` (the built-in ``cpu`` and
``opencl`` backends are declared the same way in gradkit's pyproject.toml). Plugins are
imported and constructed lazily — the first time one is asked for, or when `available()`
lists them — so ``import gradkit`` never pays for (or breaks on) a plugin. A plugin that
fails to import or construct is reported once with ``warnings.warn`` and remembered as
failed; asking for it later raises `DeviceError` carrying the original error.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from typing import Any, Callable

from ..core.errors import DeviceError
from ..core.locks import fork_safe

GROUP = "gradkit.backends"

# Install hints for the built-ins; a third-party plugin's own package is the hint otherwise.
INSTALL_HINTS = {
    "cpu": "pip install llvmlite (the LLVM CPU backend needs it)",
    "opencl": "pip install 'gradkit[opencl]' (pyopencl and pocl-binary-distribution: PoCL gives a CPU OpenCL device; "
              "on a GPU machine install the vendor's OpenCL driver)",
}

# gradkit's own plugins, as declared in its pyproject.toml: asking for one of these before anything listed
# the plugins loads it without scanning every installed distribution's entry points (importing
# importlib.metadata and the scan cost ~25 ms of a process's start).
BUILTIN = {"cpu": f"{__package__}.cpu:CPUBackend", "opencl": f"{__package__}.opencl:OpenCLBackend"}


class _Builtin:
    """An entry-point look-alike for a built-in plugin (`value` and `load()`)."""

    def __init__(self, value: str):
        self.value = value

    def load(self) -> Any:
        module, _, attr = self.value.partition(":")
        return getattr(importlib.import_module(module), attr)


_lock = fork_safe(threading.RLock())
_specs: dict[str, Any] | None = None          # name -> entry point or registered class/instance
_instances: dict[str, Any] = {}               # name -> constructed Backend
_failures: dict[str, str] = {}                # name -> "ExceptionType: message"
_listeners: list[Callable[[str | None], None]] = []   # told which plugin changed (None: all)


def _entry_points() -> dict[str, Any]:
    """Entry points of the plugin group, by name (first declaration of a name wins)."""
    import importlib.metadata
    try:
        eps = importlib.metadata.entry_points(group=GROUP)
    except Exception as exc:  # a broken distribution's metadata must not break gradkit
        warnings.warn(f"gradkit: could not read entry points of group '{GROUP}': {exc}", RuntimeWarning,
                      stacklevel=3)
        return {}
    out: dict[str, Any] = {}
    for ep in eps:
        out.setdefault(ep.name, ep)
    return out


def _all_specs() -> dict[str, Any]:
    global _specs
    if _specs is None:
        with _lock:
            if _specs is None:
                specs = _entry_points()
                for name, value in BUILTIN.items():     # gradkit's own, also when its metadata is absent (a
                    specs.setdefault(name, _Builtin(value))     # source checkout on PYTHONPATH, not installed)
                _specs = specs
    return _specs


def _describe(spec: Any) -> str:
    value = getattr(spec, "value", None)
    if value is not None:
        return value
    return getattr(spec, "__qualname__", None) or type(spec).__qualname__


def _construct(name: str, spec: Any) -> Any:
    """Import (for an entry point) and instantiate a plugin; a Backend instance passes through."""
    if hasattr(spec, "load") and hasattr(spec, "value"):     # importlib.metadata.EntryPoint
        spec = spec.load()
    backend = spec() if isinstance(spec, type) or (callable(spec) and not hasattr(spec, "devices")) else spec
    if not hasattr(backend, "devices") or not hasattr(backend, "alloc"):
        raise TypeError(f"{_describe(spec)} is not a gradkit Backend (it has no devices()/alloc())")
    if getattr(backend, "name", None) in (None, "base"):
        backend.name = name
    from .capabilities import attach
    attach(backend)             # lower what the plugin does not declare before its compile sees it
    return backend


def _load(name: str) -> Any | None:
    """The constructed plugin `name`, or None if it is unknown or failed (failure warned once)."""
    backend = _instances.get(name)
    if backend is not None:
        return backend
    spec = _Builtin(BUILTIN[name]) if _specs is None and name in BUILTIN else _all_specs().get(name)
    if spec is None or name in _failures:
        return None
    with _lock:
        if name in _instances:
            return _instances[name]
        if name in _failures:
            return None
        try:
            backend = _construct(name, spec)
        except Exception as exc:  # any plugin bug: report it, keep gradkit usable
            _failures[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"gradkit: backend plugin '{name}' ({_describe(spec)}) failed to load: "
                          f"{_failures[name]}", RuntimeWarning, stacklevel=3)
            return None
        _instances[name] = backend
        return backend


def names() -> list[str]:
    """Every declared or registered plugin name (loaded or not): "cpu" first, then alphabetical."""
    return sorted(_all_specs(), key=lambda n: (n != "cpu", n))


def available() -> list[str]:
    """Names of the backend plugins that loaded (imported and constructed), "cpu" first."""
    return [n for n in names() if _load(n) is not None]


def failure(name: str) -> str | None:
    """Why plugin `name` failed to load ("ExceptionType: message"), or None."""
    _load(name)
    return _failures.get(name)


def get_backend(name: str) -> Any:
    """The Backend object of plugin `name`; `DeviceError` saying what is missing and how to get it."""
    backend = _instances.get(name)
    if backend is not None:
        return backend
    backend = _load(name)
    if backend is not None:
        return backend
    hint = INSTALL_HINTS.get(name)
    if name in _failures:
        why = _failures[name]
        missing = why.startswith(("ModuleNotFoundError", "ImportError"))
        raise DeviceError(f"gradkit backend '{name}' failed to load: {why}"
                          + (f". To get it: {hint}" if hint and missing else ""))
    others = ", ".join(available()) or "none"
    raise DeviceError(f"unknown gradkit backend '{name}' (installed backends: {others}). "
                      + (f"To get it: {hint}" if hint else
                         f"A third-party backend registers itself under the entry-point group '{GROUP}'; "
                         "install the package that provides it."))


def register(name: str, backend: Any) -> None:
    """Register a Backend class (constructed on first use) or instance under `name`, replacing any
    plugin of that name. For tests and programmatic use; normal plugins use entry points."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"backend name must be a non-empty string without ':', got {name!r}")
    with _lock:
        specs = _all_specs()
        specs[name] = backend
        _instances.pop(name, None)
        _failures.pop(name, None)
    _notify(name)


def unregister(name: str) -> None:
    """Forget plugin `name` (registered or discovered); a test hook, the inverse of `register`."""
    with _lock:
        _all_specs().pop(name, None)
        _instances.pop(name, None)
        _failures.pop(name, None)
    _notify(name)


def reload() -> None:
    """Forget everything and rediscover entry points on next use (after installing a plugin)."""
    global _specs
    with _lock:
        _specs = None
        _instances.clear()
        _failures.clear()
    _notify(None)


def on_change(callback: Callable[[str | None], None]) -> None:
    """Call `callback(name)` when plugin `name` is (un)registered, `callback(None)` on `reload()`
    (runtime/launch/device.py drops the Devices it cached for that plugin)."""
    _listeners.append(callback)


def _notify(name: str | None) -> None:
    for cb in list(_listeners):
        cb(name)
