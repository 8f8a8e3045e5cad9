"""gradkit kernels of the benchmark workloads W1-W5 (the float64 references live in reference.py)."""

from __future__ import annotations

import gradkit as gk
from reference import ref_w1, ref_w3, ref_w4  # noqa: F401  (re-exported for older scripts)


@gk.kernel
def w1_stream(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = gk.sin(v) * v + 0.5 * v * v


@gk.kernel
def w2_reduce(x: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


@gk.kernel
def w3_nbody(x: gk.array(dtype=gk.vec2), U: gk.array(dtype=float)):
    i = gk.tid()
    xi = x[i]
    acc = 0.0
    for j in range(x.shape[0]):
        d = xi - x[j]
        acc += -1.0 / gk.sqrt(gk.dot(d, d) + 1.0e-3)
    gk.atomic_add(U, 0, acc)


@gk.kernel
def w4_heat(u: gk.array(dtype=float, ndim=2), out: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i == 0 or j == 0 or i == n - 1 or j == m - 1:
        out[i, j] = u[i, j]
    else:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + 0.2 * lap


@gk.kernel
def w4_loss(u: gk.array(dtype=float, ndim=2), loss: gk.array(dtype=float)):
    i, j = gk.tid()
    gk.atomic_add(loss, 0, u[i, j] * u[i, j])


@gk.kernel
def w5_tiny(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


# Floors: the cheapest kernels that move a workload's bytes (gradkit only). A row's best possible time on
# this machine, whatever computes it: a peer within 1.5x of its floor cannot be beaten by 1.5x.
@gk.kernel
def floor_copy(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i]


@gk.kernel
def floor_accumulate(x: gk.array(dtype=float), g: gk.array(dtype=float)):
    i = gk.tid()
    g[i] += x[i]


@gk.kernel
def floor_accumulate_2d(src: gk.array(dtype=float, ndim=2), dst: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    dst[i, j] += src[i, j]


@gk.kernel
def floor_copy_2d(src: gk.array(dtype=float, ndim=2), dst: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    dst[i, j] = src[i, j]
