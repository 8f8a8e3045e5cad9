"""`gk.optim`: SGD and Adam as gradkit kernels over parameter arrays (warp.optim's classes and PyTorch's
update rules), so a training loop runs on the parameters' own device. Every parameter is updated as its
flat array of scalars (a zero-copy view), whatever its element type (float32/float64 scalars, vectors,
matrices)."""

from __future__ import annotations

import functools

from ..core.types import array_type, float32, float64
from .views import alias


@functools.lru_cache(maxsize=None)
def _kernels(scalar):
    """(sgd, adam) step kernels for flat arrays of `scalar` (float32 or float64)."""
    from .kernel import kernel
    A = array_type(scalar, 1)

    def sgd_step(p: A, g: A, b: A, lr: scalar, weight_decay: scalar, momentum: scalar, dampening: scalar,
                 nesterov: int, t: int):
        i = gk_tid()
        d = g[i] + weight_decay * p[i]
        if momentum != 0.0:
            if t == 0:
                b[i] = d
            else:
                b[i] = momentum * b[i] + (1.0 - dampening) * d
            if nesterov != 0:
                d = d + momentum * b[i]
            else:
                d = b[i]
        p[i] = p[i] - lr * d

    def adam_step(p: A, g: A, m: A, v: A, lr: scalar, beta1: scalar, beta2: scalar, eps: scalar,
                  correction1: scalar, correction2: scalar):
        i = gk_tid()
        m[i] = beta1 * m[i] + (1.0 - beta1) * g[i]
        v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i]
        p[i] = p[i] - lr * (m[i] / correction1) / (gk_sqrt(v[i] / correction2) + eps)

    from ..core.lang import sqrt, tid
    kernels = kernel(sgd_step), kernel(adam_step)
    for k in kernels:       # the names the (string) annotations and bodies use, resolved when compiled
        k.pyfunc.__gk_enclosing__ = {"gk_tid": tid, "gk_sqrt": sqrt, "A": A, "scalar": scalar}
    return kernels


def _flat(a, what: str):
    """`a` as its flat array of float scalars (shared memory); TypeError naming `what` otherwise."""
    if not hasattr(a, "buffer") or not hasattr(a, "dtype"):
        raise TypeError(f"{what} must be a gk.array, got {type(a).__name__}")
    s = a.dtype.scalar
    if s not in (float32, float64):
        raise TypeError(f"{what} must hold float32 or float64 values, got {a.dtype.name}")
    return alias(a, (a.size * a.dtype.ncomp,), s)


class _Optimizer:
    def __init__(self, params):
        self.params = []
        if params is not None:
            self.set_params(params)

    def set_params(self, params) -> None:
        """The arrays to update (a list of gk.arrays); resets the optimizer's state."""
        self.params = list(params)
        self._flat = [_flat(p, f"params[{k}]") for k, p in enumerate(self.params)]
        self.reset_internal_state()

    def _grads(self, grad) -> list:
        grads = list(grad)
        if len(grads) != len(self.params):
            raise ValueError(f"step(grad) needs one gradient per parameter ({len(self.params)}), got {len(grads)}")
        out = []
        for k, (g, p) in enumerate(zip(grads, self.params)):
            gf = _flat(g, f"grad[{k}]")
            if gf.shape != (p.size * p.dtype.ncomp,) or g.dtype.scalar is not p.dtype.scalar or g.device is not p.device:
                raise ValueError(f"grad[{k}] must match params[{k}] ({p.dtype.name}{list(p.shape)} on {p.device.name}), "
                                 f"got {g.dtype.name}{list(g.shape)} on {g.device.name}")
            out.append(gf)
        return out


class SGD(_Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, weight decay and Nesterov momentum
    (PyTorch's rule, as warp.optim.SGD): `opt.step(grads)` updates the parameters in place."""

    def __init__(self, params=None, lr: float = 0.001, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        super().__init__(params)

    def reset_internal_state(self) -> None:
        from .creation import zeros_like
        self.b = [zeros_like(p, requires_grad=False) for p in self._flat]
        self.t = 0

    def step(self, grad) -> None:
        from .launch import launch
        for p, g, b in zip(self._flat, self._grads(grad), self.b):
            sgd, _ = _kernels(p.dtype)
            launch(sgd, p.size, inputs=[p, g, b, self.lr, self.weight_decay, self.momentum, self.dampening,
                                        int(bool(self.nesterov)), self.t], device=p.device, record_tape=False)
        self.t += 1


class Adam(_Optimizer):
    """Adam with bias correction (Kingma and Ba; warp.optim.Adam): `opt.step(grads)` updates in place."""

    def __init__(self, params=None, lr: float = 0.001, betas=(0.9, 0.999), eps: float = 1e-08):
        self.lr, self.betas, self.eps = lr, tuple(betas), eps
        super().__init__(params)

    def reset_internal_state(self) -> None:
        from .creation import zeros_like
        self.m = [zeros_like(p, requires_grad=False) for p in self._flat]
        self.v = [zeros_like(p, requires_grad=False) for p in self._flat]
        self.t = 0

    def step(self, grad) -> None:
        from .launch import launch
        self.t += 1
        b1, b2 = self.betas
        for p, g, m, v in zip(self._flat, self._grads(grad), self.m, self.v):
            _, adam = _kernels(p.dtype)
            launch(adam, p.size, inputs=[p, g, m, v, self.lr, b1, b2, self.eps, 1.0 - b1 ** self.t,
                                         1.0 - b2 ** self.t], device=p.device, record_tape=False)
