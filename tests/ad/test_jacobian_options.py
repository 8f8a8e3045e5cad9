"""gk.autograd as Warp 1.19 has it: `input_output_mask`, `max_outputs_per_var` / `max_inputs_per_var`, and a
Python function that launches kernels in place of a kernel — for reverse, forward and finite-difference
Jacobians and for gradcheck, on every device, against analytic float64 Jacobians."""

import numpy as np
import pytest

import gradkit as gk

F64 = gk.float64


@gk.kernel
def two_outputs(a: gk.array(dtype=F64), b: gk.array(dtype=F64), n: gk.array(dtype=gk.int32),
                out1: gk.array(dtype=F64), out2: gk.array(dtype=F64)):
    i = gk.tid()
    out1[i] = a[i] * b[i] + gk.sin(a[(i + 1) % 3])
    out2[i] = b[i] * b[i] * float(n[0])


def _args(device, rng):
    a = gk.array(rng.normal(size=3), dtype=F64, device=device, requires_grad=True)
    b = gk.array(rng.normal(size=3), dtype=F64, device=device, requires_grad=True)
    n = gk.array([3], dtype=gk.int32, device=device)
    out1 = gk.zeros(3, dtype=F64, device=device, requires_grad=True)
    out2 = gk.zeros(3, dtype=F64, device=device, requires_grad=True)
    return a, b, n, out1, out2


def _reference(a, b):
    """Analytic Jacobians of two_outputs, keyed (out_idx, in_idx) like gk.autograd's."""
    d1a = np.diag(b) + np.array([[np.cos(a[(i + 1) % 3]) if j == (i + 1) % 3 else 0.0 for j in range(3)]
                                 for i in range(3)])
    return {(0, 0): d1a, (0, 1): np.diag(a), (1, 0): np.zeros((3, 3)), (1, 1): np.diag(6.0 * b)}


METHODS = {
    "reverse": lambda *a, limit=-1, **k: gk.autograd.jacobian(*a, max_outputs_per_var=limit, **k),
    "forward": lambda *a, limit=-1, **k: gk.autograd.jacobian_fwd(*a, max_inputs_per_var=limit, **k),
    "fd": lambda *a, limit=-1, **k: gk.autograd.jacobian_fd(*a, max_inputs_per_var=limit, eps=1e-6, **k),
}
TOL = {"reverse": 1e-12, "forward": 1e-12, "fd": 1e-6}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mask", [[("a", "out1"), ("b", "out2")], [(0, 0), (1, 1)], [("b", 0), (1, "out2")]])
def test_mask_selects_pairs_by_name_or_index(device, rng, method, mask):
    a, b, n, out1, out2 = _args(device, rng)
    ref = _reference(a.numpy(), b.numpy())
    jac = METHODS[method](two_outputs, 3, [a, b, n], [out1, out2], input_output_mask=mask, device=device)
    want = {(0, 0), (1, 1)} if mask[0][0] in ("a", 0) else {(0, 1), (1, 1)}
    assert set(jac) == want
    for key in want:
        np.testing.assert_allclose(jac[key], ref[key], atol=TOL[method], rtol=TOL[method])


@pytest.mark.parametrize("method", METHODS)
def test_limits_leave_unevaluated_entries_nan(device, rng, method):
    a, b, n, out1, out2 = _args(device, rng)
    ref = _reference(a.numpy(), b.numpy())
    jac = METHODS[method](two_outputs, 3, [a, b, n], [out1, out2], limit=2, device=device)
    assert set(jac) == set(ref)
    for key, value in jac.items():
        assert value.shape == (3, 3)
        done = value[:2] if method == "reverse" else value[:, :2]
        rest = value[2:] if method == "reverse" else value[:, 2:]
        assert np.isnan(rest).all()
        np.testing.assert_allclose(done, ref[key][:2] if method == "reverse" else ref[key][:, :2],
                                   atol=TOL[method], rtol=TOL[method])


def test_arguments_are_left_as_they_were(device, rng):
    a, b, n, out1, out2 = _args(device, rng)
    out1.assign(rng.normal(size=3))
    a.grad.assign(rng.normal(size=3))
    before = {name: x.numpy().copy() for name, x in [("a", a), ("b", b), ("out1", out1), ("a.grad", a.grad)]}
    for method in METHODS:
        METHODS[method](two_outputs, 3, [a, b, n], [out1, out2], device=device)
    for name, x in [("a", a), ("b", b), ("out1", out1), ("a.grad", a.grad)]:
        np.testing.assert_array_equal(x.numpy(), before[name], err_msg=name)
    assert a.dual is None and out1.dual is None


# --------------------------------------------------------------------------- Python functions

@gk.kernel
def scale_rows(p: gk.array(dtype=gk.vec3d), s: gk.array(dtype=F64), q: gk.array(dtype=gk.vec3d)):
    i = gk.tid()
    q[i] = p[i] * s[i]


@gk.kernel
def norms(q: gk.array(dtype=gk.vec3d), r: gk.array(dtype=F64)):
    i = gk.tid()
    r[i] = gk.length(q[i])


def scaled_norms(p, s):
    """Two launches: q = p * s (per row), r = |q|; returns both."""
    q = gk.zeros(p.shape[0], dtype=gk.vec3d, device=p.device, requires_grad=True)
    r = gk.zeros(p.shape[0], dtype=F64, device=p.device, requires_grad=True)
    gk.launch(scale_rows, p.shape[0], inputs=[p, s], outputs=[q], device=p.device)
    gk.launch(norms, p.shape[0], inputs=[q], outputs=[r], device=p.device)
    return q, r


def _function_reference(p, s):
    """Analytic Jacobians of scaled_norms, rows/columns flattened with vector components last."""
    m = len(s)
    dq_dp, dq_ds = np.zeros((3 * m, 3 * m)), np.zeros((3 * m, m))
    dr_dp, dr_ds = np.zeros((m, 3 * m)), np.zeros((m, m))
    for i in range(m):
        dq_dp[3 * i:3 * i + 3, 3 * i:3 * i + 3] = s[i] * np.eye(3)
        dq_ds[3 * i:3 * i + 3, i] = p[i]
        q = p[i] * s[i]
        unit = q / np.linalg.norm(q)
        dr_dp[i, 3 * i:3 * i + 3] = unit * s[i]
        dr_ds[i, i] = unit @ p[i]
    return {(0, 0): dq_dp, (0, 1): dq_ds, (1, 0): dr_dp, (1, 1): dr_ds}


def _function_args(device, rng, m=4):
    p = gk.array(rng.normal(size=(m, 3)), dtype=gk.vec3d, device=device, requires_grad=True)
    s = gk.array(rng.uniform(0.5, 2.0, size=m), dtype=F64, device=device, requires_grad=True)
    return p, s


@pytest.mark.parametrize("method", METHODS)
def test_function_jacobians_match_analytic(device, rng, method):
    p, s = _function_args(device, rng)
    ref = _function_reference(p.numpy().astype(np.float64), s.numpy().astype(np.float64))
    jac = METHODS[method](scaled_norms, inputs=[p, s], device=device)
    assert set(jac) == set(ref)
    for key in ref:
        np.testing.assert_allclose(jac[key], ref[key], atol=TOL[method], rtol=TOL[method], err_msg=str(key))


@pytest.mark.parametrize("method", METHODS)
def test_function_mask_and_limits(device, rng, method):
    p, s = _function_args(device, rng)
    ref = _function_reference(p.numpy().astype(np.float64), s.numpy().astype(np.float64))
    jac = METHODS[method](scaled_norms, inputs=[p, s], input_output_mask=[("s", 1)], limit=3, device=device)
    assert list(jac) == [(1, 1)]
    value = jac[(1, 1)]
    done, rest = (value[:3], value[3:]) if method == "reverse" else (value[:, :3], value[:, 3:])
    want = ref[(1, 1)][:3] if method == "reverse" else ref[(1, 1)][:, :3]
    assert np.isnan(rest).all()
    np.testing.assert_allclose(done, want, atol=TOL[method], rtol=TOL[method])


def test_function_jacobian_keeps_user_state_and_enclosing_tape(device, rng):
    p, s = _function_args(device, rng)
    p.grad.assign(rng.normal(size=(4, 3)))
    grad_before, values_before = p.grad.numpy().copy(), p.numpy().copy()
    tape = gk.Tape()
    with tape:
        for method in METHODS:
            METHODS[method](scaled_norms, inputs=[p, s], device=device)
    assert tape.launches == []          # the Jacobian's own launches are not recorded on the user's tape
    np.testing.assert_array_equal(p.grad.numpy(), grad_before)
    np.testing.assert_array_equal(p.numpy(), values_before)
    assert p.dual is None and s.dual is None


def test_function_inputs_need_requires_grad(device, rng):
    p, s = _function_args(device, rng)
    frozen = gk.array(s.numpy(), dtype=F64, device=device)         # no requires_grad
    jac = gk.autograd.jacobian(scaled_norms, inputs=[p, frozen], device=device)
    assert {i for _, i in jac} == {0}
    with pytest.raises(ValueError, match=r"input 's' of function 'scaled_norms' is not differentiable.*requires_grad"):
        gk.autograd.jacobian(scaled_norms, inputs=[p, frozen], input_output_mask=[("s", 0)], device=device)
    plain = gk.array(p.numpy(), dtype=gk.vec3d, device=device)
    with pytest.raises(ValueError, match=r"function 'scaled_norms': none of its inputs is a float array with requires_grad"):
        gk.autograd.jacobian(scaled_norms, inputs=[plain, frozen], device=device)


@gk.func
def wrong_cube(v: F64) -> F64:
    return v * v * v


@gk.func_grad(wrong_cube)
def adj_wrong_cube(v: F64, adj_ret: F64):
    gk.adjoint[v] += 2.0 * v * v * adj_ret          # deliberately wrong (should be 3 v^2)


@gk.kernel
def cube_kernel(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
    i = gk.tid()
    y[i] = wrong_cube(x[i])


@gk.kernel
def square_kernel(x: gk.array(dtype=F64), y: gk.array(dtype=F64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


def squares_then_cubes(x):
    y = gk.zeros(x.shape[0], dtype=F64, device=x.device, requires_grad=True)
    z = gk.zeros(x.shape[0], dtype=F64, device=x.device, requires_grad=True)
    gk.launch(square_kernel, x.shape[0], inputs=[x], outputs=[y], device=x.device)
    gk.launch(cube_kernel, x.shape[0], inputs=[x], outputs=[z], device=x.device)
    return y, z


def test_gradcheck_of_a_function(device, rng):
    p, s = _function_args(device, rng)
    assert gk.autograd.gradcheck(scaled_norms, inputs=[p, s], eps=1e-6, device=device)
    x = gk.array(rng.uniform(1.0, 2.0, size=3), dtype=F64, device=device, requires_grad=True)
    with pytest.raises(gk.GradientCheckError, match=r"function 'squares_then_cubes'[\s\S]*output 1\s+x"):
        gk.autograd.gradcheck(squares_then_cubes, inputs=[x], device=device)
    # the right output alone passes; the wrong one fails without raising when asked
    assert gk.autograd.gradcheck(squares_then_cubes, inputs=[x], input_output_mask=[("x", 0)], device=device)
    assert not gk.autograd.gradcheck(squares_then_cubes, inputs=[x], input_output_mask=[("x", 1)],
                                     raise_exception=False, device=device)


def test_gradcheck_compares_only_evaluated_entries(device, rng):
    a, b, n, out1, out2 = _args(device, rng)
    assert gk.autograd.gradcheck(two_outputs, 3, [a, b, n], [out1, out2], max_inputs_per_var=2,
                                 max_outputs_per_var=1, eps=1e-6, device=device)
    x = gk.array(rng.uniform(1.0, 2.0, size=4), dtype=F64, device=device, requires_grad=True)
    y = gk.zeros(4, dtype=F64, device=device, requires_grad=True)
    # one evaluated row of a wrong gradient is enough to fail
    assert not gk.autograd.gradcheck(cube_kernel, 4, [x], [y], max_outputs_per_var=1, raise_exception=False,
                                     device=device)


def test_gradcheck_tape_takes_masks_per_kernel(device, rng):
    a, b, n, out1, out2 = _args(device, rng)
    x = gk.array(rng.uniform(1.0, 2.0, size=3), dtype=F64, device=device, requires_grad=True)
    y = gk.zeros(3, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(two_outputs, 3, inputs=[a, b, n], outputs=[out1, out2], device=device)
        gk.launch(cube_kernel, 3, inputs=[x], outputs=[y], device=device)
    assert not gk.autograd.gradcheck_tape(tape, raise_exception=False)
    masks = {"two_outputs": [("a", "out1")], "cube_kernel": []}
    assert gk.autograd.gradcheck_tape(tape, input_output_masks=masks, eps=1e-6)


# --------------------------------------------------------------------------- misuse

def test_misuse_is_a_clear_error(device, rng):
    a, b, n, out1, out2 = _args(device, rng)
    args = (two_outputs, 3, [a, b, n], [out1, out2])
    with pytest.raises(ValueError, match=r"kernel 'two_outputs' has no input named 'c' \(inputs: a, b, n\)"):
        gk.autograd.jacobian(*args, input_output_mask=[("c", "out1")], device=device)
    with pytest.raises(ValueError, match=r"input 'n' of kernel 'two_outputs' is not differentiable"):
        gk.autograd.jacobian(*args, input_output_mask=[("n", "out1")], device=device)
    with pytest.raises(ValueError, match=r"output index 2 is out of range: kernel 'two_outputs' has 2 outputs"):
        gk.autograd.jacobian_fd(*args, input_output_mask=[(0, 2)], device=device)
    with pytest.raises(TypeError, match=r"each entry is an \(input, output\) pair"):
        gk.autograd.jacobian_fwd(*args, input_output_mask=["a"], device=device)
    with pytest.raises(TypeError, match=r"kernel 'two_outputs' needs dim="):
        gk.autograd.jacobian(two_outputs, inputs=[a, b, n], outputs=[out1, out2], device=device)
    with pytest.raises(TypeError, match=r"function 'scaled_norms'.*dim= and outputs= are not taken"):
        gk.autograd.jacobian(scaled_norms, inputs=[a, b], outputs=[out1], device=device)
    with pytest.raises(TypeError, match=r"function '<lambda>' must return a gk.array.*output 0 is float"):
        gk.autograd.jacobian(lambda x: 1.0, inputs=[a], device=device)
    with pytest.raises(TypeError, match=r"takes a kernel or a Python function"):
        gk.autograd.jacobian(42, inputs=[a], device=device)
    # nothing was changed by the failed calls
    assert a.dual is None and out1.dual is None
