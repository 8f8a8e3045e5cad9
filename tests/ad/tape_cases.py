"""Kernels and helpers the tape-overwrite tests share: float64 arrays, small kernels that write a buffer in
each way (assign, guarded assign, accumulate), loss kernels, and central differences."""

import numpy as np

import gradkit as gk


def f64(values, device, requires_grad=True):
    return gk.array(np.asarray(values, dtype=np.float64), dtype=gk.float64, device=device,
                    requires_grad=requires_grad)


@gk.kernel
def scale_into(x: gk.array(dtype=gk.float64), k: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = k[0] * x[i]


@gk.kernel
def square_into(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def twice_into(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


@gk.kernel
def odd_sin_into(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    if i % 2 == 1:
        y[i] = gk.sin(x[i])


@gk.kernel
def add_cube_into(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] += x[i] * x[i] * x[i]


@gk.kernel
def total(y: gk.array(dtype=gk.float64), l: gk.array(dtype=gk.float64)):
    gk.atomic_add(l, 0, y[gk.tid()])


@gk.kernel
def weighted_sum(y: gk.array(dtype=gk.float64), w: gk.array(dtype=gk.float64), l: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(l, 0, w[i] * y[i])


def z64(n, device):
    """A float64 array of zeros with a gradient: a buffer or a loss."""
    return gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)


def _fd(run, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar `run(x)` for every element of x."""
    out = np.zeros_like(x)
    for k in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[k] += eps
        down.flat[k] -= eps
        out.flat[k] = (run(up) - run(down)) / (2 * eps)
    return out
