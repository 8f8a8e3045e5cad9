"""`cg`, `bicgstab` and `gmres` over gradkit kernels (linalg/vector.py, `bsr_mv`), after warp.optim.linear.

Each solve writes the solution into `x` (the initial guess) and returns (iterations, residual norm); it
stops when ‖b − A x‖ <= max(tol ‖b‖, atol) or after `maxiter` iterations. Under a recording gk.Tape a
solve is one step (`tape.record_func`, linalg/implicit.py) whose backward pass solves the transposed
system: the implicit-function-theorem gradient, exact up to the tolerance, with no iterations kept.
`cg(..., backward="unroll")` records every iteration's kernels instead (for checking, or unconverged
solves whose iterates are the model)."""

from __future__ import annotations

import math

import numpy as np

import gradkit as gk

from ..runtime.state import current as _recording
from .fused import cg_fused, fusable
from .operators import apply, resolve_preconditioner, vector_info
from .vector import Vectors


def _check(A, b: gk.array, x: gk.array) -> tuple:
    for name, v in (("b", b), ("x", x)):
        if not isinstance(v, gk.array) or v.ndim != 1:
            raise TypeError(f"{name}: a 1-D gk.array is needed")
    if b.dtype is not x.dtype or b.shape != x.shape:
        raise ValueError(f"b and x: dtype/shape differ ({b.dtype!r} {b.shape}, {x.dtype!r} {x.shape})")
    n = getattr(A, "nrow", b.shape[0])
    if getattr(A, "ncol", n) != n or n != b.shape[0]:
        raise ValueError(f"A: a square operator of {b.shape[0]} block rows is needed")
    if getattr(A, "vector_type", b.dtype) is not b.dtype:
        raise TypeError(f"b: dtype {b.dtype!r}, the operator's vectors are {A.vector_type!r}")
    return vector_info(b)


def _target(vec: Vectors, b: gk.array, tol: float, atol: float) -> float:
    """The squared residual norm to reach."""
    return max(tol * tol * vec.dot(b, b), atol * atol)


def _precondition(M, r: gk.array, z: gk.array, record: bool) -> gk.array:
    if M is None:
        return r
    apply(M, r, z, record)
    return z


def cg_iterations(A, b, x, tol, atol, maxiter, M, record: bool, check_every: int = 1) -> tuple:
    """Preconditioned conjugate gradients. Coefficients stay on the device (one-element arrays read by the
    update kernels); only the convergence test reads a number back, every `check_every` iterations.
    Unrecorded on a CPU BsrMatrix with no or a block-diagonal preconditioner it runs fused (linalg/fused.py).
    `record`: every launch recorded, each iterate a new array (the unrolled, differentiable form)."""
    bs, scalar = vector_info(b)
    n = b.shape[0]
    if not record and fusable(A, M):
        vec = Vectors(n, bs, scalar, b.device, False)
        it, rr = cg_fused(A, b, x, _target(vec, b, tol, atol), maxiter, M, check_every, vec)
        return it, math.sqrt(max(rr, 0.0))
    grad = record and (b.requires_grad or getattr(getattr(A, "values", None), "requires_grad", False))
    vec = Vectors(n, bs, scalar, b.device, record)
    new = lambda: vec.new(grad)
    target = _target(vec, b, tol, atol)
    ap, r = new(), new()
    xk = gk.copy(new(), x) if record else x      # recorded: x itself is only overwritten, at the end
    apply(A, xk, ap, record)
    vec.axpby(1.0, b, -1.0, ap, r)
    z = _precondition(M, r, new(), record)
    p = vec.copy(z, new())
    rz = vec.scalar_array(grad)
    vec.dot_into(r, z, rz)
    rr = vec.dot(r, r)
    it = 0
    while it < maxiter and rr > target:
        ap = new() if record else ap
        apply(A, p, ap, record)
        pap = vec.scalar_array(grad)
        vec.dot_into(p, ap, pap)
        x_new, r_new = (new(), new()) if record else (xk, r)
        vec.launch("cg_update", n, [xk, r, p, ap, rz, pap], [x_new, r_new])
        xk, r = x_new, r_new
        z = _precondition(M, r, new() if record else z, record)
        rz_new = vec.scalar_array(grad)
        vec.dot_into(r, z, rz_new)
        p_new = new() if record else p
        vec.launch("cg_direction", n, [z, p, rz_new, rz], [p_new])
        p, rz = p_new, rz_new
        it += 1
        if it % check_every == 0 or it == maxiter:
            rr = vec.dot(r, r)
    if xk is not x:
        gk.copy(x, xk)
    return it, math.sqrt(max(rr, 0.0))


def bicgstab_iterations(A, b, x, tol, atol, maxiter, M, record: bool = False) -> tuple:
    """Right-preconditioned BiCGSTAB (van der Vorst) with host scalars from device dot products."""
    bs, scalar = vector_info(b)
    n = b.shape[0]
    vec = Vectors(n, bs, scalar, b.device, False)
    target = _target(vec, b, tol, atol)
    r, r0, p, v, s, t = (vec.new() for _ in range(6))
    ph, sh = vec.new(), vec.new()
    apply(A, x, v, False)
    vec.axpby(1.0, b, -1.0, v, r)
    vec.copy(r, r0)
    v.zero_()
    rho = alpha = omega = 1.0
    rr = vec.dot(r, r)
    it = 0
    while it < maxiter and rr > target:
        rho_new = vec.dot(r0, r)
        if rho_new == 0.0 or omega == 0.0:
            break                                   # breakdown: r ⟂ r0 (restart would be needed)
        beta = (rho_new / rho) * (alpha / omega)
        vec.lincomb3(1.0, r, beta, p, -beta * omega, v, p)
        php = _precondition(M, p, ph, False)
        apply(A, php, v, False)
        den = vec.dot(r0, v)
        if den == 0.0:
            break
        alpha = rho_new / den
        vec.axpby(1.0, r, -alpha, v, s)
        it += 1
        ss = vec.dot(s, s)
        if ss <= target:
            vec.axpby(1.0, x, alpha, php, x)
            rr = ss
            break
        shs = _precondition(M, s, sh, False)
        apply(A, shs, t, False)
        tt = vec.dot(t, t)
        omega = vec.dot(t, s) / tt if tt > 0.0 else 0.0
        vec.lincomb3(1.0, x, alpha, php, omega, shs, x)
        vec.axpby(1.0, s, -omega, t, r)
        rho = rho_new
        rr = vec.dot(r, r)
    return it, math.sqrt(max(rr, 0.0))


def gmres_iterations(A, b, x, tol, atol, maxiter, M, record: bool = False, restart: int = 31) -> tuple:
    """Restarted, right-preconditioned GMRES: Arnoldi with modified Gram-Schmidt in kernels, the small
    Hessenberg least-squares problem (Givens rotations) on the host."""
    bs, scalar = vector_info(b)
    n = b.shape[0]
    vec = Vectors(n, bs, scalar, b.device, False)
    target = _target(vec, b, tol, atol)
    m = max(1, min(int(restart), n * bs))
    V = [vec.new() for _ in range(m + 1)]
    Z = [vec.new() for _ in range(m)] if M is not None else V
    w = vec.new()
    it = 0
    apply(A, x, w, False)
    vec.axpby(1.0, b, -1.0, w, V[0])
    beta = vec.norm(V[0])
    while it < maxiter and beta * beta > target:
        vec.axpby(1.0 / beta, V[0], 0.0, V[0], V[0])
        H = np.zeros((m + 1, m))
        cs, sn = np.zeros(m), np.zeros(m)
        g = np.zeros(m + 1)
        g[0] = beta
        j = 0
        while j < m and it < maxiter:
            zj = _precondition(M, V[j], Z[j], False)
            apply(A, zj, w, False)
            for i in range(j + 1):
                H[i, j] = vec.dot(w, V[i])
                vec.axpby(1.0, w, -H[i, j], V[i], w)
            H[j + 1, j] = vec.norm(w)
            if H[j + 1, j] > 0.0:
                vec.axpby(1.0 / H[j + 1, j], w, 0.0, w, V[j + 1])
            for i in range(j):                       # earlier rotations on the new column
                H[i, j], H[i + 1, j] = cs[i] * H[i, j] + sn[i] * H[i + 1, j], -sn[i] * H[i, j] + cs[i] * H[i + 1, j]
            d = math.hypot(H[j, j], H[j + 1, j])
            cs[j], sn[j] = (H[j, j] / d, H[j + 1, j] / d) if d > 0.0 else (1.0, 0.0)
            H[j, j], H[j + 1, j] = d, 0.0
            g[j], g[j + 1] = cs[j] * g[j], -sn[j] * g[j]
            j += 1
            it += 1
            if g[j] * g[j] <= target or H[j, j - 1] == 0.0 and d == 0.0:
                break
        y = np.zeros(j)
        for i in range(j - 1, -1, -1):              # back substitution on the rotated (triangular) H
            y[i] = (g[i] - H[i, i + 1:j] @ y[i + 1:]) / H[i, i] if H[i, i] != 0.0 else 0.0
        for i in range(j):
            vec.axpby(1.0, x, float(y[i]), Z[i], x)
        apply(A, x, w, False)                        # the true residual, for the test and the restart
        vec.axpby(1.0, b, -1.0, w, V[0])
        beta = vec.norm(V[0])
    return it, beta


METHODS = {"cg": cg_iterations, "bicgstab": bicgstab_iterations, "gmres": gmres_iterations}


def _solve(method: str, A, b, x, tol, atol, maxiter, M, backward: str, **options) -> tuple:
    _check(A, b, x)
    if backward not in ("implicit", "unroll"):
        raise ValueError(f"backward: 'implicit' or 'unroll', got {backward!r}")
    if backward == "unroll" and method != "cg":
        raise ValueError(f"backward='unroll' is cg's only: {method} records its solve as one implicit step")
    maxiter = int(maxiter if maxiter is not None else max(10, 2 * b.shape[0] * vector_info(b)[0]))
    tape = _recording.tape
    if backward == "unroll" and tape is not None:
        with gk.no_grad():
            M_built = resolve_preconditioner(A, M)     # a constant, as in the implicit gradient
        return METHODS[method](A, b, x, tol, atol, maxiter, M_built, record=True, **options)
    with gk.no_grad():
        M_built = resolve_preconditioner(A, M)
        iters, res = METHODS[method](A, b, x, tol, atol, maxiter, M_built, record=False, **options)
    if tape is not None:
        from .implicit import record_solve
        record_solve(tape, method, A, b, x, tol, atol, maxiter, M, M_built, iters, res, options)
    return iters, res


def cg(A, b: gk.array, x: gk.array, tol: float = 1e-6, atol: float = 0.0, maxiter: int | None = None, M=None,
       check_every: int = 1, backward: str = "implicit") -> tuple:
    """Solve A x = b for a symmetric positive definite A by preconditioned conjugate gradients.

    Args:
        A: a square `gk.sparse.BsrMatrix`, a `LinearOperator`, or a callable `f(x, y)` writing y = A x.
        b, x: arrays of A's vector type; x is the initial guess and receives the solution.
        tol, atol: stop when ‖b − A x‖ <= max(tol ‖b‖, atol).
        maxiter: iteration limit (default 2n).
        M: preconditioner: None, "diag" (Jacobi), "block_diag" (block-Jacobi), a BsrMatrix, or a callable.
        check_every: read the residual back every this many iterations.
        backward: "implicit" (one tape step solving Aᵀλ = x̄) or "unroll" (every iteration recorded).

    Returns:
        (iterations, residual norm).
    """
    return _solve("cg", A, b, x, tol, atol, maxiter, M, backward, check_every=check_every)


def bicgstab(A, b: gk.array, x: gk.array, tol: float = 1e-6, atol: float = 0.0, maxiter: int | None = None,
             M=None) -> tuple:
    """Solve A x = b for a general square A by right-preconditioned BiCGSTAB; arguments and result as
    `cg`'s. Its tape step's backward solves Aᵀλ = x̄ with BiCGSTAB.

    Args:
        A: a square `gk.sparse.BsrMatrix`, a `LinearOperator`, or a callable `f(x, y)` writing y = A x.
        b, x: arrays of A's vector type; x is the initial guess and receives the solution.
        tol, atol: stop when ‖b − A x‖ <= max(tol ‖b‖, atol).
        maxiter: iteration limit (default 2n).
        M: preconditioner: None, "diag" (Jacobi), "block_diag" (block-Jacobi), a BsrMatrix, or a callable.

    Returns:
        (iterations, residual norm)."""
    return _solve("bicgstab", A, b, x, tol, atol, maxiter, M, "implicit")


def gmres(A, b: gk.array, x: gk.array, tol: float = 1e-6, atol: float = 0.0, maxiter: int | None = None,
          M=None, restart: int = 31) -> tuple:
    """Solve A x = b for a general square A by restarted, right-preconditioned GMRES(`restart`); the other
    arguments and the result as `cg`'s.

    Args:
        A: a square `gk.sparse.BsrMatrix`, a `LinearOperator`, or a callable `f(x, y)` writing y = A x.
        b, x: arrays of A's vector type; x is the initial guess and receives the solution.
        tol, atol: stop when ‖b − A x‖ <= max(tol ‖b‖, atol).
        maxiter: iteration limit (default 2n).
        M: preconditioner: None, "diag" (Jacobi), "block_diag" (block-Jacobi), a BsrMatrix, or a callable.
        restart: the Krylov subspace size before a restart.

    Returns:
        (iterations, residual norm)."""
    return _solve("gmres", A, b, x, tol, atol, maxiter, M, "implicit", restart=restart)
