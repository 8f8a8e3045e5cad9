"""Matrix decompositions in kernels: `gk.svd3`, `gk.svd2`, `gk.qr3`, `gk.eig3`, `gk.polar_decompose`.

They are written once, below, in the kernel language itself (library `@gk.func` code, compiled once per
precision), so every backend runs them and both AD modes differentiate them with nothing new in the
passes or the code generators. Each iterative part (cyclic Jacobi sweeps in a `for` loop, not unrolled)
runs on `stop_gradient` values; a closing closed-form step, first-order perturbation theory around the
converged factors, carries the derivative. Its value is the iteration's (the step adds `W - stop(W)`,
exactly zero), its derivative the analytic one (e.g. dσᵢ = uᵢᵀ dA vᵢ), in forward and reverse mode alike.

Degenerate inputs (repeated singular values or eigenvalues, rank deficiency, the zero matrix) give finite
values and finite gradients, never NaN: a term whose denominator (σⱼ ∓ σᵢ, dⱼ - dᵢ) is below `_TOL`
times the largest magnitude is dropped, which is the derivative of one valid choice of the non-unique
singular/eigen vectors. Quantities that stay differentiable at such points (symmetric functions of the
singular values or eigenvalues such as their sum, the polar factors wherever σᵢ + σⱼ ≠ 0, QR of a
full-rank matrix) keep their exact derivative there. The sweeps' own (zero) custom gradient keeps reverse
mode from saving their loop on the per-thread stack.

The code uses the private primitive `stop_gradient` (identity value, no derivative;
core/builtins/stop_gradient.py). Each name is defined in core/lang as a `library` LangFunction carrying
what the frontend needs to lower a call (`resolve`, `outputs`) and its NumPy host implementation."""

# (no `from __future__ import annotations`: the library functions below need evaluated annotations)

from functools import partial
from types import SimpleNamespace

import numpy as np

from .. import types as T
from ..func import Func
from ..lang import NAMES, LangFunction


# Jacobi sweeps per precision: 3x3 cyclic Jacobi converges quadratically, and 4 sweeps already reach the
# rounding level in both precisions on 20000 random, symmetric, clustered, rank-1 and 1e±8-scaled inputs
# (3 do not in float32); then the relative size below which a denominator counts as zero.
_SWEEPS = {T.float32: 5, T.float64: 6}
_TOL = {T.float32: 1e-6, T.float64: 1e-13}
_TINY = {T.float32: 1e-30, T.float64: 1e-280}

DOCS = {
    "svd3": "svd3(A) -> (U, sigma, V) with A = U diag(sigma) Vᵀ for a mat33/mat33d (Warp's convention): U, V "
            "rotations (det +1), |sigma| decreasing, sigma[0], sigma[1] >= 0 and sigma[2] with the sign of "
            "det(A). svd3(A, U, sigma, V) assigns the local variables U, sigma, V instead. Differentiable; "
            "at repeated or zero singular values sigma's derivative stays exact and U, V get finite "
            "derivatives of one valid choice of singular vectors.",
    "svd2": "svd2(A) -> (U, sigma, V) for a mat22/mat22d: U, V rotations, sigma[0] >= |sigma[1]|, sigma[1] "
            "with the sign of det(A); svd2(A, U, sigma, V) assigns locals. Differentiable as svd3.",
    "qr3": "qr3(A) -> (Q, R) with A = Q R for a mat33/mat33d (Warp's convention): Q a rotation (det +1), R "
           "upper triangular with R[0,0], R[1,1] >= 0 and R[2,2] of the sign of det(A) (Gram-Schmidt). "
           "qr3(A, Q, R) assigns locals. Differentiable for full-rank A; rank-deficient A gives finite "
           "values and gradients (missing directions are completed to an orthonormal basis).",
    "eig3": "eig3(A) -> (Q, d) for a symmetric mat33/mat33d: A = Q diag(d) Qᵀ, eigenvalues d ascending, "
            "eigenvectors the columns of the rotation Q (det +1). A is symmetrised, (A + Aᵀ)/2, so its "
            "gradient is symmetric. eig3(A, Q, d) assigns locals. Differentiable; d's derivative is exact "
            "even at repeated eigenvalues, where Q's is finite (one valid eigenbasis).",
    "polar_decompose": "polar_decompose(A) -> (U, P) with A = U P for a 2x2 or 3x3 float matrix (Taichi): "
                       "U the rotation (det +1) closest to A, P = sym(Uᵀ A) symmetric (indefinite when "
                       "det(A) < 0). Differentiable, exactly also at repeated singular values; finite for "
                       "singular A.",
}


# --------------------------------------------------------------------------- the library, per precision

_LIBRARY: dict = {}


def _library(s: T.Type) -> dict:
    """The decompositions for scalar type `s` as @gk.func objects (built and cached on first use)."""
    if s in _LIBRARY:
        return _LIBRARY[s]
    gk = SimpleNamespace(**NAMES, stop_gradient=LangFunction("stop_gradient", "prim"))
    M2, M3, V2, V3 = T.matrix((2, 2), s), T.matrix((3, 3), s), T.vector(2, s), T.vector(3, s)
    sweeps, tol, tiny = _SWEEPS[s], _TOL[s], _TINY[s]
    lib = SimpleNamespace()            # filled with the compiled functions below

    # ---- helpers (all values here are stop_gradient'ed by the callers unless said otherwise)
    def _rot(app: s, aqq: s, apq: s) -> tuple[s, s]:
        """(c, s) of the Jacobi rotation zeroing entry (p, q): tan = sign(d)·2a / (|d| + √(d² + 4a²))."""
        d = aqq - app
        den = gk.abs(d) + gk.sqrt(d * d + 4.0 * apq * apq)
        ok = den > 0.0
        t = gk.where(ok, gk.where(d >= 0.0, 2.0, -2.0) * apq / gk.where(ok, den, 1.0), 0.0)
        c = 1.0 / gk.sqrt(1.0 + t * t)
        return c, t * c

    def _cols3(A: M3) -> tuple[V3, V3, V3]:
        return V3(A[0, 0], A[1, 0], A[2, 0]), V3(A[0, 1], A[1, 1], A[2, 1]), V3(A[0, 2], A[1, 2], A[2, 2])

    def _unit3(v: V3, fallback: V3) -> V3:
        """v / |v|, or `fallback` where v is (numerically) zero; differentiable with finite gradients."""
        n2 = gk.dot(v, v)
        ok = n2 > tiny
        return gk.where(ok, v / gk.sqrt(gk.where(ok, n2, 1.0)), fallback)

    def _orth_unit3(a: V3, q: V3) -> V3:
        """The unit vector along a's part orthogonal to the unit vector q (orthogonalised twice), or a unit
        vector orthogonal to q where that part is rounding noise (a parallel to q, or zero)."""
        w = a - q * gk.dot(q, a)
        w = w - q * gk.dot(q, w)
        n2 = gk.dot(w, w)
        ok = n2 > tiny + tol * tol * gk.dot(a, a)
        return gk.where(ok, w / gk.sqrt(gk.where(ok, n2, 1.0)), lib._perp3(q))

    def _perp3(u: V3) -> V3:
        """A unit vector orthogonal to the unit vector u."""
        w = gk.where(gk.abs(u[0]) < 0.9, gk.cross(u, V3(1.0, 0.0, 0.0)), gk.cross(u, V3(0.0, 1.0, 0.0)))
        return w / gk.length(w)

    def _unit2(v: V2, fallback: V2) -> V2:
        n2 = gk.dot(v, v)
        ok = n2 > tiny
        return gk.where(ok, v / gk.sqrt(gk.where(ok, n2, 1.0)), fallback)

    def _div(x: s, den: s, big: s) -> s:
        """x / den, or 0 where |den| <= tol·big (a degenerate pair): finite value and derivative."""
        ok = gk.abs(den) > tol * big
        return gk.where(ok, x / gk.where(ok, den, 1.0), 0.0)

    def _normalised3(A: M3) -> M3:
        m = gk.max(gk.max(gk.max(gk.abs(A[0, 0]), gk.abs(A[0, 1])), gk.max(gk.abs(A[0, 2]), gk.abs(A[1, 0]))),
                   gk.max(gk.max(gk.abs(A[1, 1]), gk.abs(A[1, 2])),
                          gk.max(gk.abs(A[2, 0]), gk.max(gk.abs(A[2, 1]), gk.abs(A[2, 2])))))
        return A * gk.where(m > 0.0, 1.0 / gk.where(m > 0.0, m, 1.0), 1.0)

    def _jacobi3(A: M3) -> tuple[M3, V3]:
        """Eigenvectors (columns, det +1) and ascending eigenvalues of the symmetric A: cyclic Jacobi."""
        S = A
        Q = gk.identity(n=3, dtype=s)
        for _sweep in range(sweeps):
            c, t = lib._rot(S[0, 0], S[1, 1], S[0, 1])
            J = M3(c, t, 0.0, -t, c, 0.0, 0.0, 0.0, 1.0)
            S = gk.transpose(J) @ S @ J
            Q = Q @ J
            c, t = lib._rot(S[0, 0], S[2, 2], S[0, 2])
            J = M3(c, 0.0, t, 0.0, 1.0, 0.0, -t, 0.0, c)
            S = gk.transpose(J) @ S @ J
            Q = Q @ J
            c, t = lib._rot(S[1, 1], S[2, 2], S[1, 2])
            J = M3(1.0, 0.0, 0.0, 0.0, c, t, 0.0, -t, c)
            S = gk.transpose(J) @ S @ J
            Q = Q @ J
        e0, e1, e2 = S[0, 0], S[1, 1], S[2, 2]
        c0, c1, c2 = lib._cols3(Q)
        sw = e1 < e0                      # a three-comparator sorting network
        e0, e1 = gk.where(sw, e1, e0), gk.where(sw, e0, e1)
        c0, c1 = gk.where(sw, c1, c0), gk.where(sw, c0, c1)
        sw = e2 < e0
        e0, e2 = gk.where(sw, e2, e0), gk.where(sw, e0, e2)
        c0, c2 = gk.where(sw, c2, c0), gk.where(sw, c0, c2)
        sw = e2 < e1
        e1, e2 = gk.where(sw, e2, e1), gk.where(sw, e1, e2)
        c1, c2 = gk.where(sw, c2, c1), gk.where(sw, c1, c2)
        return gk.transpose(M3(c0, c1, gk.cross(c0, c1))), V3(e0, e1, e2)

    def _eig_frames3(A: M3) -> tuple[M3, V3]:
        return lib._jacobi3(A)

    def _svd_frames3(A: M3) -> tuple[M3, M3]:
        """Rotations U0, V0 with U0ᵀ A V0 diagonal (|σ| decreasing): V0 from the eigenvectors of AᵀA,
        U0 from Gram-Schmidt of A V0 with its last column the cross product (so σ₂ carries det's sign)."""
        B = lib._normalised3(A)
        E, _lam = lib._jacobi3(gk.transpose(B) @ B)
        _w0, v1, v0 = lib._cols3(E)       # descending: the eigenvectors of the largest eigenvalues first
        V = gk.transpose(M3(v0, v1, gk.cross(v0, v1)))
        C = B @ V
        b0, b1, _b2 = lib._cols3(C)
        u0 = lib._unit3(b0, V3(1.0, 0.0, 0.0))
        u1 = lib._orth_unit3(b1, u0)
        return gk.transpose(M3(u0, u1, gk.cross(u0, u1))), V

    def _svd_pair(Eij: s, Eji: s, si: s, sj: s, big: s) -> tuple[s, s]:
        """Entries (i, j) of the skew generators W_U, W_V rotating U0, V0 to first order."""
        f = lib._div((Eij + Eji) * 0.5, sj - si, big)
        g = lib._div((Eij - Eji) * 0.5, sj + si, big)
        return f + g, f - g

    # ---- the public functions (these carry derivatives)
    def svd3(A: M3) -> tuple[M3, V3, M3]:
        U0, V0 = lib._svd_frames3(gk.stop_gradient(A))
        E = gk.transpose(U0) @ A @ V0
        sig = V3(E[0, 0], E[1, 1], E[2, 2])
        ss = gk.stop_gradient(sig)
        big = gk.abs(ss[0])
        a01, b01 = lib._svd_pair(E[0, 1], E[1, 0], ss[0], ss[1], big)
        a02, b02 = lib._svd_pair(E[0, 2], E[2, 0], ss[0], ss[2], big)
        a12, b12 = lib._svd_pair(E[1, 2], E[2, 1], ss[1], ss[2], big)
        WU = M3(0.0, a01, a02, -a01, 0.0, a12, -a02, -a12, 0.0)
        WV = M3(0.0, b01, b02, -b01, 0.0, b12, -b02, -b12, 0.0)
        U = U0 + U0 @ (WU - gk.stop_gradient(WU))
        V = V0 + V0 @ (WV - gk.stop_gradient(WV))
        return U, sig, V

    def _polar3(A: M3) -> tuple[M3, M3]:
        U0, V0 = lib._svd_frames3(gk.stop_gradient(A))
        E = gk.transpose(U0) @ A @ V0
        ss = gk.stop_gradient(V3(E[0, 0], E[1, 1], E[2, 2]))
        big = gk.abs(ss[0])
        h01 = lib._div(E[0, 1] - E[1, 0], ss[0] + ss[1], big)
        h02 = lib._div(E[0, 2] - E[2, 0], ss[0] + ss[2], big)
        h12 = lib._div(E[1, 2] - E[2, 1], ss[1] + ss[2], big)
        H = M3(0.0, h01, h02, -h01, 0.0, h12, -h02, -h12, 0.0)
        R = U0 @ (gk.identity(n=3, dtype=s) + H - gk.stop_gradient(H)) @ gk.transpose(V0)
        P = gk.transpose(R) @ A
        return R, (P + gk.transpose(P)) * 0.5

    def eig3(A: M3) -> tuple[M3, V3]:
        As = (A + gk.transpose(A)) * 0.5
        Q0, _d0 = lib._eig_frames3(lib._normalised3(gk.stop_gradient(As)))
        S = gk.transpose(Q0) @ As @ Q0
        d = V3(S[0, 0], S[1, 1], S[2, 2])
        ds = gk.stop_gradient(d)
        big = gk.max(gk.abs(ds[0]), gk.abs(ds[2]))
        w01 = lib._div(S[0, 1], ds[1] - ds[0], big)
        w02 = lib._div(S[0, 2], ds[2] - ds[0], big)
        w12 = lib._div(S[1, 2], ds[2] - ds[1], big)
        W = M3(0.0, w01, w02, -w01, 0.0, w12, -w02, -w12, 0.0)
        return Q0 + Q0 @ (W - gk.stop_gradient(W)), d

    def qr3(A: M3) -> tuple[M3, M3]:
        a0, a1, a2 = lib._cols3(A)
        q0 = lib._unit3(a0, V3(1.0, 0.0, 0.0))
        q1 = lib._orth_unit3(a1, q0)
        q2 = gk.cross(q0, q1)
        R = M3(gk.dot(q0, a0), gk.dot(q0, a1), gk.dot(q0, a2),
               0.0, gk.dot(q1, a1), gk.dot(q1, a2),
               0.0, 0.0, gk.dot(q2, a2))
        return gk.transpose(M3(q0, q1, q2)), R

    def svd2(A: M2) -> tuple[M2, V2, M2]:
        Ast = gk.stop_gradient(A)
        B = Ast * (1.0 / gk.max(gk.max(gk.max(gk.abs(Ast[0, 0]), gk.abs(Ast[0, 1])),
                                       gk.max(gk.abs(Ast[1, 0]), gk.abs(Ast[1, 1]))), tiny))
        S = gk.transpose(B) @ B
        c, t = lib._rot(S[0, 0], S[1, 1], S[0, 1])
        J = M2(c, t, -t, c)
        D = gk.transpose(J) @ S @ J
        v0 = gk.where(D[1, 1] > D[0, 0], V2(t, c), V2(c, -t))
        V0 = M2(v0[0], -v0[1], v0[1], v0[0])
        u0 = lib._unit2(B @ v0, V2(1.0, 0.0))
        U0 = M2(u0[0], -u0[1], u0[1], u0[0])
        E = gk.transpose(U0) @ A @ V0
        sig = V2(E[0, 0], E[1, 1])
        ss = gk.stop_gradient(sig)
        a, b = lib._svd_pair(E[0, 1], E[1, 0], ss[0], ss[1], gk.abs(ss[0]))
        WU, WV = M2(0.0, a, -a, 0.0), M2(0.0, b, -b, 0.0)
        return U0 + U0 @ (WU - gk.stop_gradient(WU)), sig, V0 + V0 @ (WV - gk.stop_gradient(WV))

    def _polar2(A: M2) -> tuple[M2, M2]:
        # The rotation maximising trace(Uᵀ A) in closed form: smooth wherever it is unique.
        x, y = A[0, 0] + A[1, 1], A[1, 0] - A[0, 1]
        n2 = x * x + y * y
        ok = n2 > tiny
        r = gk.sqrt(gk.where(ok, n2, 1.0))
        c, t = gk.where(ok, x / r, 1.0), gk.where(ok, y / r, 0.0)
        U = M2(c, -t, t, c)
        P = gk.transpose(U) @ A
        return U, (P + gk.transpose(P)) * 0.5

    def _eig_frames3_grad(A: M3, adj_Q: M3, adj_d: V3):
        pass

    def _svd_frames3_grad(A: M3, adj_U: M3, adj_V: M3):
        pass

    funcs = {}
    for py in (_rot, _cols3, _unit3, _orth_unit3, _perp3, _unit2, _div, _normalised3, _jacobi3, _eig_frames3,
               _svd_frames3, _svd_pair, svd3, _polar3, eig3, qr3, svd2, _polar2):
        name = py.__name__
        py.__name__ = py.__qualname__ = name if s is T.float32 else f"{name}_f64"
        funcs[name] = Func(py)
    # The iterations see only stop_gradient values; a (zero) custom gradient tells reverse mode so, and it
    # replays their loop without saving its carried values on the per-thread stack. (Calls with custom
    # gradients must not nest: _svd_frames3 calls the plain _jacobi3, eig3 the wrapper _eig_frames3.)
    for name, grad in (("_eig_frames3", _eig_frames3_grad), ("_svd_frames3", _svd_frames3_grad)):
        grad.__name__ = grad.__qualname__ = funcs[name].__name__ + "_grad"
        funcs[name].custom_grad = Func(grad, grad_of=funcs[name])
    lib.__dict__.update(funcs)         # the helpers call each other through `lib`
    _LIBRARY[s] = funcs
    return funcs


# --------------------------------------------------------------------------- dispatch

def _shape_of(t) -> tuple | None:
    if t is None or not getattr(t, "is_matrix", False) or not t.scalar.is_float:
        return None
    return t.shape


_FORMS = {"svd3": {(3, 3): "svd3"}, "svd2": {(2, 2): "svd2"}, "qr3": {(3, 3): "qr3"},
          "eig3": {(3, 3): "eig3"}, "polar_decompose": {(3, 3): "_polar3", (2, 2): "_polar2"}}
OUTPUTS = {"svd3": ("U", "sigma", "V"), "svd2": ("U", "sigma", "V"), "qr3": ("Q", "R"), "eig3": ("Q", "d"),
           "polar_decompose": ("U", "P")}


def resolve(name: str, t):
    """The @gk.func computing `name` for an argument of type `t`, or a message saying what is wrong."""
    forms = _FORMS[name]
    shape = _shape_of(t)
    if shape not in forms:
        want = " or ".join(f"{r}x{c}" for r, c in forms)
        return None, f"needs a {want} float matrix (float32 or float64), got {getattr(t, 'name', repr(t))}"
    return _library(t.scalar)[forms[shape]], ""


# --------------------------------------------------------------------------- host side (NumPy)

def _host_svd(a: np.ndarray):
    u, s, vt = np.linalg.svd(a)
    v = vt.T.copy()
    if np.linalg.det(u) < 0:
        u[:, -1] *= -1
        s[-1] *= -1
    if np.linalg.det(v) < 0:
        v[:, -1] *= -1
        s[-1] *= -1
    return u, s, v


def call_on_host(name: str, A):
    """`gk.svd3(A)` etc. from Python: the same conventions computed with NumPy (float64 inside)."""
    a = np.asarray(A)
    if a.dtype.kind != "f" or a.ndim != 2 or a.shape not in _FORMS[name]:
        want = " or ".join(f"{r}x{c}" for r, c in _FORMS[name])
        raise TypeError(f"{name}(): needs a {want} float matrix, got an array of shape {a.shape} and dtype "
                        f"{a.dtype}")
    dt, a = a.dtype, a.astype(np.float64)
    if name in ("svd3", "svd2"):
        out = _host_svd(a)
    elif name == "polar_decompose":
        u, s, v = _host_svd(a)
        r = u @ v.T
        p = r.T @ a
        out = (r, (p + p.T) / 2)
    elif name == "eig3":
        d, q = np.linalg.eigh((a + a.T) / 2)
        if np.linalg.det(q) < 0:
            q[:, -1] *= -1
        out = (q, d)
    else:
        q, r = np.linalg.qr(a)
        sg = np.where(np.diag(r) < 0, -1.0, 1.0)
        q, r = q * sg, r * sg[:, None]
        if np.linalg.det(q) < 0:
            q[:, -1] *= -1
            r[-1] *= -1
        out = (q, r)
    return tuple(np.asarray(x, dtype=dt) for x in out)


for _name, _doc in DOCS.items():
    LangFunction(_name, "library", doc=_doc, host=partial(call_on_host, _name),
                 resolve=partial(resolve, _name), outputs=OUTPUTS[_name]).define()
