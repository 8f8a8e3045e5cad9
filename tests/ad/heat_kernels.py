"""The heat step the gradient-buffer tests share: a 5-point float64 stencil that copies the boundary, the
shape of make bench's W4 (benchmarks/workloads.py w4_heat) in float64 for exact references."""

import gradkit as gk


@gk.kernel
def heat(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i == 0 or j == 0 or i == n - 1 or j == m - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = u[i, j] + 0.2 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])
