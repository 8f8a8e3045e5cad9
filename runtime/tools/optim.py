"""`gk.optim`: SGD and Adam as gradkit kernels over parameter arrays (warp.optim's classes and PyTorch's
update rules), so a training loop runs on the parameters' own device. Every parameter is updated as its
flat array of scalars (a zero-copy view), whatever its element type (float32/float64 scalars, vectors,
matrices). Hyper-parameters are checked when the optimizer is made and at each step (a learning-rate
schedule may set `opt.lr`): a NaN, infinite or out-of-range value is a ValueError naming it, instead of
parameters that silently become NaN."""

from __future__ import annotations

import functools
import math
import numbers

from ...core.types import array_type, float32, float64
from ..arrays.views import alias
from ..state import process


@functools.lru_cache(maxsize=None)
def _kernels(scalar):
    """(sgd, adam) step kernels for flat arrays of `scalar` (float32 or float64)."""
    from ..launch.kernel import kernel
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

    from ...core.lang import sqrt, tid
    kernels = kernel(sgd_step), kernel(adam_step)
    for k in kernels:       # the names the (string) annotations and bodies use, resolved when compiled
        k.pyfunc.__gk_enclosing__ = {"gk_tid": tid, "gk_sqrt": sqrt, "A": A, "scalar": scalar}
    return kernels


def _hyper(owner: str, name: str, value, ok, rule: str) -> float:
    """`value` as a float when it is a finite real number for which `ok` holds (TypeError/ValueError naming
    `name` and the `rule` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number ({rule}), got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and ok(v)):
        raise ValueError(f"{owner}: {name} must be {rule}, got {value!r}")
    return v


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
        if process.capture is not None:              # `gradkit debug` leads with what the script trains
            process.capture.declare(self.params)
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
    (PyTorch's rule, as warp.optim.SGD): `opt.step(grads)` updates the parameters in place.

    Args:
        params: the arrays to train (a list of float gk.arrays); None to set them later with `set_params`.
        lr: the learning rate, finite and > 0.
        momentum: the momentum factor, in [0, 1); 0 is plain gradient descent.
        dampening: how much of each new gradient the momentum buffer takes, (1 - dampening), in [0, 1].
        weight_decay: an L2 penalty added to the gradient (weight_decay * p), >= 0.
        nesterov: use Nesterov momentum (needs momentum > 0 and dampening 0)."""

    def __init__(self, params=None, lr: float = 0.001, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        self._check()
        super().__init__(params)

    def _check(self) -> None:
        """The hyper-parameters are usable (PyTorch's checks, and finite): ValueError naming one otherwise."""
        self.lr = _hyper("SGD", "lr", self.lr, lambda v: v > 0, "finite and > 0")
        self.momentum = _hyper("SGD", "momentum", self.momentum, lambda v: 0 <= v < 1, "in [0, 1)")
        self.dampening = _hyper("SGD", "dampening", self.dampening, lambda v: 0 <= v <= 1, "in [0, 1]")
        self.weight_decay = _hyper("SGD", "weight_decay", self.weight_decay, lambda v: v >= 0,
                                   "finite and >= 0")
        if self.nesterov and (self.momentum == 0 or self.dampening != 0):
            raise ValueError("SGD: nesterov=True needs momentum > 0 and dampening=0 (as in PyTorch)")

    def reset_internal_state(self) -> None:
        from ..arrays.creation import zeros_like
        self.b = [zeros_like(p, requires_grad=False) for p in self._flat]
        self.t = 0

    def step(self, grad) -> None:
        """Update every parameter in place by one step (a kernel per parameter, on its device, not recorded on a tape).

        Args:
            grad: one gradient array per parameter, in the order of `params` (typically `[p.grad for p in params]`),
                each of its parameter's shape, dtype and device."""
        from ..launch.launch import launch
        self._check()
        for p, g, b in zip(self._flat, self._grads(grad), self.b):
            sgd, _ = _kernels(p.dtype)
            launch(sgd, p.size, inputs=[p, g, b, self.lr, self.weight_decay, self.momentum, self.dampening,
                                        int(bool(self.nesterov)), self.t], device=p.device, record_tape=False)
        self.t += 1


class Adam(_Optimizer):
    """Adam with bias correction (Kingma and Ba; warp.optim.Adam): `opt.step(grads)` updates in place.

    Args:
        params: the arrays to train (a list of float gk.arrays); None to set them later with `set_params`.
        lr: the learning rate, finite and > 0.
        betas: the decay rates (beta1, beta2) of the first and second moment estimates, each in [0, 1).
        eps: added to the square root of the second moment before dividing, > 0."""

    def __init__(self, params=None, lr: float = 0.001, betas=(0.9, 0.999), eps: float = 1e-08):
        self.lr, self.betas, self.eps = lr, betas, eps
        self._check()
        super().__init__(params)

    def _check(self) -> None:
        """The hyper-parameters are usable (finite; PyTorch's ranges, eps > 0): ValueError naming one
        otherwise."""
        self.lr = _hyper("Adam", "lr", self.lr, lambda v: v > 0, "finite and > 0")
        try:
            betas = tuple(self.betas)
        except TypeError:
            betas = ()
        if len(betas) != 2:
            raise ValueError(f"Adam: betas must be two numbers (beta1, beta2), got {self.betas!r}")
        self.betas = tuple(_hyper("Adam", f"betas[{k}]", b, lambda v: 0 <= v < 1, "in [0, 1)")
                           for k, b in enumerate(betas))
        self.eps = _hyper("Adam", "eps", self.eps, lambda v: v > 0, "finite and > 0")

    def reset_internal_state(self) -> None:
        from ..arrays.creation import zeros_like
        self.m = [zeros_like(p, requires_grad=False) for p in self._flat]
        self.v = [zeros_like(p, requires_grad=False) for p in self._flat]
        self.t = 0

    def step(self, grad) -> None:
        """Update every parameter in place by one step (a kernel per parameter, on its device, not recorded on a tape).

        Args:
            grad: one gradient array per parameter, in the order of `params` (typically `[p.grad for p in params]`),
                each of its parameter's shape, dtype and device."""
        from ..launch.launch import launch
        self._check()
        self.t += 1
        b1, b2 = self.betas
        for p, g, m, v in zip(self._flat, self._grads(grad), self.m, self.v):
            _, adam = _kernels(p.dtype)
            launch(adam, p.size, inputs=[p, g, m, v, self.lr, b1, b2, self.eps, 1.0 - b1 ** self.t,
                                         1.0 - b2 ** self.t], device=p.device, record_tape=False)
