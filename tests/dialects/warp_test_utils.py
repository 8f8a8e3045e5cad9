"""A gradkit.warp-aware stand-in for `warp.tests.unittest_utils`, the helpers Warp 1.19's own test modules
import with `from warp.tests.unittest_utils import *` (tests/dialects/warp_own_tests.py loads them).

Where Warp's helper only does NumPy / unittest work it is Warp's own, imported as is (assert_np_equal,
assert_array_equal, sanitize_identifier). What needs devices is written here: device lists are markers
(which of Warp's lists a test was registered for), since pytest chooses the gradkit device per test;
`add_function_test` records each (name, function, device list) on the test class (`_gk_cases`) instead of
making unittest methods; `CheckOutput` fails a test that prints, as Warp's does. Like Warp's module it has no
`__all__`: the test modules also take `os`, `np` and `wp` (here gradkit.warp) from its `import *`."""

from __future__ import annotations

import contextlib
import io
import os  # noqa: F401  (Warp's test modules get os, np, unittest and wp through this module's `import *`)
import unittest  # noqa: F401

import numpy as np  # noqa: F401

from warp.tests.unittest_utils import assert_array_equal, assert_np_equal, sanitize_identifier  # noqa: F401

import gradkit.warp as wp

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
    """Warp's rule: a test that prints to stdout fails (its kernels' wp.printf / expect_eq output)."""

    def __init__(self, test):
        self.test = test

    def __enter__(self):
        self._buf = io.StringIO()
        self._redirect = contextlib.redirect_stdout(self._buf)
        self._redirect.__enter__()

    def __exit__(self, exc_type, exc, tb):
        self._redirect.__exit__(exc_type, exc, tb)
        if exc_type is None:
            wp.synchronize()
        text = self._buf.getvalue()
        if exc_type is None and text.strip():
            self.test.fail(f"Unexpected output:\n{text.rstrip()}")
