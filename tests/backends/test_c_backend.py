"""The `c` example plugin's own behaviour (examples/c_backend): compiler detection, OpenMP on and off, the C
it generates, compile errors, native `c` snippets and the in-memory library cache. Its semantics are
checked by the device-parametrised suites (GRADKIT_TEST_DEVICES=c) like every backend's."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

import gradkit as gk
from gradkit.ad.pipeline import for_backend
from gradkit.backends.base import CompileOptions
from gradkit.core.errors import CompileError, DeviceError

pytest.importorskip("gradkit_c_backend", reason="pip install -e examples/c_backend")
from gradkit_c_backend import CBackend, codegen, compiler
from gradkit.backends.host_memory import HostBuffer

try:
    DEV = CBackend().devices()[0]
except DeviceError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"no C compiler: {exc}", allow_module_level=True)


@gk.kernel
def mixed(x: gk.array(dtype=float), grid: gk.array(dtype=float, ndim=2), total: gk.array(dtype=float),
          hist: gk.array(dtype=int), peak: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    acc = 0.0
    for j in range(i % 7):
        acc += x[(i + j) % x.shape[0]] * float(j)
    out[i] = acc + grid[i % grid.shape[0], i % grid.shape[1]]
    gk.atomic_add(total, 0, x[i])                   # a reduction onto one element
    gk.atomic_add(hist, i % 5, 1)                   # integer scatter
    gk.atomic_max(peak, i % 3, 0.5 * x[i])


@gk.kernel
def recurrence(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    for _ in range(4):
        v = gk.sin(v) * v                           # the reverse pass needs every v: a value stack
    y[i] = v


def _args(*arrays: np.ndarray) -> list:
    """Launch arguments over NumPy arrays (zero-copy: the kernel writes into them)."""
    return [SimpleNamespace(buffer=HostBuffer.adopt(a, align=1), shape=a.shape) for a in arrays]


def _run_mixed(backend: CBackend, n: int) -> list[np.ndarray]:
    fn = for_backend(mixed.lowered("forward"), backend.native_prims)
    compiled = backend.compile(DEV, fn, CompileOptions())
    x = (np.arange(n) % 13).astype(np.float32)      # small integers: every sum is exact in any order
    grid = np.arange(12, dtype=np.float32).reshape(3, 4)
    arrays = [x, grid, np.zeros(1, np.float32), np.zeros(5, np.int32), np.zeros(3, np.float32),
              np.zeros(n, np.float32)]
    backend.launch(compiled, (n,), _args(*arrays))
    return arrays


def test_a_missing_compiler_is_a_device_error_saying_what_to_install(monkeypatch):
    with pytest.raises(DeviceError, match=r"needs a C compiler.*'gk-no-such-cc'.*apt-get install gcc"):
        CBackend(cc="gk-no-such-cc").devices()
    monkeypatch.setenv("CC", "gk-no-such-cc-either")
    with pytest.raises(DeviceError, match="CC environment variable"):
        CBackend().devices()


def test_openmp_on_and_off_give_identical_results():
    serial = CBackend(openmp=False)
    assert serial.devices()[0].properties["openmp"] is False
    assert "-fopenmp" not in compiler.flags(compiler.toolchain(), False, False)
    n = 100_003                                     # past the parallel threshold, not a multiple of anything
    got, want = _run_mixed(CBackend(openmp=True), n), _run_mixed(serial, n)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert got[2][0] == float((np.arange(n) % 13).sum())
    assert got[3].tolist() == [len(range(k, n, 5)) for k in range(5)] and got[4].tolist() == [6.0] * 3


def test_source_is_c():
    src = mixed.source("c")
    assert src.startswith("/* gradkit kernel 'mixed': C generated from lowered IR */")
    assert "#include <math.h>" in src and "#pragma omp parallel" in src and "reduction(+: gk_acc0)" in src
    assert "__kernel" not in src and "__global" not in src
    assert "double gk_acc0 = 0;" in src, "float32 partial sums are kept in double"
    adjoint = recurrence.source("c", adjoint=True)
    assert "gk_stack" in adjoint and "free(gk_stack)" in adjoint, "the loop's value stack is heap memory"


def test_float32_math_calls_the_float_functions():
    @gk.kernel
    def trig(x: gk.array(dtype=float), y: gk.array(dtype=gk.float64)):
        i = gk.tid()
        y[i] = gk.float64(gk.sin(x[i])) + gk.cos(y[i])
    src = trig.source("c")
    assert "sinf(" in src and "cos(" in src and "cosf(" not in src


def test_a_compile_error_shows_the_compiler_message_and_the_numbered_source(monkeypatch):
    monkeypatch.setitem(codegen.C.code_for_op, "mul", lambda a, t, at: f"({a[0]} *** {a[1]})")

    @gk.kernel
    def bad_mul(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = x[i] * 3.0
    with pytest.raises(CompileError) as info:
        gk.launch(bad_mul, 4, inputs=[gk.zeros(4, device="c")], outputs=[gk.zeros(4, device="c")], device="c")
    text = str(info.value)
    assert "in kernel 'bad_mul'" in text and "C compiler" in text and "rejected the generated code" in text
    assert "error" in text.lower() and "--- generated C ---" in text and "***" in text


@gk.func_native({"c": "out[tid] = a * x[tid] + y[tid];"},
                adj_snippets={"c": "adj_x[tid] += a * adj_out[tid]; adj_y[tid] += adj_out[tid];\n"
                                   "adj_a += x[tid] * adj_out[tid];"})
def saxpy_c(a: float, x: gk.array(dtype=float), y: gk.array(dtype=float), out: gk.array(dtype=float),
            tid: int):
    ...


@gk.kernel
def saxpy_kernel(a: gk.array(dtype=float), x: gk.array(dtype=float), y: gk.array(dtype=float),
                 out: gk.array(dtype=float)):
    saxpy_c(a[0], x, y, out, gk.tid())


def test_native_c_snippets_forward_and_adjoint(rng):
    n = 97
    x0, y0, g0 = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    a = gk.array(np.array([1.5], np.float32), device="c", requires_grad=True)
    x = gk.array(x0, device="c", requires_grad=True)
    y = gk.array(y0, device="c", requires_grad=True)
    out = gk.zeros(n, device="c", requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(saxpy_kernel, n, inputs=[a, x, y], outputs=[out], device="c")
    np.testing.assert_allclose(out.numpy(), 1.5 * x0.astype(np.float64) + y0, rtol=1e-6, atol=1e-6)
    tape.backward(grads={out: g0})
    np.testing.assert_allclose(x.grad.numpy(), 1.5 * g0.astype(np.float64), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), g0, rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy()[0], float(x0.astype(np.float64) @ g0), rtol=1e-4)


def test_libraries_are_cached_in_memory_only(monkeypatch):
    import os
    fn = for_backend(mixed.lowered("forward"), CBackend.native_prims)
    backend = CBackend()
    backend.compile(DEV, fn, CompileOptions(debug=True))
    runs = []
    real = compiler._run
    monkeypatch.setattr(compiler, "_run", lambda cmd, cwd=None: runs.append(cmd) or real(cmd, cwd))
    backend.compile(DEV, fn, CompileOptions(debug=True))
    assert runs == [], "the same source is not compiled twice in a process"
    assert os.listdir(compiler._directory()) == [], "nothing compiled stays on disk"


def test_compiles_from_several_threads_at_once():
    backend = CBackend()
    errors, results = [], {}

    def work(k: int) -> None:
        @gk.kernel
        def scale(x: gk.array(dtype=float), y: gk.array(dtype=float)):
            i = gk.tid()
            y[i] = x[i] * float(k + 2)
        try:
            x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
            compiled = backend.compile(DEV, for_backend(scale.lowered("forward")), CompileOptions())
            backend.launch(compiled, (8,), _args(x, y))
            results[k] = y
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, y in results.items():
        np.testing.assert_array_equal(y, np.arange(8) * (k + 2))
