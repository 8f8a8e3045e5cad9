"""Taichi's `gk.Tape(loss=l, grad_check=[x, ...])`: after the tape's backward pass, each listed array's
gradient is compared with central differences of the loss along a random direction, by replaying the
recorded launches from the state they started in; the arrays are then put back as they were."""

from __future__ import annotations

import numpy as np

from ...core.errors import GradientCheckError
from ..arrays.views import family


class GradCheck:
    """The arrays to check and the state every recorded launch argument had before its first launch."""

    def __init__(self, arrays, eps: float | None = None, rtol: float | None = None):
        self.arrays = list(arrays)
        for k, a in enumerate(self.arrays):
            if not hasattr(a, "buffer") or not a.dtype.scalar.is_float:
                raise TypeError(f"grad_check[{k}] must be a float gk.array, got {type(a).__name__}")
        self.eps, self.rtol = eps, rtol
        self.initial: dict[int, tuple] = {}        # id -> (array, copy before its first recorded launch)

    def before_launch(self, bound) -> None:
        for a in bound:
            if hasattr(a, "buffer") and id(a) not in self.initial:
                self.initial[id(a)] = (a, a._saved_copy())

    def run(self, tape, loss) -> None:
        if any(r.kind != "launch" for r in tape.records):
            raise ValueError("grad_check replays the tape's launches: it cannot check a tape that also recorded "
                             "host writes, checkpoints or record_func calls")
        final = {k: (a, a._saved_copy(), a.version) for k, (a, _) in self.initial.items()}
        try:
            for k, x in enumerate(self.arrays):
                self._check(tape, loss, x, f"grad_check[{k}]" + (f" ('{x.label}')" if x.label else ""))
        finally:
            for a, copy, version in final.values():
                _restore(a, copy, version)

    def _check(self, tape, loss, x, name: str) -> None:
        if x.grad is None or id(x) not in self.initial:
            raise ValueError(f"{name} is not an array the tape's launches used with requires_grad=True")
        f32 = x.dtype.scalar.np_dtype == np.float32
        x0 = np.asarray(self.initial[id(x)][1]._read(), dtype=np.float64)
        d = np.random.default_rng(len(self.arrays)).normal(size=x0.shape)
        eps = self.eps or (1e-3 if f32 else 1e-6) * max(1.0, float(np.abs(x0).max(initial=0.0)))
        analytic = float(np.sum(np.asarray(x.grad._read(), np.float64) * d))
        plus, minus = self._loss(tape, loss, x, x0 + eps * d), self._loss(tape, loss, x, x0 - eps * d)
        numeric = (plus - minus) / (2 * eps)
        rtol = self.rtol or (2e-2 if f32 else 1e-5)
        if not abs(analytic - numeric) <= rtol * max(abs(numeric), abs(analytic), 1e-6):
            raise GradientCheckError(f"gradient check of {name} failed: the gradient along a random direction is "
                                     f"{analytic:.8g}, central differences of the loss give {numeric:.8g} "
                                     f"(eps {eps:.3g}, relative tolerance {rtol:g})")

    def _loss(self, tape, loss, x, values) -> float:
        from ..launch.launch import launch
        for a, copy in self.initial.values():
            _restore(a, copy, a.version)
        x._write_host(values.astype(x.dtype.scalar.np_dtype).reshape(x._host_shape))
        for rec in tape.launches:
            launch(rec.kernel_obj, rec.dim, rec.inputs, rec.outputs, device=rec.device, record_tape=False)
        return float(np.asarray(loss._read(), np.float64).reshape(-1)[0])


def _restore(a, copy, version: int) -> None:
    """Put `copy`'s data back into `a` and leave the versions (its views' too) as they were: the data is
    what the tape recorded, so its check that recorded arrays are unchanged still holds."""
    if a.nbytes:
        a.device.impl.copy(a.device.info, a.buffer, copy.buffer, a.nbytes)
    for m in family(a):
        m.version = version
