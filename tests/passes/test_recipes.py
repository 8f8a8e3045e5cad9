"""The recipes of docs/architecture.md, held true: each test follows one recipe to the letter and checks the
result on every device, so a change that makes a recipe need one more step fails here.

  * a unary builtin with its gradient = one table entry (`unary_math`) — value, reverse and forward mode;
  * a builtin written in other primitives = one entry with an `expand` rule, derivative declared on it;
  * a pass = a function wrapped in `Pass(name, apply)`; `run_passes` verifies what it leaves and names it.

The builtins are registered for the duration of one test and removed afterwards.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradkit as gk
from gradkit.core import ir
from gradkit.core.builtins import BUILTINS, Builtin, register
from gradkit.core.builtins.scalar import _c, _decomposer, _elementwise, unary_math
from gradkit.core.lang import LangFunction
from gradkit.core.passes import LOWER, Pass, run_passes

F64 = gk.float64


@pytest.fixture
def registered():
    """Builtins a test registers are removed after it (the table is process-wide)."""
    names = []
    yield names
    for name in names:
        BUILTINS.pop(name, None)


def _check_unary(kernel, x, ref, deriv, device, rng):
    """Value, reverse-mode and forward-mode gradients of y[i] = f(x[i]) against float64 references."""
    n = len(x)
    xa = gk.array(x, dtype=F64, device=device, requires_grad=True)
    ya = gk.zeros(n, dtype=F64, device=device, requires_grad=True)
    w, v = rng.normal(size=n), rng.normal(size=n)
    tape = gk.Tape()
    with tape:
        gk.launch(kernel, n, inputs=[xa], outputs=[ya], device=device)
    np.testing.assert_allclose(ya.numpy(), ref(x), rtol=1e-12, atol=1e-14)
    tape.backward(grads={ya: gk.array(w, dtype=F64, device=device)})
    np.testing.assert_allclose(xa.grad.numpy(), w * deriv(x), rtol=1e-9, atol=1e-12)
    fd = (ref(x + 1e-6) - ref(x - 1e-6)) / 2e-6
    np.testing.assert_allclose(xa.grad.numpy(), w * fd, rtol=1e-5, atol=1e-7)
    with gk.ForwardMode(seeds={xa: gk.array(v, dtype=F64, device=device)}):
        gk.launch(kernel, n, inputs=[xa], outputs=[ya], device=device)
    np.testing.assert_allclose(ya.dual.numpy(), deriv(x) * v, rtol=1e-9, atol=1e-12)


def test_recipe_unary_builtin_is_one_table_entry(registered, device, rng):
    """Recipe 'add a builtin': `unary_math(name, numpy_eval, derivative, cmath=C function)`. The CPU backend
    calls libm's cbrt, OpenCL its built-in cbrt, the NumPy reference the eval; both AD modes read the
    derivative. (A public builtin also gets `gk.<name>` and a row in tests/builtin_table.py; here the
    LangFunction stands in for the gk attribute, made at import for table entries.)"""
    name = "recipe_cbrt"
    registered.append(name)
    unary_math(name, np.cbrt, lambda b, x, y: b.div(_c(b, x, 1), b.mul(_c(b, x, 3), b.mul(y, y))),
               cmath="cbrt")
    recipe_cbrt = LangFunction(name, "prim")

    @gk.kernel
    def k(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
        i = gk.tid()
        y[i] = recipe_cbrt(x[i])

    x = rng.uniform(0.2, 3.0, 41) * rng.choice([-1.0, 1.0], 41)
    _check_unary(k, x, np.cbrt, lambda x: 1 / (3 * np.cbrt(x) ** 2), device, rng)


def test_recipe_builtin_written_in_other_primitives(registered, device, rng):
    """Recipe 'a builtin no backend implements': declare it with `expand` (its meaning in other primitives)
    and its derivative; the expand pass writes it out after differentiation, for every backend."""
    name = "recipe_softsign"
    registered.append(name)

    def expand(b, args, attrs):
        (x,) = args
        return b.div(x, b.add(_c(b, x, 1), b.prim("abs", x)))

    def partials(b, args, out, attrs):
        (x,) = args
        d = b.add(_c(b, x, 1), b.prim("abs", x))
        return [b.div(_c(b, x, 1), b.mul(d, d))]

    register(Builtin(name, _elementwise(name, float_only=True), eval=lambda x: x / (1 + np.abs(x)), arity=1,
                     partials=partials, decompose=_decomposer(name), float_only=True, expand=expand))
    recipe_softsign = LangFunction(name, "prim")

    @gk.kernel
    def k(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
        i = gk.tid()
        y[i] = recipe_softsign(x[i])

    x = rng.uniform(-3, 3, 41)
    x = x[np.abs(x) > 0.05]
    _check_unary(k, x, lambda x: x / (1 + np.abs(x)), lambda x: 1 / (1 + np.abs(x)) ** 2, device, rng)
    if device != "numpy":       # the NumPy reference evaluates it natively only when it lists it
        code = gk.get_device(device).impl.source(k.specialization(gk.get_device(device), "forward").compiled)
        assert name not in code


@gk.kernel
def _saxpy(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
    i = gk.tid()
    y[i] = 2.0 * x[i] + 1.0


def test_recipe_a_pass_is_named_verified_and_logged():
    """Recipe 'add a pass': a function IR → IR wrapped in `Pass(name, apply)` and listed where it runs; the
    pipeline verifies its output (naming the pass when it is invalid) and logs the IR after it."""
    def swap_mul_args(fn):
        for ins in fn.walk():
            if ins.op == "prim" and ins.attrs["name"] == "mul":
                ins.args.reverse()
        return fn

    lowered = run_passes(_saxpy.typed_ir, LOWER + (Pass("swap_mul_args", swap_mul_args),), keep_log=True)
    assert [name for name, _ in lowered.attrs["pass_log"]][-1] == "swap_mul_args"

    def broken(fn):                      # uses values before they are defined
        fn.body.body.reverse()
        return fn

    with pytest.raises(ir.IRError, match="after pass 'broken'"):
        run_passes(_saxpy.typed_ir, LOWER + (Pass("broken", broken),))

    def mistyped(fn):                    # leaves a value of the wrong type behind
        for ins in fn.walk():
            if ins.op == "prim" and ins.attrs["name"] == "mul":
                ins.results[0].type = gk.int32
        return fn

    with pytest.raises(ir.IRError, match="after pass 'mistyped'"):
        run_passes(_saxpy.typed_ir, LOWER + (Pass("mistyped", mistyped),))


def test_recipe_table_entry_needs_no_backend_edit():
    """Every builtin naming a C function is callable on every backend without a backend edit: the CPU
    table falls back to libm, OpenCL's to the built-in of that name."""
    from gradkit.backends.cpu.prims import CODE_FOR_OP as CPU_OPS
    from gradkit.backends.opencl.ops import CODE_FOR_OP as CL_OPS, formatter
    for name, entry in BUILTINS.items():
        if entry.cmath is not None and name not in CPU_OPS:
            assert callable(formatter(CL_OPS, name))
    assert math.isclose(float(gk.erf(np.float64(0.5))), math.erf(0.5))
