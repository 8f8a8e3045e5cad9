"""The n-body pair sum (benchmark W3's kernel) and its float64 references, shared by the code-generation tests
that change how its loop sum is computed (loop-sum reassociation, fast math)."""

import numpy as np

import gradkit as gk


@gk.kernel
def pair_sum(x: gk.array(dtype=gk.vec2), U: gk.array(dtype=float)):
    i = gk.tid()
    xi = x[i]
    acc = 0.0
    for j in range(x.shape[0]):
        d = xi - x[j]
        acc += -1.0 / gk.sqrt(gk.dot(d, d) + 1.0e-3)
    gk.atomic_add(U, 0, acc)


def reference(p: np.ndarray) -> tuple[float, np.ndarray]:
    """U = sum_ij -1/r_ij and dU/dx_i (both the i and the j terms) in float64."""
    d = p[:, None, :].astype(np.float64) - p[None].astype(np.float64)
    r = np.sqrt((d * d).sum(-1) + 1e-3)
    return float((-1 / r).sum()), 2 * (d / r[..., None] ** 3).sum(1)


def check_pair_sum(device, p: np.ndarray, rtol: float, grad_rtol: float) -> None:
    """Run pair_sum forward and adjoint on `device` and compare both with the float64 reference."""
    n = len(p)
    x = gk.array(p, dtype=gk.vec2, device=device, requires_grad=True)
    U = gk.zeros(1, device=device, requires_grad=True)
    gk.launch(pair_sum, n, inputs=[x], outputs=[U], device=device)
    energy, grad = reference(p)
    np.testing.assert_allclose(U.numpy()[0], energy, rtol=rtol)
    U.grad.fill_(1.0)
    gk.launch(pair_sum, n, inputs=[x], outputs=[U], device=device, adjoint=True)
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=grad_rtol, atol=1e-3 * np.abs(grad).max())
