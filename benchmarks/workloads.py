"""gradkit implementations of the benchmark workloads W1-W5, each with a float64 NumPy reference check."""

from __future__ import annotations

import numpy as np

import gradkit as gk


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


def ref_w1(x):
    x = x.astype(np.float64)
    return np.sin(x) * x + 0.5 * x * x, np.cos(x) * x + np.sin(x) + x


def ref_w3(x):
    x = x.astype(np.float64)
    d = x[:, None, :] - x[None, :, :]
    r2 = np.sum(d * d, 2) + 1e-3
    return -np.sum(r2 ** -0.5), 2 * np.sum(d * r2[:, :, None] ** -1.5, axis=1)


def ref_w4(u0, steps):
    """Final loss sum(u^2) after `steps` heat steps, and its gradient w.r.t. the initial field (float64)."""
    u = u0.astype(np.float64)
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                                - 4 * u[1:-1, 1:-1])
        u = v
    g = 2 * u
    for _ in range(steps):
        inner = g[1:-1, 1:-1]
        grad = g.copy()
        grad[1:-1, 1:-1] = inner * (1 - 0.8)
        grad[:-2, 1:-1] += 0.2 * inner
        grad[2:, 1:-1] += 0.2 * inner
        grad[1:-1, :-2] += 0.2 * inner
        grad[1:-1, 2:] += 0.2 * inner
        g = grad
    return np.sum(u * u), g
