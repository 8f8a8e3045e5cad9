"""The decompositions' test machinery: float64 NumPy references with Warp's sign and order conventions,
one kernel per decomposition and precision, well-conditioned random inputs, a launcher for the three
modes and central-difference VJPs/JVPs (tests/ad/test_decompositions*.py)."""

from __future__ import annotations

import numpy as np

import gradkit as gk
from gradkit.conformance.references import np_polar, np_qr, np_svd  # noqa: F401  (used here and re-exported)

# --------------------------------------------------------------------------- float64 references

D3, D2 = np.diag([1.0, 2.0, 3.0]), np.diag([1.0, 2.0])


def _batch(fn, a):
    outs = [fn(m) for m in a]
    return [np.stack([o[k] for o in outs]) for k in range(len(outs[0]))]


def ref_svd(a):
    """Outputs independent of the sign a pair of singular vectors shares: sigma, U D Vᵀ, U D Uᵀ, V D Vᵀ."""
    def one(m):
        u, s, v = np_svd(m)
        d = D3 if len(m) == 3 else D2
        return s, u @ d @ v.T, u @ d @ u.T, v @ d @ v.T
    return _batch(one, a)


def ref_eig(a):
    def one(m):
        d, q = np.linalg.eigh((m + m.T) / 2)
        return d, q @ D3 @ q.T
    return _batch(one, a)


def ref_qr(a):
    return _batch(np_qr, a)


def ref_polar(a):
    return _batch(np_polar, a)


# --------------------------------------------------------------------------- kernels per precision

_KERNELS: dict = {}


def _two_factors(decompose, A):
    """A kernel writing the two factors `decompose` gives for each matrix of an array of type A."""
    @gk.kernel
    def two_factors(M: A, X: A, Y: A):
        i = gk.tid()
        x, y = decompose(M[i])
        X[i] = x
        Y[i] = y
    return two_factors


def kernels(dt):
    if dt in _KERNELS:
        return _KERNELS[dt]
    M3, V3, M2, V2 = gk.matrix((3, 3), dt), gk.vector(3, dt), gk.matrix((2, 2), dt), gk.vector(2, dt)
    A3, A2, AV3, AV2 = gk.array(dtype=M3), gk.array(dtype=M2), gk.array(dtype=V3), gk.array(dtype=V2)

    @gk.kernel
    def svd3_k(A: A3, s: AV3, X: A3, Y: A3, Z: A3):
        i = gk.tid()
        U, sg, V = gk.svd3(A[i])
        D = M3(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)
        s[i] = sg
        X[i] = U @ D @ gk.transpose(V)
        Y[i] = U @ D @ gk.transpose(U)
        Z[i] = V @ D @ gk.transpose(V)

    @gk.kernel
    def svd3_out_k(A: A3, s: AV3, X: A3, Y: A3, Z: A3):      # Warp's out-argument form
        i = gk.tid()
        U = M3()
        sg = V3()
        V = M3()
        gk.svd3(A[i], U, sg, V)
        D = M3(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)
        s[i] = sg
        X[i] = U @ D @ gk.transpose(V)
        Y[i] = U @ D @ gk.transpose(U)
        Z[i] = V @ D @ gk.transpose(V)

    @gk.kernel
    def svd2_k(A: A2, s: AV2, X: A2, Y: A2, Z: A2):
        i = gk.tid()
        U, sg, V = gk.svd2(A[i])
        D = M2(1.0, 0.0, 0.0, 2.0)
        s[i] = sg
        X[i] = U @ D @ gk.transpose(V)
        Y[i] = U @ D @ gk.transpose(U)
        Z[i] = V @ D @ gk.transpose(V)

    @gk.kernel
    def eig3_k(A: A3, d: AV3, Y: A3):
        i = gk.tid()
        Q = M3()
        e = V3()
        gk.eig3(A[i], Q, e)
        d[i] = e
        Y[i] = Q @ M3(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0) @ gk.transpose(Q)

    qr3_k, polar3_k, polar2_k = (_two_factors(gk.qr3, A3), _two_factors(gk.polar_decompose, A3),
                                 _two_factors(gk.polar_decompose, A2))

    _KERNELS[dt] = {"svd3": (svd3_k, ref_svd, 3, 4), "svd3_out": (svd3_out_k, ref_svd, 3, 4),
                    "svd2": (svd2_k, ref_svd, 2, 4), "eig3": (eig3_k, ref_eig, 3, 2),
                    "qr3": (qr3_k, ref_qr, 3, 2), "polar3": (polar3_k, ref_polar, 3, 2),
                    "polar2": (polar2_k, ref_polar, 2, 2)}
    return _KERNELS[dt]


def _rotation(rng, n):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.linalg.det(q))


def well_conditioned(rng, name, count=3):
    """Random matrices whose singular values (eigenvalues for eig3) are well apart, some with det < 0."""
    n = 2 if name.endswith("2") else 3
    out = []
    for k in range(count):
        if name == "eig3":
            lam = np.array([-1.5, 0.3, 1.6]) + rng.uniform(-0.2, 0.2, 3)
            q = _rotation(rng, 3)
            skew = rng.normal(size=(3, 3)) * 0.3
            out.append(q @ np.diag(lam) @ q.T + skew - skew.T)      # eig3 uses the symmetric part
            continue
        sig = (np.array([2.6, 1.4, 0.6]) if n == 3 else np.array([2.0, 0.8]))[:n] + rng.uniform(-0.2, 0.2, n)
        if k % 2:
            sig[-1] = -sig[-1]
        out.append(_rotation(rng, n) @ np.diag(sig) @ _rotation(rng, n).T)
    return np.array(out)


def _arr(x, dt, device, **kw):
    npdt = np.float64 if dt is gk.float64 else np.float32
    n = x.shape[-1]
    t = gk.matrix((n, n), dt) if x.ndim == 3 else gk.vector(n, dt)
    return gk.array(np.asarray(x, dtype=npdt), dtype=t, device=device, **kw)


def run(name, a, dt, device, grads=None, tangent=None):
    """Launch decomposition kernel `name` on the matrices `a`; optionally a backward pass seeded with
    `grads` (returns A.grad) or a forward-mode pass along `tangent` (returns the output duals)."""
    kern, ref, n, nout = kernels(dt)[name]
    A = _arr(a, dt, device, requires_grad=grads is not None)
    shapes = [o.shape for o in ref(a)]
    outs = [_arr(np.zeros(s), dt, device, requires_grad=grads is not None) for s in shapes]
    if grads is not None:
        tape = gk.Tape()
        with tape:
            gk.launch(kern, len(a), inputs=[A, *outs], device=device)
        tape.backward(grads={o: _arr(g, dt, device) for o, g in zip(outs, grads)})
        return [o.numpy() for o in outs], A.grad.numpy()
    if tangent is not None:
        with gk.ForwardMode(seeds={A: _arr(tangent, dt, device)}):
            gk.launch(kern, len(a), inputs=[A, *outs], device=device)
        return [o.numpy() for o in outs], [o.dual.numpy() for o in outs]
    gk.launch(kern, len(a), inputs=[A, *outs], device=device)
    return [o.numpy() for o in outs], None


def fd_vjp(ref, a, ws, eps=1e-6):
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[idx] += eps
        lo[idx] -= eps
        g[idx] = sum(np.sum(w * (p - m)) for w, p, m in zip(ws, ref(hi), ref(lo))) / (2 * eps)
    return g


def fd_jvp(ref, a, v, eps=1e-6):
    return [(p - m) / (2 * eps) for p, m in zip(ref(a + eps * v), ref(a - eps * v))]


NAMES = ["svd3", "svd3_out", "svd2", "eig3", "qr3", "polar3", "polar2"]
PRECISION = {gk.float64: dict(val=1e-10, grad=1e-6), gk.float32: dict(val=2e-5, grad=2e-3)}


def _close(got, want, tol, what):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale, err_msg=what)
