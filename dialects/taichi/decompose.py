"""`ti.svd`, `ti.polar_decompose`, `ti.sym_eig`: gradkit's decompositions (core/library/decompositions.py)
returned in Taichi 1.7's forms, so a Taichi program reads the results it was written for.

Taichi's forms: `U, S, V = ti.svd(A)` with S a diagonal *matrix*, A = U S Vᵀ; 3x3: U, V rotations, |σ|
decreasing, the last σ carrying det(A)'s sign (gradkit's svd3 already); 2x2: σ₁ ≥ σ₂ ≥ 0, V a rotation and
U a reflection when det(A) < 0. `R, P = ti.polar_decompose(A)`: 3x3 R the closest rotation (gk's), 2x2 the
closest rotation when det(A) ≥ 0 and the closest reflection when det(A) < 0, P = Rᵀ A symmetric positive
semi-definite then (the zero matrix gives (I, 0)). `w, Q = ti.sym_eig(A)`: eigenvalues and eigenvectors in
the columns of Q; 3x3 ascending (gk's eig3), 2x2 descending with v₁ ∥ the first column of A - λ₂I and v₂ ∥
that of A - λ₁I (the second column where the first is zero; Taichi divides by zero there), I for A = cI.
Eigen- and singular vectors are unique only up to sign: gradkit's signs can differ from Taichi's where
its algorithm chose the other one. Each form is a @gk.func per precision, so both AD modes differentiate it.
"""

# (no `from __future__ import annotations`: the kernel-language functions below need evaluated annotations)

from types import SimpleNamespace

import gradkit as gk
from gradkit.core import types as T

from .fields import scalar_type
from .lang import _cast, macro

_FORMS: dict = {}


def _forms(s: T.ScalarType) -> dict:
    """The Taichi-form functions for float type s, compiled once."""
    if s in _FORMS:
        return _FORMS[s]
    M2, M3, V2 = T.matrix((2, 2), s), T.matrix((3, 3), s), T.vector(2, s)
    tiny = 1e-30 if s is T.float32 else 1e-280
    lib = SimpleNamespace()

    def svd_2(A: M2) -> tuple[M2, M2, M2]:
        U, sig, V = gk.svd2(A)
        k = gk.where(sig[1] < 0.0, -1.0, 1.0)          # σ₂ ≥ 0: its sign moves into U's second column
        return M2(U[0, 0], U[0, 1] * k, U[1, 0], U[1, 1] * k), M2(sig[0], 0.0, 0.0, sig[1] * k), V

    def svd_3(A: M3) -> tuple[M3, M3, M3]:
        U, sig, V = gk.svd3(A)
        return U, M3(sig[0], 0.0, 0.0, 0.0, sig[1], 0.0, 0.0, 0.0, sig[2]), V

    def polar_2(A: M2) -> tuple[M2, M2]:
        # The rotation [[c, -t], [t, c]] maximising trace(Rᵀ A) is (c, t) ∥ (a + d, c - b); the reflection
        # [[c, t], [t, -c]] one (c, t) ∥ (a - d, b + c). Taichi takes the reflection when det(A) < 0.
        neg = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0] < 0.0
        x = gk.where(neg, A[0, 0] - A[1, 1], A[0, 0] + A[1, 1])
        y = gk.where(neg, A[0, 1] + A[1, 0], A[1, 0] - A[0, 1])
        n2 = x * x + y * y
        ok = n2 > tiny
        r = gk.sqrt(gk.where(ok, n2, 1.0))
        c, t = gk.where(ok, x / r, 1.0), gk.where(ok, y / r, 0.0)
        R = gk.where(neg, M2(c, t, t, -c), M2(c, -t, t, c))
        P = gk.transpose(R) @ A
        return R, (P + gk.transpose(P)) * 0.5

    def polar_3(A: M3) -> tuple[M3, M3]:
        R, P = gk.polar_decompose(A)
        return R, P

    def _unit_col(B: M2) -> V2:
        """The first column of B normalised, or the second where the first is zero."""
        c0 = V2(B[0, 0], B[1, 0])
        c1 = V2(B[0, 1], B[1, 1])
        n0 = gk.dot(c0, c0)
        n1 = gk.dot(c1, c1)
        use0 = n0 > tiny
        c = gk.where(use0, c0, c1)
        return c / gk.sqrt(gk.where(use0, n0, gk.where(n1 > tiny, n1, 1.0)))

    def sym_eig_2(A: M2) -> tuple[V2, M2]:
        tr = A[0, 0] + A[1, 1]
        gap = (A[0, 0] - A[1, 1]) * (A[0, 0] - A[1, 1]) + 4.0 * A[0, 1] * A[1, 0]
        root = gk.sqrt(gk.where(gap > 0.0, gap, 0.0))
        l1 = (tr + root) * 0.5
        l2 = (tr - root) * 0.5
        v1 = lib._unit_col(A - gk.identity(n=2, dtype=s) * l2)
        v2 = lib._unit_col(A - gk.identity(n=2, dtype=s) * l1)
        same = root * root <= tiny                      # A = cI: every vector is an eigenvector
        Q = gk.where(same, M2(1.0, 0.0, 0.0, 1.0), M2(v1[0], v2[0], v1[1], v2[1]))
        return V2(l1, l2), Q

    def sym_eig_3(A: M3) -> tuple[T.vector(3, s), M3]:
        Q, d = gk.eig3(A)
        return d, Q

    out = {}
    for py in (svd_2, svd_3, polar_2, polar_3, _unit_col, sym_eig_2, sym_eig_3):
        name = py.__name__
        py.__name__ = py.__qualname__ = f"ti_{name.strip('_')}_{s.name}"
        out[name] = gk.func(py)
    lib.__dict__.update(out)            # sym_eig_2 calls _unit_col through `lib`
    _FORMS[s] = out
    return out


def _decomposition(kind: str):
    def fn(E, A, dt=None):
        t = getattr(A, "type", None)
        if t is None or not t.is_matrix or t.shape not in ((2, 2), (3, 3)):
            E.fail(f"needs a 2x2 or 3x3 matrix, got {getattr(t, 'name', repr(A))}")
        s = scalar_type(dt) if dt is not None else t.scalar
        if not s.is_float:
            E.fail(f"needs a float type, got {s.name}")
        if t.scalar is not s:
            A = _cast(E, A, T.matrix(t.shape, s))
        return E.call(_forms(s)[f"{kind}_{t.shape[0]}"], A)
    return fn


svd = macro("svd", doc="ti.svd(A, dt=None) -> (U, S, V), A = U S Vᵀ, S a diagonal matrix (Taichi's forms)")(
    _decomposition("svd"))
polar_decompose = macro("polar_decompose", doc="ti.polar_decompose(A, dt=None) -> (R, P), A = R P")(
    _decomposition("polar"))
sym_eig = macro("sym_eig", doc="ti.sym_eig(A, dt=None) -> (eigenvalues, eigenvectors as columns)")(
    _decomposition("sym_eig"))
