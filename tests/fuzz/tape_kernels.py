"""The tape fuzzer's kernel library (tests/fuzz/tape_programs.py): fixed float64 `@gk.kernel` templates, each
with how it writes its output and which parameters its adjoint reads, JIT-compiled once per device."""

from __future__ import annotations

import dataclasses

import gradkit as gk

F64 = gk.array(dtype=gk.float64)

# --------------------------------------------------------------------------- the kernel library


@gk.kernel
def assign_scaled(x: F64, k: F64, y: F64):
    i = gk.tid()
    y[i] = -k[0] * x[i]


@gk.kernel
def integrate(x: F64, f: F64, dt: gk.float64, xo: F64):
    i = gk.tid()
    xo[i] = x[i] + dt * f[i]


@gk.kernel
def accumulate(x: F64, c: gk.float64, y: F64):
    i = gk.tid()
    y[i] += c * x[i]


@gk.kernel
def accum_sin(x: F64, y: F64):
    i = gk.tid()
    y[i] += gk.sin(x[i])


@gk.kernel
def sub_scaled(x: F64, k: F64, y: F64):
    i = gk.tid()
    y[i] -= k[0] * x[i]


@gk.kernel
def square(x: F64, y: F64):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def sin_of(x: F64, y: F64):
    i = gk.tid()
    y[i] = gk.sin(x[i])


@gk.kernel
def mul(a: F64, b: F64, y: F64):
    i = gk.tid()
    y[i] = a[i] * b[i]


@gk.kernel
def tanh_mix(x: F64, y: F64, z: F64):
    i = gk.tid()
    z[i] = gk.tanh(x[i]) + gk.float64(0.5) * y[i]


@gk.kernel
def exp_decay(x: F64, k: F64, y: F64):
    i = gk.tid()
    y[i] = x[i] * gk.exp(-k[0])


@gk.kernel
def overwrite_const(v: gk.float64, y: F64):
    i = gk.tid()
    y[i] = v


@gk.kernel
def put(a: F64, y: F64):
    i = gk.tid()
    y[i] = a[0]


@gk.kernel
def guarded_overwrite(x: F64, y: F64):
    i = gk.tid()
    if i % 2 == 0:
        y[i] = gk.float64(2.0) * x[i]


@gk.kernel
def guarded_square(x: F64, y: F64):
    i = gk.tid()
    if i % 2 == 1:
        y[i] = x[i] * x[i]


@gk.kernel
def stencil_read(x: F64, y: F64):
    i = gk.tid()
    n = len(x)
    y[i] = x[gk.max(i - 1, 0)] - gk.float64(2.0) * x[i] + x[gk.min(i + 1, n - 1)]


@gk.kernel
def stencil_guarded(x: F64, y: F64):
    i = gk.tid()
    v = x[i] * x[i]
    if i > 0:
        v = v + x[i - 1] * x[i]
    if i + 1 < len(x):
        v = v + gk.float64(0.5) * x[i + 1]
    y[i] = v


@gk.kernel
def shift_read(x: F64, y: F64):
    i = gk.tid()
    y[i] = x[(i + 1) % len(x)]


@gk.kernel
def atomic_shared(x: F64, s: F64):
    i = gk.tid()
    gk.atomic_add(s, 0, x[i] * x[i])


@gk.kernel
def atomic_half(x: F64, y: F64):
    i = gk.tid()
    y[i // 2] += x[i]


@gk.kernel
def read_and_add_into_other(x: F64, y: F64, z: F64):
    i = gk.tid()
    z[i] += x[i] * y[i]


@gk.kernel
def inplace_axpy(x: F64, c: gk.float64, y: F64):
    i = gk.tid()
    y[i] = y[i] + c * x[i]


@gk.kernel
def inplace_scale(k: F64, y: F64):
    i = gk.tid()
    y[i] = y[i] * k[0]


@gk.kernel
def loss_term(x: F64, w: F64, l: F64):
    i = gk.tid()
    gk.atomic_add(l, 0, w[i] * x[i])


@dataclasses.dataclass(frozen=True)
class Template:
    """A library kernel as the generator sees it. `args`: one letter per parameter, in order: `v` a
    vector read (n elements), `s` a one-element array read (`k[0]`), `f` a float64 scalar, `o` the
    written array. `write`: how it writes `o` — "over" (every launched element), "partial" (a guarded
    store: only some), "add" (`+=`/atomic at the thread's element), "inplace" (`y[i] = f(y[i], ...)`),
    "shared" (atomics into `o[0]`, o a one-element array), "scatter" (`o[i // 2] +=`). `needs`: the
    parameters whose values the adjoint reads (for the hazard model). `elementwise`: thread i reads only
    element i, so an output may alias an input."""
    kernel: object
    args: str
    write: str
    needs: tuple = ()
    elementwise: bool = True


def _t(kernel, args, write, needs=(), elementwise=True):
    return Template(kernel, args, write, tuple(needs), elementwise)


LIBRARY = {t.kernel.__name__: t for t in [
    _t(assign_scaled, "vso", "over", (0, 1)),
    _t(integrate, "vvfo", "over"),
    _t(accumulate, "vfo", "add"),
    _t(accum_sin, "vo", "add", (0,)),
    _t(sub_scaled, "vso", "add", (0, 1)),
    _t(square, "vo", "over", (0,)),
    _t(sin_of, "vo", "over", (0,)),
    _t(mul, "vvo", "over", (0, 1)),
    _t(tanh_mix, "vvo", "over", (0,)),
    _t(exp_decay, "vso", "over", (0, 1)),
    _t(overwrite_const, "fo", "over"),
    _t(put, "so", "over"),
    _t(guarded_overwrite, "vo", "partial"),
    _t(guarded_square, "vo", "partial", (0,)),
    _t(stencil_read, "vo", "over", (), False),
    _t(stencil_guarded, "vo", "over", (0,), False),
    _t(shift_read, "vo", "over", (), False),
    _t(atomic_shared, "vo", "shared", (0,), False),
    _t(atomic_half, "vo", "scatter", (), False),
    _t(read_and_add_into_other, "vvo", "add", (0, 1)),
    _t(inplace_axpy, "vfo", "inplace"),
    _t(inplace_scale, "so", "inplace", (0, 1)),        # needs its own output's old value (index 1 = o)
]}
KERNELS = {**{name: t.kernel for name, t in LIBRARY.items()}, "loss_term": loss_term}
