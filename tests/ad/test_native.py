"""`@gk.func_native`: native snippets per backend (OpenCL C, LLVM IR for cpu), their adjoint and replay
snippets, compared with NumPy float64 references and finite differences on every device; a backend
without a snippet (the NumPy plugin) gets a CompileError naming the function and the backend."""

import numpy as np
import pytest

import gradkit as gk
from tests.conftest import DEVICES

# devices whose backend takes snippets (the NumPy plugin's CompileError is checked in the saxpy test)
NATIVE = [d for d in DEVICES if gk.get_device(d).backend in ("cpu", "opencl")]

CPU_SAXPY = """
entry:
  %i = sext i32 %tid to i64
  %px = getelementptr float, ptr %x, i64 %i
  %py = getelementptr float, ptr %y, i64 %i
  %po = getelementptr float, ptr %out, i64 %i
  %vx = load float, ptr %px
  %vy = load float, ptr %py
  %ax = fmul float %a, %vx
  %r = fadd float %ax, %vy
  store float %r, ptr %po
  ret void
"""
CPU_SAXPY_ADJ = """
entry:
  %i = sext i32 %tid to i64
  %px = getelementptr float, ptr %x, i64 %i
  %pgo = getelementptr float, ptr %adj_out, i64 %i
  %pgx = getelementptr float, ptr %adj_x, i64 %i
  %pgy = getelementptr float, ptr %adj_y, i64 %i
  %vx = load float, ptr %px
  %go = load float, ptr %pgo
  %gx = load float, ptr %pgx
  %ax = fmul float %a, %go
  %gx2 = fadd float %gx, %ax
  store float %gx2, ptr %pgx
  %gy = load float, ptr %pgy
  %gy2 = fadd float %gy, %go
  store float %gy2, ptr %pgy
  %ga = load float, ptr %adj_a
  %xg = fmul float %vx, %go
  %ga2 = fadd float %ga, %xg
  store float %ga2, ptr %adj_a
  ret void
"""


@gk.func_native({"cpu": CPU_SAXPY, "opencl": "out[tid] = a * x[tid] + y[tid];"},
                adj_snippets={"cpu": CPU_SAXPY_ADJ,
                              "opencl": "adj_x[tid] += a * adj_out[tid]; adj_y[tid] += adj_out[tid];\n"
                                        "adj_a += x[tid] * adj_out[tid];"})
def saxpy(a: float, x: gk.array(dtype=float), y: gk.array(dtype=float), out: gk.array(dtype=float), tid: int):
    ...


@gk.kernel
def saxpy_kernel(a: float, x: gk.array(dtype=float), y: gk.array(dtype=float), out: gk.array(dtype=float)):
    saxpy(a, x, y, out, gk.tid())


# A snippet that returns a value; its adjoint adds into the scalar argument's adjoint.
@gk.func_native({"cpu": "%x2 = fmul double %x, %x\n%x3 = fmul double %x2, %x\nret double %x3",
                 "opencl": "return x * x * x;"},
                adj_snippets={"cpu": "%x2 = fmul double %x, %x\n%d = fmul double %x2, 3.0\n"
                                     "%g = fmul double %d, %adj_ret\n%old = load double, ptr %adj_x\n"
                                     "%new = fadd double %old, %g\nstore double %new, ptr %adj_x\nret void",
                              "opencl": "adj_x += 3.0 * x * x * adj_ret;"})
def cube(x: gk.float64) -> gk.float64:
    ...


@gk.kernel
def cube_sum(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = cube(x[i]) + gk.sin(x[i])


# Counts forward executions; the empty replay snippet keeps the backward pass from counting again.
@gk.func_native({"cpu": "atomicrmw add ptr %count, i32 1 monotonic\nret void",
                 "opencl": "atomic_inc(count);"},
                adj_snippets={"cpu": "ret void", "opencl": ""},
                replay_snippets={"cpu": "ret void", "opencl": ""})
def count_call(count: gk.array(dtype=gk.int32)):
    ...


@gk.kernel
def counted_square(x: gk.array(dtype=float), count: gk.array(dtype=gk.int32), y: gk.array(dtype=float)):
    i = gk.tid()
    count_call(count)
    y[i] = x[i] * x[i]


@gk.func_native({"cpu": "ret float %x", "opencl": "return x;"})
def no_grad(x: float) -> float:
    ...


@gk.kernel
def uses_no_grad(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = no_grad(x[i])


def test_saxpy_forward_and_adjoint_snippets(device, rng):
    n = 257
    x0, y0, g0 = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.array(y0, device=device, requires_grad=True)
    out = gk.zeros(n, device=device, requires_grad=True)
    if device not in NATIVE:
        backend = gk.get_device(device).backend
        with pytest.raises(gk.CompileError, match=rf"'saxpy' has no snippets entry for the '{backend}' backend"):
            gk.launch(saxpy_kernel, n, inputs=[1.5, x, y], outputs=[out], device=device)
        return
    tape = gk.Tape()
    with tape:
        gk.launch(saxpy_kernel, n, inputs=[1.5, x, y], outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), 1.5 * x0.astype(np.float64) + y0, rtol=1e-6, atol=1e-6)
    tape.backward(grads={out: g0})
    np.testing.assert_allclose(x.grad.numpy(), 1.5 * g0.astype(np.float64), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), g0, rtol=1e-6)


@pytest.mark.parametrize("device", NATIVE)
def test_snippet_returning_a_value_matches_analytic_and_finite_differences(device, rng):
    x0 = rng.uniform(-2, 2, 64)
    x = gk.array(x0, device=device, requires_grad=True)
    y = gk.zeros(64, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(cube_sum, 64, inputs=[x], outputs=[y], device=device)
    np.testing.assert_allclose(y.numpy(), x0 ** 3 + np.sin(x0), rtol=1e-12)
    tape.backward(grads={y: np.ones(64)})
    np.testing.assert_allclose(x.grad.numpy(), 3 * x0 ** 2 + np.cos(x0), rtol=1e-12)
    assert gk.autograd.gradcheck(cube_sum, 64, [gk.array(x0, device=device, requires_grad=True)],
                                 [gk.zeros(64, dtype=gk.float64, device=device, requires_grad=True)],
                                 eps=1e-6, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("device", NATIVE)
def test_replay_snippet_replaces_the_forward_snippet_in_the_backward_pass(device, rng):
    n = 100
    x0 = rng.standard_normal(n).astype(np.float32)
    x = gk.array(x0, device=device, requires_grad=True)
    count = gk.zeros(1, dtype=gk.int32, device=device)
    y = gk.zeros(n, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(counted_square, n, inputs=[x, count], outputs=[y], device=device)
    assert count.numpy()[0] == n
    tape.backward(grads={y: np.ones(n, np.float32)})
    assert count.numpy()[0] == n                     # the replay ran the empty snippet
    np.testing.assert_allclose(x.grad.numpy(), 2 * x0, rtol=1e-6)


@pytest.mark.parametrize("device", NATIVE)
def test_gradient_through_a_snippet_without_adjoint_is_an_error(device):
    x = gk.array([1.0, 2.0], device=device, requires_grad=True)
    y = gk.zeros(2, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(uses_no_grad, 2, inputs=[x], outputs=[y], device=device)
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0])
    with pytest.raises(gk.CompileError, match="'no_grad'.*no adj_snippets"):
        tape.backward(grads={y: np.ones(2, np.float32)})
    with pytest.raises(gk.CompileError, match="'no_grad'.*forward mode"):
        gk.launch(uses_no_grad, 2, inputs=[x], outputs=[y], device=device, tangent=True)


def test_bad_declarations():
    with pytest.raises(TypeError, match="snippets must be a dict"):
        gk.func_native("return x;")
    with pytest.raises(TypeError, match="adj_snippets must be a dict"):
        gk.func_native({"opencl": "return x;"}, adj_snippets={"opencl": 3})

    @gk.func_native({"cpu": "ret void"})
    def takes_vec(v: gk.vec3):
        ...

    @gk.kernel
    def calls_vec(x: gk.array(dtype=gk.vec3)):
        takes_vec(x[gk.tid()])

    with pytest.raises(gk.CompileError, match="parameter 'v' has type vec3.*scalars and arrays only"):
        calls_vec.ir()
