"""A gradkit.warp-aware stand-in for `warp.tests.unittest_utils`, the helpers Warp 1.19's own test modules
import with `from warp.tests.unittest_utils import *` (tests/dialects/warp_own_tests.py loads them).

Where Warp's helper only does NumPy / unittest work it is Warp's own, imported as is (assert_np_equal,
assert_array_equal, sanitize_identifier). What needs devices is written here: device lists are markers
(which of Warp's lists a test was registered for), since pytest chooses the gradkit device per test;
`add_function_test` records each (name, function, device list) on the test class (`_gk_cases`) instead of
making unittest methods; `CheckOutput` fails a test that prints, as Warp's does. Like Warp's module it has no
`__all__`: the test modules also take `os`, `np` and `wp` (here gradkit.warp) from its `import *`."""

from __future__ import annotations

import ctypes
import io
import os  # (Warp's test modules get os, np, unittest and wp through this module's `import *`)
import sys
import tempfile
import unittest  # noqa: F401

import numpy as np  # noqa: F401

from warp.tests.unittest_utils import assert_array_equal, assert_np_equal, sanitize_identifier  # noqa: F401

import gradkit.warp as wp

_LIBC = ctypes.CDLL(None)   # fflush(NULL): the C library's stdout buffer, where kernels' printf output waits

USD_AVAILABLE = True      # the loader puts a stand-in `pxr` (warp_own_tests.stand_in_usd) in sys.modules
pxr = True

ALL = "all"               # get_test_devices(): every device
CUDA = "cuda"             # Warp's CUDA-only lists: gradkit's "cuda" is its OpenCL device
CUDA_MEMPOOL = "cuda+mempool"


def get_test_devices(mode=None) -> list:
    return [ALL]


def get_cpu_test_devices() -> list:
    return [ALL]


def get_cuda_test_devices(mode=None) -> list:
    return [CUDA]


def get_selected_cuda_test_devices(mode=None) -> list:
    return [CUDA]


def get_cuda_test_devices_with_mempool(mode=None) -> list:
    return [CUDA_MEMPOOL]


def get_selected_cuda_test_devices_with_mempool(mode=None) -> list:
    return [CUDA_MEMPOOL]


def add_function_test(cls, name, func, devices=None, check_output=True, device_check=None, **kwargs) -> None:
    """Record the test; warp_own_tests.run_case runs it on the gradkit device pytest picked."""
    marker = devices[0] if isinstance(devices, list) and devices else (ALL if devices is None else devices)
    if "_gk_cases" not in cls.__dict__:
        cls._gk_cases = []
    cls._gk_cases.append((name, func, marker, kwargs, check_output))


class CheckOutput:
    """Warp's rule (its unittest_utils.CheckOutput): a test that prints to stdout fails, such as its kernels'
    wp.printf or a failed wp.expect_eq. As Warp's StdOutCapture, file descriptor 1 is pointed at a temporary
    file (the cpu, c and opencl backends print with the C library's printf) and sys.stdout with it (the numpy
    backend prints from Python); after the test the device is synchronised and libc's buffers flushed. Lines
    "Module ... load on device ..." are allowed, as Warp allows them; what was printed is shown again."""

    def __init__(self, test):
        self.test = test

    def __enter__(self):
        sys.stdout.flush()
        _LIBC.fflush(None)
        self._file = tempfile.TemporaryFile(buffering=0)
        self._fd = os.dup(1)
        os.dup2(self._file.fileno(), 1)
        self._sys = sys.stdout
        sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(self._file.fileno()), "wb", buffering=0),
                                      encoding="utf-8", errors="replace", newline="", write_through=True)
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                wp.synchronize()
        finally:
            sys.stdout.flush()
            _LIBC.fflush(None)
            os.dup2(self._fd, 1)
            os.close(self._fd)
            sys.stdout.close()
            sys.stdout = self._sys
            self._file.seek(0)
            text = self._file.read().decode("utf-8", errors="replace")
            self._file.close()
        if text:
            print(text.rstrip())
        kept = [line for line in text.splitlines() if not (line.startswith("Module") and "load on device" in line)]
        if exc_type is None and "\n".join(kept).strip():
            self.test.fail(f"Unexpected output:\n'{text.rstrip()}'")
