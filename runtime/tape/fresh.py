"""Gradients known to be zero, written first by a storing adjoint instead of zero-filled (issue 43).

During a backward pass a gradient can be known zero without its memory being zero yet: a pool buffer taken
again (runtime/tape/grad_pool.py), or a gradient `tape.zero()` left to zero lazily
(runtime/arrays/grad_state.py `defer_zero`). Such a gradient is "fresh" at the record where the reverse
walk first reaches it: no adjoint before that one (in reverse order) has read or added into it — reading
it through `.grad` would have zeroed it, and a pool buffer is handed out right before its array's first
record in reverse order. If that record's adjoint has a storing form (ad/fresh_store.py: a gathering
stencil adjoint's gathered gradients, a plain adjoint's own-element adds) whose stored gradients are all
fresh, each passed once and of the launch grid's shape, it runs as `adjoint_gather_store` or
`adjoint_store`: every element is stored once, so neither the zero fill nor the adjoint's read of the
gradient happens. Every other fresh
gradient is zeroed right before the record runs. Nothing stays fresh past its record.
"""

from __future__ import annotations

from ...ad.uniform import NotUniform
from ..arrays.grad_state import ZERO


def zero_now(g) -> None:
    """Fill gradient array `g` with zeros (a new version), as grad_state.settle does."""
    if g._host is not None:
        g._host.fill(0)
    elif g.nbytes:
        g.device.impl.fill_zero(g.device.info, g.buffer, g.nbytes)
    g._bump()


def deferred_sources(prepared, fresh: list) -> None:
    """Move the gradients of `prepared`'s sources that are still zeroed lazily (and bound to `prepared` as
    they are) into `fresh` as (gradient, needs zeroing) pairs, without writing them."""
    grads = prepared.grads
    for a in prepared.sources:
        if getattr(a, "_gstate", None) == ZERO:
            g = a._grad
            if g is not None and any(x is g for x in grads):
                a._gstate = None
                if not any(x is g for x, _ in fresh):
                    fresh.append((g, True))


class Storing:
    """A tape's storing forms of its bound adjoints: id(prepared) -> (prepared, (storing prepared, positions
    in its arguments of the gradients it stores) or None). A storing form shares its adjoint's argument
    lists, so it holds no array the tape's reference count (runtime/tape/grad_pool.py) does not see;
    `prune` drops the forms of adjoints no record runs any more, which would."""

    def __init__(self) -> None:
        self.cache: dict[int, tuple] = {}

    def prune(self, records) -> None:
        """Keep only the forms of adjoints bound to `records` (or folded from one)."""
        if not self.cache:
            return
        live = set()
        for rec in records:
            p = getattr(rec, "prepared", None)
            while p is not None:
                live.add(id(p))
                folded = p.folded
                p = folded[1] if folded is not None else None
        self.cache = {k: v for k, v in self.cache.items() if k in live}

    def form(self, prepared, kernel):
        """(the storing PreparedAdjoint, positions in its arguments of the gradients it stores) for
        `prepared`, or None where its adjoint is not a plain or gathering one, the store pass found nothing
        to store, or a stored gradient is passed more than once or is not of the launch grid's shape."""
        entry = self.cache.get(id(prepared))
        if entry is not None and entry[0] is prepared:
            return entry[1]
        out = None
        spec = prepared.spec
        variant = spec.variant
        args = prepared.call_args
        plain = variant.adjoint and not (variant.store or variant.shared or variant.consume or variant.tangent)
        if plain and len(spec.fn.params) == len(args):
            try:
                stored_spec = kernel.specialization(spec.device, variant.storing)
            except NotUniform:        # a seeded form that does not fold: keep adding
                stored_spec = None
            stored = stored_spec.fn.attrs.get("stored") if stored_spec is not None else None
            # each stored gradient passed once, and of the launch grid's shape (every element has its thread)
            if stored and len(stored_spec.fn.params) == len(args) and \
                    all(sum(x is args[p] for x in args) == 1 and tuple(args[p].shape) == tuple(prepared.dims)
                        for p in stored):
                from ..launch.launch import PreparedAdjoint
                out = (PreparedAdjoint(prepared.key, stored_spec, prepared.dims, args, prepared.grads,
                                       prepared.sources), tuple(stored))
        self.cache[id(prepared)] = (prepared, out)
        return out

    def settle(self, prepared, kernel, fresh: list):
        """The adjoint to run for `prepared` given the `fresh` (gradient, needs zeroing) pairs at its record:
        its storing form when every gradient it stores is fresh. The fresh gradients it does not store are
        zeroed now (those that need it) and leave `fresh`; the stored ones stay, marked as needing zeroing,
        until the caller clears `fresh` after the run (a run that raises leaves them to be zeroed).
        `prepared` None: zero them all."""
        form = self.form(prepared, kernel) if prepared is not None else None
        keep = []
        if form is not None:
            args = prepared.call_args
            targets = [args[p] for p in form[1]]
            if all(any(t is g for g, _ in fresh) for t in targets):
                prepared = form[0]
                keep = [(t, True) for t in targets]
        for g, dirty in fresh:
            if dirty and not any(t is g for t, _ in keep):
                zero_now(g)
        fresh[:] = keep
        return prepared
