"""Building OpenCL programs: an in-memory cache per device and the optional on-disk binary cache.

Built programs are kept per device by sha256(source, build options). With `options.cache` (a
runtime.launch.cache.KernelCache), the program binary is stored under a key that also hashes the device
name, driver version and platform version, and is loaded with `cl.Program(ctx, [dev], [binary])`;
an entry the driver rejects is rebuilt from source (warned once per process) and overwritten.
"""

from __future__ import annotations

import hashlib
import warnings

from ...core.errors import CompileError
from .devices import DeviceState, cl

_warned_corrupt = False


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


# gk.config.fast_math: what OpenCL C allows without assuming finite values (isnan/isinf keep working)
FAST_MATH_OPTIONS = ["-cl-unsafe-math-optimizations", "-cl-mad-enable", "-cl-no-signed-zeros"]


def build_options(state: DeviceState, fast_math: bool = False) -> list[str]:
    """The device's build options, with the fast-math ones (and no correctly-rounded divide) when asked."""
    if not fast_math:
        return state.build_options
    return [o for o in state.build_options if o != "-cl-fp32-correctly-rounded-divide-sqrt"] + FAST_MATH_OPTIONS


def get_program(state: DeviceState, source: str, kernel_name: str, cache=None, fast_math: bool = False):
    """The built program for `source` on `state`'s device (memory cache, then disk cache, then build)."""
    opts = build_options(state, fast_math)
    options = " ".join(opts)
    key = _digest(source, options)
    program = state.programs.get(key)
    if program is not None:
        return program
    disk_key = "opencl-binary:" + _digest(source, options, state.identity())
    if cache is not None:
        program = _load_binary(state, cache, disk_key, opts)
    if program is None:
        program = build_from_source(state, source, kernel_name, opts)
        if cache is not None:
            _store_binary(state, cache, disk_key, program)
    state.programs[key] = program
    return program


def build_from_source(state: DeviceState, source: str, kernel_name: str, options: list[str]):
    """Compile OpenCL C; a failure is a CompileError with the build log and the numbered source."""
    program = cl.Program(state.ctx, source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)   # PoCL chatter; failures still raise
            return program.build(options=options, devices=[state.dev])
    except cl.Error as exc:
        try:
            log = program.get_build_info(state.dev, cl.program_build_info.LOG).strip()
        except cl.Error:
            log = ""
        numbered = "\n".join(f"{k:4d}  {line}" for k, line in enumerate(source.splitlines(), 1))
        raise CompileError(
            f"in kernel '{kernel_name}': the OpenCL compiler of {state.dev.name.strip()} rejected the "
            f"generated code (a gradkit bug, please report it):\n{log or exc}\n"
            f"--- generated OpenCL C ---\n{numbered}") from None


def _load_binary(state: DeviceState, cache, key: str, options: list[str]):
    global _warned_corrupt
    try:
        blob = cache.get(key)
    except OSError:            # the disk cache is an optimisation; never fatal
        return None
    if not blob:
        return None
    try:
        program = cl.Program(state.ctx, [state.dev], [blob])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program.build(options=options, devices=[state.dev])
        program.all_kernels()   # a binary that loads but holds no usable kernels is corrupt too
        return program
    except (cl.Error, ValueError, RuntimeError) as exc:
        if not _warned_corrupt:
            _warned_corrupt = True
            reason = " ".join(str(exc).split())[:300]        # drivers' build logs span many lines
            warnings.warn(f"gradkit: an OpenCL program binary in the kernel cache is unusable ({reason}); "
                          "rebuilding from source", RuntimeWarning, stacklevel=4)
        return None


def _store_binary(state: DeviceState, cache, key: str, program) -> None:
    try:
        (blob,) = program.binaries
    except (cl.Error, ValueError):
        return                 # the driver cannot give a binary back: nothing to cache
    if blob:
        try:
            cache.put(key, bytes(blob))
        except OSError:        # a read-only or full cache only costs a rebuild next time
            return
