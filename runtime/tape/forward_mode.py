"""`gk.ForwardMode`: inside the block every launch runs its tangent (JVP) kernel.

Seeds set `x.dual = v`; the first time any other array is touched its dual is
allocated (or zeroed), so afterwards `y.dual` holds J·v. A `Tape.backward`
inside the block runs tangent-of-adjoint kernels (forward-over-reverse), giving
Hessian-vector products in the `.grad.dual` arrays.
"""

from __future__ import annotations

from ..state import current as state
from ..arrays.views import family, spread_part


class ForwardMode:
    """Context manager switching launches to tangent kernels with the given seeds (Taichi's `FwdMode`).

    `clear_gradients=True` zeroes the dual of every array the block touches before its first use there
    (False keeps existing duals, to accumulate tangents over several blocks); the seeds' duals are
    zeroed again on exit, so one direction does not leak into the next block.

    Args:
        seeds: {array: tangent}: each array's `.dual` is set to its tangent (an array, NumPy array, list or
            scalar of the array's shape; duals are allocated as needed); afterwards an output's `.dual` holds
            J·v.
        clear_gradients: zero the duals the block touches before their first use (see above).
        loss: Taichi's spelling: the output whose `.dual` is read afterwards (kept as `.loss`; it changes nothing).
        param: Taichi's spelling of a single seed: the input array (instead of `seeds`).
        seed: the tangent for `param` (default 1 for a one-element `param`)."""

    def __init__(self, seeds: dict | None = None, clear_gradients: bool = True, *, loss=None, param=None,
                 seed=None):
        """Taichi's spelling is taken too: `ForwardMode(loss=y, param=x, seed=[...])` seeds `x.dual` with
        `seed` (default 1 for a one-element `x`); `loss` names the output whose `.dual` is read after."""
        if param is not None:
            if seeds:
                raise TypeError("gk.ForwardMode takes seeds={x: v} or param=x (with seed=...), not both")
            seeds = {param: _taichi_seed(param, seed)}
        elif seed is not None:
            raise TypeError("gk.ForwardMode(seed=...) needs param=: the array the seed is the direction of")
        self.seeds = dict(seeds or {})
        self.loss = loss
        self.clear_gradients = bool(clear_gradients)
        self._touched: dict[int, object] = {}
        self._outer = None

    def __enter__(self) -> "ForwardMode":
        from ..arrays.creation import zeros_like
        for x, v in self.seeds.items():
            if x.dual is None:
                x._set_dual(zeros_like(x, requires_grad=False))
            x.dual.assign(v)
            self._touched[id(x)] = x
        self._outer, state.forward_mode = state.forward_mode, self
        return self

    def __exit__(self, *exc) -> None:
        state.forward_mode, self._outer = self._outer, None
        for x in self.seeds:
            x.dual.zero_()

    def adopt(self, a, dual) -> None:
        """Give `a` (a copy the tape saved) the tangent `dual`, as touched: it is not cleared on first use."""
        a._set_dual(dual)
        self._touched[id(a)] = a

    def dual_of(self, a):
        """`a.dual`, allocated (or zeroed, with clear_gradients) the first time this block touches `a`."""
        if id(a) not in self._touched:
            shared = a._family is not None and any(id(m) in self._touched for m in family(a))
            self._touched[id(a)] = a
            if shared:              # a view of an array this block already seeded or touched: same memory
                pass
            elif a.dual is None:
                from ..arrays.creation import zeros_like
                a._set_dual(zeros_like(a, requires_grad=False))
                spread_part(a, "_dual")          # the base and other views share it
            elif self.clear_gradients:
                a.dual.zero_()
        return a.dual


def _taichi_seed(param, seed):
    """The dual of `param` for Taichi's `FwdMode(param=x, seed=[...])`: one number per element."""
    import numpy as np
    shape = param.numpy().shape
    size = int(np.prod(shape))
    if seed is None:
        if size != 1:
            raise ValueError(f"gk.ForwardMode(param=...): the array has {size} elements, so seed= must give the "
                             f"direction (a list of {size} numbers); only a one-element array defaults to seed=[1.0]")
        seed = [1.0]
    values = np.asarray(seed, dtype=np.float64).reshape(-1)
    if values.size != size:
        raise ValueError(f"gk.ForwardMode(param=..., seed=...): seed has {values.size} numbers for an array of "
                         f"{size} elements")
    from ..arrays.array import array
    return array(values.reshape(shape).astype(param.numpy().dtype), dtype=param.dtype, device=param.device)
