"""`gk.autograd`: Jacobians of a kernel launch (reverse mode, forward mode, central differences) and
gradient checks that compare them. These drive whole launches, so they live beside `launch` in runtime/."""

from __future__ import annotations

import numpy as np

from ..core.errors import GradientCheckError


def _float_array(a) -> bool:
    return hasattr(a, "buffer") and a.dtype.scalar.is_float


def _split(inputs, outputs):
    ins = [k for k, a in enumerate(inputs) if _float_array(a)]
    outs = [k for k, a in enumerate(outputs) if _float_array(a)]
    return ins, outs


def _copy(a):
    return a.copy()


def _flat(a) -> np.ndarray:
    return np.array(a._read(), dtype=np.float64).reshape(-1)   # a copy: .numpy() may be a live view


def _like(a, values: np.ndarray):
    from .array import array
    return array(values.reshape(a.numpy().shape).astype(a.numpy().dtype), dtype=a.dtype, device=a.device)


def jacobian(kernel, dim, inputs, outputs, device=None) -> dict:
    """Reverse-mode Jacobians: {(out_idx, in_idx): (out.size*ncomp, in.size*ncomp) array}, one adjoint launch per row."""
    from .creation import zeros_like
    from .launch import launch
    inputs, outputs = list(inputs), list(outputs)
    ins, outs = _split(inputs, outputs)
    result = {}
    for o in outs:
        n_rows = _flat(outputs[o]).size
        blocks = {i: np.zeros((n_rows, _flat(inputs[i]).size)) for i in ins}
        for row in range(n_rows):
            adj_in = [zeros_like(a) if _float_array(a) else None for a in inputs]
            adj_out = [zeros_like(a) if _float_array(a) else None for a in outputs]
            seed = np.zeros(n_rows)
            seed[row] = 1.0
            adj_out[o] = _like(outputs[o], seed)
            launch(kernel, dim, inputs, outputs, device=device, adjoint=True, adj_inputs=adj_in, adj_outputs=adj_out,
                   record_tape=False)
            for i in ins:
                blocks[i][row] = _flat(adj_in[i])
        for i in ins:
            result[(o, i)] = blocks[i]
    return result


def _run_forward(kernel, dim, inputs, outputs, originals, device):
    from .launch import launch
    for out, orig in zip(outputs, originals):
        if orig is not None:
            out.assign(orig.numpy())
    launch(kernel, dim, inputs, outputs, device=device, record_tape=False)


def jacobian_fd(kernel, dim, inputs, outputs, eps: float = 1e-4, device=None) -> dict:
    """Central-difference Jacobians (outputs are restored before every launch, so accumulating kernels work)."""
    inputs, outputs = list(inputs), list(outputs)
    ins, outs = _split(inputs, outputs)
    originals = [_copy(a) if hasattr(a, "buffer") else None for a in outputs]
    saved_in = {i: inputs[i].numpy().copy() for i in ins}
    result = {(o, i): np.zeros((_flat(outputs[o]).size, _flat(inputs[i]).size)) for o in outs for i in ins}
    try:
        for i in ins:
            base = saved_in[i].reshape(-1).astype(np.float64)
            for col in range(base.size):
                cols = []
                for sign in (1.0, -1.0):
                    x = base.copy()
                    x[col] += sign * eps
                    inputs[i].assign(x.reshape(saved_in[i].shape).astype(saved_in[i].dtype))
                    _run_forward(kernel, dim, inputs, outputs, originals, device)
                    cols.append({o: _flat(outputs[o]) for o in outs})
                for o in outs:
                    result[(o, i)][:, col] = (cols[0][o] - cols[1][o]) / (2 * eps)
                inputs[i].assign(saved_in[i])
    finally:
        for i in ins:
            inputs[i].assign(saved_in[i])
        _run_forward(kernel, dim, inputs, outputs, originals, device)
    return result


def jacobian_fwd(kernel, dim, inputs, outputs, device=None) -> dict:
    """Forward-mode Jacobians, one tangent launch per input column."""
    from .creation import zeros_like
    from .launch import launch
    inputs, outputs = list(inputs), list(outputs)
    ins, outs = _split(inputs, outputs)
    originals = [_copy(a) if hasattr(a, "buffer") else None for a in outputs]
    saved_duals = {id(a): a.dual for a in [*inputs, *outputs] if hasattr(a, "buffer")}
    result = {(o, i): np.zeros((_flat(outputs[o]).size, _flat(inputs[i]).size)) for o in outs for i in ins}
    try:
        for a in [*inputs, *outputs]:
            if _float_array(a):
                a._set_dual(zeros_like(a, requires_grad=False))
        for i in ins:
            n = _flat(inputs[i]).size
            for col in range(n):
                for a in [*inputs, *outputs]:
                    if _float_array(a):
                        a.dual.zero_()
                seed = np.zeros(n)
                seed[col] = 1.0
                inputs[i].dual.assign(seed.reshape(inputs[i].numpy().shape).astype(inputs[i].numpy().dtype))
                for out, orig in zip(outputs, originals):
                    if orig is not None:
                        out.assign(orig.numpy())
                launch(kernel, dim, inputs, outputs, device=device, tangent=True, record_tape=False)
                for o in outs:
                    result[(o, i)][:, col] = _flat(outputs[o].dual)
    finally:
        for a in [*inputs, *outputs]:
            if hasattr(a, "buffer"):
                a._set_dual(saved_duals[id(a)])
        for out, orig in zip(outputs, originals):
            if orig is not None:
                out.assign(orig.numpy())
    return result


def _table(kernel, worst) -> str:
    lines = [f"gradient check failed for kernel '{kernel.key}' (worst entries):",
             f"{'output':>8} {'input':>6} {'row':>6} {'col':>6} {'analytic':>14} {'numeric':>14} {'abs err':>11}"]
    for err, o, i, r, c, a, n in worst:
        lines.append(f"{o:>8} {i:>6} {r:>6} {c:>6} {a:>14.6g} {n:>14.6g} {err:>11.3g}")
    return "\n".join(lines)


def mismatches(analytic: np.ndarray, numeric: np.ndarray, atol: float, rtol: float):
    """(|analytic - numeric|, failing entries): |a - n| > atol + rtol*|n|, and every NaN/Inf on either side
    (a plain comparison is False for NaN, which would let a NaN gradient pass)."""
    with np.errstate(invalid="ignore"):
        err = np.abs(analytic - numeric)
        bad = ~(err <= atol + rtol * np.abs(numeric))
    bad |= ~np.isfinite(analytic) | ~np.isfinite(numeric)
    return err, bad


def gradcheck(kernel, dim, inputs, outputs, eps: float = 1e-4, atol: float = 1e-3, rtol: float = 1e-2,
              raise_exception: bool = True, device=None, show_worst: int = 10) -> bool:
    """Compare reverse-mode and central-difference Jacobians; True when |a - n| <= atol + rtol*|n| everywhere."""
    analytic = jacobian(kernel, dim, inputs, outputs, device=device)
    numeric = jacobian_fd(kernel, dim, inputs, outputs, eps=eps, device=device)
    worst = []
    ok = True
    names = [n for n, _ in kernel.params]
    n_in = len(list(inputs))
    for (o, i), a in analytic.items():
        err, bad = mismatches(a, numeric[(o, i)], atol, rtol)
        n = numeric[(o, i)]
        if bad.any():
            ok = False
            for r, c in zip(*np.nonzero(bad)):
                worst.append((float(err[r, c]), names[n_in + o], names[i], int(r), int(c), float(a[r, c]),
                              float(n[r, c])))
    if not ok:
        worst.sort(reverse=True)
        message = _table(kernel, worst[:show_worst])
        if raise_exception:
            raise GradientCheckError(message)
    return ok


def gradcheck_tape(tape, eps: float = 1e-4, atol: float = 1e-3, rtol: float = 1e-2, raise_exception: bool = True) -> bool:
    """`gradcheck` on every launch recorded on `tape` (with the arrays' current values)."""
    ok = True
    for rec in tape.launches:
        ok &= gradcheck(rec.kernel_obj, rec.dim, rec.inputs, rec.outputs, eps=eps, atol=atol, rtol=rtol,
                        raise_exception=raise_exception, device=rec.device)
    return ok
