"""The C library's math functions made resolvable by JIT-compiled kernels (the float64 builtins and the
float32 ones mathlib does not compute itself)."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm

from ...core.builtins import BUILTINS

_registered: set[str] = set()
_libm = None


def register_libm() -> None:
    """Make the C library's function of every builtin computed by one (`Builtin.cmath`) resolvable by
    JIT-compiled code; idempotent and cheap, so a builtin registered after import is picked up too."""
    global _libm
    missing = {e.cmath for e in BUILTINS.values() if e.cmath is not None} - _registered
    if not missing:
        return
    if _libm is None:
        try:
            _libm = ctypes.CDLL("libm.so.6")            # glibc's name: no ctypes.util search (~4 ms)
        except OSError:
            from ctypes.util import find_library
            _libm = ctypes.CDLL(find_library("m") or "libm.so.6")
    for name in sorted(missing):
        llvm.add_symbol(name, ctypes.cast(getattr(_libm, name), ctypes.c_void_p).value)
        _registered.add(name)
