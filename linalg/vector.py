"""Vector kernels of gk.linalg's solvers, one set per (block size, scalar): dot products as a two-stage
reduction (per-chunk partial sums, then one thread summing them: the same order, so the same result, on
every device), linear combinations with host scalars, and CG's updates whose coefficients are read from
one-element device arrays (so an unrolled CG recorded on a tape differentiates through them)."""

from __future__ import annotations

import functools
import math

import numpy as np

import gradkit as gk

from ..sparse.kernels import block_funcs, block_types


@functools.lru_cache(maxsize=None)
def kernels(bs: int, scalar) -> dict:
    _, V = block_types(bs, scalar)
    S = gk.array(dtype=scalar)
    A = gk.array(dtype=V)

    funcs = block_funcs(bs, scalar)
    vdot, ratio = funcs.vdot, funcs.ratio

    @gk.kernel
    def dot_partial(a: A, b: A, chunk: int, partial: S):
        c = gk.tid()
        lo = c * chunk
        hi = gk.min(lo + chunk, a.shape[0])
        s = scalar(0.0)
        for i in range(lo, hi):
            s = s + vdot(a[i], b[i])
        partial[c] = s

    @gk.kernel
    def dot_finish(partial: S, slot: int, out: S):
        s = scalar(0.0)
        for c in range(partial.shape[0]):
            s = s + partial[c]
        out[slot] = s

    @gk.kernel
    def axpby(alpha: scalar, x: A, beta: scalar, y: A, out: A):
        i = gk.tid()
        out[i] = alpha * x[i] + beta * y[i]

    @gk.kernel
    def lincomb3(alpha: scalar, x: A, beta: scalar, y: A, gamma: scalar, z: A, out: A):
        i = gk.tid()
        out[i] = alpha * x[i] + beta * y[i] + gamma * z[i]

    @gk.kernel
    def cg_update(x: A, r: A, p: A, ap: A, rz: S, pap: S, x_out: A, r_out: A):
        i = gk.tid()
        a = ratio(rz[0], pap[0])
        x_out[i] = x[i] + a * p[i]
        r_out[i] = r[i] - a * ap[i]

    @gk.kernel
    def cg_direction(z: A, p: A, rz_new: S, rz: S, p_out: A):
        i = gk.tid()
        p_out[i] = z[i] + ratio(rz_new[0], rz[0]) * p[i]

    return dict(dot_partial=dot_partial, dot_finish=dot_finish, axpby=axpby, lincomb3=lincomb3,
                cg_update=cg_update, cg_direction=cg_direction)


class Vectors:
    """The vector operations of one solve: kernels for (bs, scalar) on `device`, launched recorded on the
    tape or not (`record`), and new arrays from `new()`."""

    def __init__(self, n: int, bs: int, scalar, device, record: bool):
        self.n, self.bs, self.scalar, self.device, self.record = n, bs, scalar, device, record
        self.V = block_types(bs, scalar)[1]
        self.k = kernels(bs, scalar)
        self.parts = max(1, min(1024, math.isqrt(max(n, 1))))
        self.chunk = -(-max(n, 1) // self.parts)
        self.parts = -(-max(n, 1) // self.chunk)
        self._partial = gk.zeros(self.parts, dtype=scalar, device=device)
        self._host = gk.zeros(1, dtype=scalar, device=device)

    def launch(self, name: str, dim: int, inputs, outputs=(), record: bool | None = None) -> None:
        record = self.record if record is None else record
        gk.launch(self.k[name], dim, inputs=inputs, outputs=outputs, device=self.device, record_tape=record)

    def new(self, grad: bool = False) -> gk.array:
        return gk.zeros(self.n, dtype=self.V, device=self.device, requires_grad=grad)

    def scalar_array(self, grad: bool = False) -> gk.array:
        return gk.zeros(1, dtype=self.scalar, device=self.device, requires_grad=grad)

    def dot_into(self, a: gk.array, b: gk.array, out: gk.array, slot: int = 0, record: bool | None = None) -> None:
        """out[slot] = <a, b> on the device. Recorded, each dot gets its own partial-sum array."""
        record = self.record if record is None else record
        partial = (gk.zeros(self.parts, dtype=self.scalar, device=self.device, requires_grad=out.requires_grad)
                   if record else self._partial)
        if self.n:
            self.launch("dot_partial", self.parts, [a, b, self.chunk], [partial], record)
        else:
            partial.zero_()
        self.launch("dot_finish", 1, [partial, slot], [out], record)

    def dot(self, a: gk.array, b: gk.array) -> float:
        """<a, b> read back to the host (never recorded)."""
        self.dot_into(a, b, self._host, record=False)
        return float(self._host.numpy()[0])

    def norm(self, a: gk.array) -> float:
        return math.sqrt(max(self.dot(a, a), 0.0))

    def axpby(self, alpha: float, x: gk.array, beta: float, y: gk.array, out: gk.array) -> gk.array:
        """out = alpha x + beta y (out may be x or y: elementwise)."""
        if self.n:
            self.launch("axpby", self.n, [alpha, x, beta, y], [out])
        return out

    def lincomb3(self, alpha, x, beta, y, gamma, z, out) -> gk.array:
        if self.n:
            self.launch("lincomb3", self.n, [alpha, x, beta, y, gamma, z], [out])
        return out

    def copy(self, src: gk.array, out: gk.array) -> gk.array:
        return self.axpby(1.0, src, 0.0, src, out)


def as_host(v) -> np.ndarray:
    return np.asarray(v.numpy(), dtype=np.float64)
