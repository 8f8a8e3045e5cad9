"""`gk.ForwardMode`: inside the block every launch runs its tangent (JVP) kernel.

Seeds set `x.dual = v`; the first time any other array is touched its dual is
allocated (or zeroed), so afterwards `y.dual` holds J·v. A `Tape.backward`
inside the block runs tangent-of-adjoint kernels (forward-over-reverse), giving
Hessian-vector products in the `.grad.dual` arrays.
"""

from __future__ import annotations

from .state import current as state
from .views import family


class ForwardMode:
    """Context manager switching launches to tangent kernels with the given seeds (Taichi's `FwdMode`).

    `clear_gradients=True` zeroes the dual of every array the block touches before its first use there
    (False keeps existing duals, to accumulate tangents over several blocks); the seeds' duals are
    zeroed again on exit, so one direction does not leak into the next block."""

    def __init__(self, seeds: dict | None = None, clear_gradients: bool = True):
        self.seeds = dict(seeds or {})
        self.clear_gradients = bool(clear_gradients)
        self._touched: dict[int, object] = {}
        self._outer = None

    def __enter__(self) -> "ForwardMode":
        from .creation import zeros_like
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

    def dual_of(self, a):
        """`a.dual`, allocated (or zeroed, with clear_gradients) the first time this block touches `a`."""
        if id(a) not in self._touched:
            shared = a._family is not None and any(id(m) in self._touched for m in family(a))
            self._touched[id(a)] = a
            if shared:              # a view of an array this block already seeded or touched: same memory
                pass
            elif a.dual is None:
                from .creation import zeros_like
                a._set_dual(zeros_like(a, requires_grad=False))
            elif self.clear_gradients:
                a.dual.zero_()
        return a.dual
