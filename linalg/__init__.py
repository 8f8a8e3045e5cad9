"""`gk.linalg`: iterative linear solvers over gradkit kernels, differentiable through the solve (issue #45),
after `warp.optim.linear`.

- solvers.py: `cg`, `bicgstab`, `gmres` → (iterations, residual norm); A a `gk.sparse.BsrMatrix`, a
  `LinearOperator` or a callable; preconditioners None, "diag", "block_diag", a matrix or a callable;
- implicit.py: a solve under a recording tape is one step whose backward solves Aᵀλ = x̄;
- operators.py: `LinearOperator`, `preconditioner` (Jacobi / block-Jacobi as block-diagonal BsrMatrix);
- vector.py: the vector kernels (two-stage dot products, linear combinations, CG's updates);
- fused.py: CG's iteration in fewer launches for a BsrMatrix on the CPU with no or a block-diagonal preconditioner
  (A p with p·Ap, the update with r·z and r·r), used whenever a CG solve is not unrolled onto a tape.
"""

from .operators import LinearOperator, preconditioner
from .solvers import bicgstab, cg, gmres

__all__ = ["cg", "bicgstab", "gmres", "LinearOperator", "preconditioner"]
