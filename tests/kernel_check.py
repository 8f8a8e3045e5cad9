"""`check`: one kernel launched forward, under a gk.Tape and under gk.ForwardMode on a device, its outputs
against a float64 NumPy reference and its derivatives against central differences of that reference
(shared by the language tests that need more than tests/lang's fixed argument specs)."""

from __future__ import annotations

import numpy as np

import gradkit as gk

EPS = 1e-6


def _np(dtype):
    return np.float32 if dtype.scalar is gk.float32 else np.float64


def _tols(dtypes):
    f32 = any(d is not None and d.scalar is gk.float32 for d in dtypes)
    return (dict(rtol=2e-5, atol=2e-5), dict(rtol=2e-3, atol=2e-3)) if f32 else \
        (dict(rtol=1e-10, atol=1e-12), dict(rtol=1e-5, atol=1e-6))


def check(kernel, dim, vals, dtypes, roles, ref, device, rng, modes=("forward", "reverse", "fwdmode")):
    """vals[k] is an array of dtypes[k] (role 'i' input, 'o' output updated in place, 'w' output whose
    initial contents are not differentiated: fully overwritten, Warp keeps its seed) or a Python int
    (role 's'); ref(*vals) gives the outputs' final contents (float64). Checks values, the gradients of
    Σ w·outputs with respect to the 'i' and 'o' arrays ('o': its initial contents) and J·v for them."""
    vals = [np.asarray(v).astype(_np(d)).astype(np.float64) if d is not None else v for v, d in zip(vals, dtypes)]
    outs = [k for k, r in enumerate(roles) if r in "ow"]
    arrs_k = [k for k, r in enumerate(roles) if r in "io"]
    tol, gtol = _tols(dtypes)

    def dev(k, data=None, grad=False):
        return gk.array((vals[k] if data is None else data).astype(_np(dtypes[k])), dtype=dtypes[k],
                        device=device, requires_grad=grad)

    def launch(arrs):
        gk.launch(kernel, dim, inputs=arrs, device=device)

    def ref_outs(v):
        r = ref(*[x.copy() if isinstance(x, np.ndarray) else x for x in v])
        return r if isinstance(r, tuple) else (r,)

    want = ref_outs(vals)
    ws = {k: rng.normal(size=vals[k].shape) for k in outs}

    def loss(v):
        return sum(float(np.sum(ws[k] * o)) for k, o in zip(outs, ref_outs(v)))

    if "forward" in modes:
        arrs = [dev(k) if r != "s" else vals[k] for k, r in enumerate(roles)]
        launch(arrs)
        for k, w in zip(outs, want):
            np.testing.assert_allclose(arrs[k].numpy(), w, err_msg=f"output {k} on {device}", **tol)
    if "reverse" in modes:
        arrs = [dev(k, grad=True) if r != "s" else vals[k] for k, r in enumerate(roles)]
        tape = gk.Tape()
        with tape:
            launch(arrs)
        tape.backward(grads={arrs[k]: dev(k, ws[k]) for k in outs})
        for k in arrs_k:
            fd = np.zeros_like(vals[k])
            for idx in np.ndindex(vals[k].shape):
                hi, lo = list(vals), list(vals)
                hi[k], lo[k] = vals[k].copy(), vals[k].copy()
                hi[k][idx] += EPS
                lo[k][idx] -= EPS
                fd[idx] = (loss(hi) - loss(lo)) / (2 * EPS)
            np.testing.assert_allclose(arrs[k].grad.numpy(), fd, err_msg=f"gradient of {k} on {device}", **gtol)
    if "fwdmode" in modes:
        dirs = {k: rng.normal(size=vals[k].shape) for k in arrs_k}
        arrs = [dev(k) if r != "s" else vals[k] for k, r in enumerate(roles)]
        with gk.ForwardMode(seeds={arrs[k]: dev(k, d) for k, d in dirs.items()}):
            launch(arrs)
            duals = {k: arrs[k].dual.numpy().copy() for k in outs}   # a view: zeroed on exit
        shift = [[v + s * EPS * dirs[k] if k in dirs else v for k, v in enumerate(vals)] for s in (1, -1)]
        plus, minus = ref_outs(shift[0]), ref_outs(shift[1])
        for j, k in enumerate(outs):
            np.testing.assert_allclose(duals[k], (plus[j] - minus[j]) / (2 * EPS), err_msg=f"tangent of {k}",
                                       **gtol)
