"""Seeds as users write them: a constant gradient (`grads={y: gk.ones_like(y)}`, `loss=l`) folded into the
adjoints that read it, as `launch(..., adj_outputs=[1.0])` folds it (ad/uniform.py, issue 43).

The seeded `.grad` is still set to the seed, so every gradient a pass leaves is what it would be
unfolded; only adjoints that read that gradient while it still holds the constant (same version as when
set, nothing wrote it since) and do not write it themselves take the folded variant, skipping the read of
a whole gradient array. A seed array is checked for being constant once per version (one read; repeated
passes with the same seed cost nothing) and the `.grad` it set is not rewritten while it still holds it.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..launch.adjoint_args import is_seed

_CHUNK = 1 << 16           # elements compared at a time: the comparison's temporary stays in cache
_MAX_KNOWN = 4096          # a bound on what seeds made once and dropped leave behind
_known: dict[int, tuple] = {}   # id(array) -> (weak reference, version, bits): the array held that constant


def _bits(value: float) -> bytes:
    return np.float64(value).tobytes()


def constant_value(seed) -> float | None:
    """The one value every element of `seed` holds (a number, a gk.array or a NumPy array of float
    scalars), or None. A gk.array is read at most once per version unless a NumPy view of it is out."""
    if is_seed(seed):
        return float(seed)
    if hasattr(seed, "buffer"):
        dt = seed.dtype
        if not (dt.is_scalar and dt.is_float) or seed.size == 0:
            return None
        known = _known.get(id(seed))
        if known is not None and known[0]() is seed and known[1] == seed.version and not seed._exposed:
            return known[3]
        value = _scan(seed._read())
        if value is not None:
            _remember(seed, value)
        return value
    host = np.asarray(seed)
    return _scan(host) if host.dtype.kind == "f" and host.size else None


def _scan(host: np.ndarray) -> float | None:
    """The value all of `host` holds, compared bit for bit (-0.0 is not 0.0; one NaN pattern), else None."""
    flat = host.reshape(-1)
    bits = flat.view(np.uint32 if flat.dtype.itemsize == 4 else np.uint64 if flat.dtype.itemsize == 8 else
                     np.uint16)
    first = bits[0]
    for start in range(0, len(bits), _CHUNK):
        if not (bits[start:start + _CHUNK] == first).all():
            return None
    return float(flat[0])


def _remember(a, value: float) -> None:
    if len(_known) >= _MAX_KNOWN:
        _known.clear()
    try:
        _known[id(a)] = (weakref.ref(a), a.version, _bits(value), value)
    except TypeError:                # an array that takes no weak reference: not remembered
        pass


def holds(grad, value: float) -> bool:
    """Whether `grad` is known to hold `value` everywhere (it was set to it and not written since)."""
    known = _known.get(id(grad))
    return known is not None and known[0]() is grad and known[1] == grad.version and \
        known[2] == _bits(value) and not grad._exposed


class Folds:
    """The seeded gradients of one backward pass: which `.grad` arrays hold one constant, from which
    version on. An adjoint folds a constant while its gradient array is still at that version."""

    def __init__(self) -> None:
        self.grads: dict[int, tuple] = {}      # id(grad) -> (grad, version, value)
        self._last = None                      # (prepared, answer, ((grad, version), ...)): the last fold

    def set(self, grad, value: float) -> None:
        """Make `grad` hold `value` (unless it is known to already) and note it for folding."""
        if not holds(grad, value):
            grad.fill_(value)
            _remember(grad, value)
        self.grads[id(grad)] = (grad, grad.version, value)

    def drop_all(self) -> None:
        """Forget every constant (a Python record may have written any gradient)."""
        self.grads.clear()

    def fold(self, prepared, kernel):
        """A PreparedAdjoint like `prepared` (an adjoint of `kernel`) with its gradients that still hold a constant passed as that
        value, or None when none folds (runtime/launch/launch.py `PreparedAdjoint.seeded`)."""
        last = self._last
        if last is not None and last[0] is prepared:       # records sharing one binding, back to back
            for g, version in last[2]:
                if g.version != version:
                    break
            else:
                return last[1]
        grads = self.grads
        if grads.keys().isdisjoint(map(id, prepared.grads)):     # reads no seeded gradient (most records)
            self._last = (prepared, None, ())
            return None
        values, checks = [], []
        for m, g in enumerate(prepared.grads):
            entry = grads.get(id(g))
            if entry is not None and entry[0] is g:
                if entry[1] == g.version:
                    checks.append((g, g.version))     # the answer holds while these stay
                    values.append((m, entry[2]))
                else:
                    del grads[id(g)]     # written since it was seeded: an array for the rest of the pass
        answer = prepared.seeded(kernel, tuple(values)) if values else None
        self._last = (prepared, answer, tuple(checks))
        return answer


def check_seed_arguments(loss, grads) -> None:
    """`tape.backward`'s loss= and grads= are usable: a one-element loss with a gradient, gk.array keys, seeds
    of the keys' shapes (ValueError / TypeError naming what is wrong)."""
    if loss is not None:
        if getattr(loss, "grad", None) is None:
            raise ValueError("backward(loss=...): the loss array needs requires_grad=True")
        if loss.size != 1:
            raise ValueError(f"backward(loss=...): the loss must have one element, it has {loss.size}")
    for arr, seed in (grads or {}).items():
        if not hasattr(arr, "buffer"):
            raise TypeError(f"backward(grads=...): keys must be gk.arrays, got {type(arr).__name__}")
        if hasattr(seed, "buffer"):
            if seed.shape != arr.shape or seed.dtype.shape != arr.dtype.shape:
                raise ValueError(f"backward(grads=...): the gradient for an array of shape {arr.shape} "
                                 f"({arr.dtype.name}) has shape {seed.shape} ({seed.dtype.name})")
        else:
            shape = np.shape(seed)
            if shape and shape != arr._host_shape:
                raise ValueError(f"backward(grads=...): the gradient for an array of shape {arr.shape} "
                                 f"({arr.dtype.name}) has shape {shape}")
