"""gradkit.taichi's call fast path (dialects/taichi/kernels.py `_Plan`): a kernel called with positional
arguments launches prebuilt launches; it gives what the general path gives (values, gradients on a
ti.ad.Tape, ti.random streams, loop extents read at each call) and the general path still serves keyword
and defaulted arguments, ndarray parameters and loop bounds that need the kernel's top-level locals."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit as gk
import gradkit.taichi as ti
import importlib

ti_kernel = importlib.import_module("gradkit.taichi.kernels")    # the module (ti.kernel is the decorator)


def _program(steps=6, n=4):
    """A small time-stepped program (mass_spring's shape): a field per step, a loop per kernel, serial code,
    scalar and template arguments, a Python global read in a loop bound."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=(steps, n), needs_grad=True)
    w = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    count = {"n": n}

    @ti.kernel
    def step(t: ti.i32, s: ti.f64):
        for i in range(count["n"]):
            x[t, i] = ti.sin(x[t - 1, i]) * w[i] + s * x[t - 1, i]

    @ti.kernel
    def total(t: ti.i32, f: ti.template()):
        for i in range(1, n):
            loss[None] += f[t, i] ** 2
        loss[None] += 0.5 * f[t, 0]

    def run():
        x.from_numpy(np.linspace(0.1, 0.9, steps * n).reshape(steps, n))
        w.from_numpy(np.linspace(-1.0, 1.0, n))
        with ti.ad.Tape(loss):
            for t in range(1, steps):
                step(t, 0.25)
            total(steps - 1, x)
        return loss[None], w.grad.to_numpy(), x.grad.to_numpy()
    return run


def test_fast_path_gives_the_general_paths_values_and_gradients(monkeypatch):
    fast = _program()()
    monkeypatch.setattr(ti_kernel.TiKernel, "_plan", lambda self, args: None)
    slow = _program()()
    assert fast[0] == slow[0]
    np.testing.assert_array_equal(fast[1], slow[1])
    np.testing.assert_array_equal(fast[2], slow[2])
    assert np.any(fast[1] != 0)


def _manual_backward():
    """_program's kernels differentiated with `kernel.grad(...)` (diffmpm's way) instead of a Tape."""
    run = _program()
    cells = {c.cell_contents.__name__: c.cell_contents for c in run.__closure__
             if isinstance(getattr(c, "cell_contents", None), ti_kernel.TiKernel)}
    run()                                           # values; then the adjoints by hand
    by_shape = {c.cell_contents.shape: c.cell_contents for c in run.__closure__
                if isinstance(c.cell_contents, ti.Field)}
    x, w, loss = by_shape[(6, 4)], by_shape[(4,)], by_shape[()]
    for f in (x, w, loss):
        f.grad.fill(0)
    loss.grad[None] = 1.0
    cells["total"].grad(5, x)
    for t in reversed(range(1, 6)):
        cells["step"].grad(t, 0.25)
    return w.grad.to_numpy(), x.grad.to_numpy()


def test_kernel_grad_on_the_fast_path_gives_the_general_paths_gradients(monkeypatch):
    fast = _manual_backward()
    monkeypatch.setattr(ti_kernel.TiKernel, "_plan", lambda self, args: None)
    slow = _manual_backward()
    taped = _program()()
    for a, b, c in zip(fast, slow, taped[1:]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-13, atol=0)
    assert np.any(fast[0] != 0)


def test_fast_path_is_taken_and_builds_one_plan_per_compile_time_arguments():
    run = _program()
    run()
    run()
    kernels = [v for v in run.__closure__ if isinstance(getattr(v, "cell_contents", None), ti_kernel.TiKernel)]
    assert len(kernels) == 2
    for cell in kernels:
        plans = cell.cell_contents._plans
        assert len(plans) == 1 and all(p for p in plans.values())


def test_loop_extents_are_read_at_each_call():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    a = ti.field(ti.f64, shape=8)
    size = {"n": 3}

    @ti.kernel
    def fill(v: ti.f64):
        for i in range(size["n"]):
            a[i] = v

    fill(1.0)
    size["n"] = 5
    fill(2.0)
    assert a.to_numpy().tolist() == [2.0] * 5 + [0.0] * 3
    size["n"] = 0
    fill(3.0)                                       # an empty loop launches nothing
    assert a.to_numpy().tolist() == [2.0] * 5 + [0.0] * 3


EXTENT = 2          # a module global a loop bound reads (the plan evaluates it in the module's globals)


def test_constant_global_and_argument_extents_follow_each_call():
    global EXTENT
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    a = ti.field(ti.f64, shape=(3, 8))

    @ti.kernel
    def fill(m: ti.i32, v: ti.f64):
        for i in range(2 + 1):                      # constant: read once
            a[i, 0] += v
        for i in range(EXTENT):                     # a module global: read at each call
            a[0, i + 1] = v
        for i in range(1, m):                       # an argument
            a[1, i] = v * i
        for i in range(len(a.shape) + 1):           # a global field's attribute
            a[2, i] = v

    fill(3, 1.0)
    EXTENT = 4
    fill(4, 2.0)
    got = a.to_numpy()
    assert got[0, 1:5].tolist() == [2.0] * 4 and got[1, 1:4].tolist() == [2.0, 4.0, 6.0]
    assert got[:, 0].tolist() == [3.0, 3.0, 2.0]    # row 2's element 0 was last written by the fourth loop
    assert got[2, :3].tolist() == [2.0] * 3
    EXTENT = 2


def test_random_streams_match_the_general_path(monkeypatch):
    def run():
        ti.init(arch=ti.cpu, default_fp=ti.f64, random_seed=7)
        a = ti.field(ti.f64, shape=16)
        m = {"n": 0}

        @ti.kernel
        def noise(k: ti.i32):
            for i in range(m["n"]):          # empty at first: its stream is counted all the same
                a[i] += ti.random()
            for i in range(16):
                a[i] += ti.random() * k
        for k in range(3):
            noise(k)
            m["n"] = 4
        return a.to_numpy()
    fast = run()
    monkeypatch.setattr(ti_kernel.TiKernel, "_plan", lambda self, args: None)
    np.testing.assert_array_equal(fast, run())


def test_general_path_serves_keywords_defaults_ndarrays_and_top_level_locals(monkeypatch):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    a = ti.field(ti.f64, shape=6)
    taken = []
    real = ti_kernel.TiKernel._launches

    def spy(self, args, kwargs):
        taken.append(self.__name__)
        return real(self, args, kwargs)
    monkeypatch.setattr(ti_kernel.TiKernel, "_launches", spy)

    @ti.kernel
    def scaled(v: ti.f64, k: ti.i32 = 2):
        for i in range(k):
            a[i] = v

    @ti.kernel
    def copy_in(src: ti.types.ndarray()):
        for i in range(6):
            a[i] = src[i]

    @ti.kernel
    def half(k: ti.i32):
        m = k // 2
        for i in range(m):
            a[i] = 9.0

    scaled(1.0, 3)
    assert taken == []                               # positional: the plan
    scaled(v=4.0, k=1)
    scaled(5.0)
    assert taken == ["scaled", "scaled"]
    assert a.to_numpy().tolist()[:3] == [5.0, 5.0, 1.0]
    copy_in(np.arange(6.0))
    assert taken[-1] == "copy_in" and a.to_numpy().tolist() == list(np.arange(6.0))
    half(6)
    assert taken[-1] == "half" and a.to_numpy().tolist() == [9.0, 9.0, 9.0, 3.0, 4.0, 5.0]


def test_data_oriented_objects_get_their_own_plans():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.data_oriented
    class Box:
        def __init__(self, n, v):
            self.n, self.v = n, v
            self.a = ti.field(ti.f64, shape=n)

        @ti.kernel
        def fill(self, k: ti.f64):
            for i in range(self.n):
                self.a[i] = self.v * k

    b1, b2 = Box(3, 1.0), Box(5, 2.0)
    for _ in range(2):
        b1.fill(2.0)
        b2.fill(3.0)
    assert b1.a.to_numpy().tolist() == [2.0] * 3
    assert b2.a.to_numpy().tolist() == [6.0] * 5


def test_to_numpy_is_a_copy_that_exposes_no_view():
    """to_numpy() copies without handing out a view, so a tape need not checksum the field at every launch
    that reads it; writing into the copy changes nothing."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    a = ti.field(ti.f64, shape=3)
    a.from_numpy(np.arange(3.0))
    out = a.to_numpy()
    out[0] = 7.0
    assert a.to_numpy().tolist() == [0.0, 1.0, 2.0]
    assert not a.arr._exposed


@pytest.mark.parametrize("debug", [False, True])
def test_a_tape_checks_versions_once_per_kernel_sequence_unless_validating(monkeypatch, debug):
    """The version check only decides whether ti.ad.Tape gives its note (Taichi's gradient either way): as
    Taichi, no check without validation=True; under ti.init(debug=True) the first tape over a sequence of
    kernels is checked and a training loop's later ones skip it; validation=True checks every time."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=debug)
    x = ti.field(ti.f64, shape=5, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy(k: ti.f64):
        for i in x:
            loss[None] += k * x[i] ** 3

    checked, original = [], gk.Tape.backward

    def spy(self, *args, **kwargs):
        checked.append(self.check_versions)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(gk.Tape, "backward", spy)
    xs = np.random.default_rng(3).uniform(-1, 1, 5)
    x.from_numpy(xs)
    grads = []
    for _ in range(3):
        with ti.ad.Tape(loss=loss):
            energy(0.5)
        grads.append(x.grad.to_numpy())
    with ti.ad.Tape(loss=loss, validation=True):
        energy(0.5)
    grads.append(x.grad.to_numpy())
    assert checked == [debug, False, False, True]
    for g in grads:
        assert np.allclose(g, 1.5 * xs ** 2, rtol=1e-14, atol=0)


def test_repeated_calls_reuse_the_last_plan_until_ti_init(monkeypatch):
    """A kernel without compile-time parameters called again with the same settings takes its last call's
    plan without keying it (kernels.TiKernel._last); ti.init in between, or a template argument, keys it
    again, and every call reads the fields and arguments it is given now."""
    rng = np.random.default_rng(11)
    keyed = []
    plan = ti_kernel.TiKernel._plan
    monkeypatch.setattr(ti_kernel.TiKernel, "_plan", lambda self, args: keyed.append(self.__name__) or plan(self, args))
    for _ in range(2):                      # the second ti.init: new fields, the same kernel objects
        ti.init(arch=ti.cpu, default_fp=ti.f64)
        x = ti.field(ti.f64, shape=5)
        y = ti.field(ti.f64, shape=5)
        xs = rng.uniform(-1, 1, 5)
        x.from_numpy(xs)
        if not keyed:
            @ti.kernel
            def scale(k: ti.f64, n: ti.i32):
                for i in range(n):
                    y[i] = k * x[i] * x[i]

            @ti.kernel
            def copy(f: ti.template(), k: ti.f64):
                for i in range(5):
                    f[i] = k
        keyed.clear()
        for j in range(4):
            scale(0.5 * j, 5 - j)
            np.testing.assert_allclose(y.to_numpy()[:5 - j], 0.5 * j * xs[:5 - j] ** 2, rtol=1e-15, atol=0)
        assert keyed == ["scale"]           # keyed once per ti.init
        for j in range(3):
            copy(x, 1.0 + j)
            copy(y, -1.0 - j)
            assert x.to_numpy().tolist() == [1.0 + j] * 5 and y.to_numpy().tolist() == [-1.0 - j] * 5
        assert keyed.count("copy") == 6     # template arguments: keyed at every call
