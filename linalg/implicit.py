"""A solve as one tape step: its backward pass is the implicit-function-theorem adjoint.

For A x = b, with x̄ the gradient reaching x: solve Aᵀλ = x̄ (the same method and tolerance, relative to
‖x̄‖), then b̄ += λ and Ā += −λ xᵀ restricted to A's pattern (one kernel, a thread per block row); x̄ is
then consumed (the solve overwrote x, so its value before the solve has no gradient)."""

from __future__ import annotations

import gradkit as gk

from ..sparse import BsrMatrix, bsr_transposed
from .operators import LinearOperator, resolve_preconditioner, transposed, vector_info
from .vector import Vectors


def _transposed_preconditioner(method: str, M, At):
    """The preconditioner of the transposed solve: rebuilt from Aᵀ for 'diag'/'block_diag', transposed when
    a BsrMatrix, the same operator for CG (symmetric) and when declared symmetric, else none."""
    if M is None or isinstance(M, str):
        return resolve_preconditioner(At, M) if isinstance(At, BsrMatrix) else None
    if method == "cg":
        return M
    if isinstance(M, BsrMatrix):
        return bsr_transposed(M)
    if isinstance(M, LinearOperator) and (M.symmetric or M.rmatvec is not None):
        return M.transposed()
    return None


def record_solve(tape, method: str, A, b, x, tol, atol, maxiter, M, M_built, iters, res, options) -> None:
    from .solvers import METHODS
    values = A.values if isinstance(A, BsrMatrix) else None

    def backward() -> None:
        xbar = x.grad
        if xbar is None:
            return
        wants_b = b.grad is not None
        wants_values = values is not None and values.grad is not None
        if wants_b or wants_values:
            with gk.no_grad():
                At = A if method == "cg" else transposed(A)
                Mt = M_built if method == "cg" else _transposed_preconditioner(method, M, At)
                lam = gk.zeros_like(x)
                METHODS[method](At, xbar, lam, tol, atol, maxiter, Mt, record=False, **options)
                bs, scalar = vector_info(b)
                if wants_b:
                    Vectors(b.shape[0], bs, scalar, b.device, False).axpby(1.0, b.grad, 1.0, lam, b.grad)
                if wants_values and A.nrow:
                    gk.launch(A.kernels()["add_outer_rows"], A.nrow,
                              inputs=[A.offsets, A.columns, lam, x, -1.0], outputs=[values.grad],
                              device=A.device, record_tape=False)
        xbar.zero_()

    arrays = [x, b] + ([values] if values is not None else [])
    tape.record_func(backward, arrays)
    record = tape.records[-1]
    record.name = f"{method} ({iters} iterations, residual {res:.3g})"     # the debugger's node label
    record.meta = {"method": method, "iterations": int(iters), "residual": float(res), "tol": float(tol),
                   "unknowns": int(x.shape[0])}
    record.writes = [x]          # the solve overwrites x: its backward consumes x's gradient (tape_consume)
    record.array_names = ["x", "b", "A.values"][:len(arrays)]     # how the debugger names them (viz/bundle_steps.py)
