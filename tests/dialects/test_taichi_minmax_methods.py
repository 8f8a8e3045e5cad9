"""Vector and matrix `.max()` / `.min()` under Taichi 1.7 and gradkit.taichi in the same test: the components
folded left to right with ti.max / ti.min's rule (a tie gives the value and its gradient to the later
component, a NaN component is missing), not gk.max's (ties to the first, NaN propagated). (Where the later
operand is NaN, Taichi's adjoint sends the gradient to it, not to the value kept; gradkit.taichi's min / max,
bare or methods, send it to the value kept: the gradients here take no path through a NaN pick.)"""

from __future__ import annotations

import numpy as np
import pytest

from taichi_programs import rel_err, run_program

METHODS = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)

n = 16
a = ti.Vector.field(3, float, n, needs_grad=True)
m = ti.Matrix.field(2, 2, float, n, needs_grad=True)
k = ti.Vector.field(4, ti.i32, n)
loss = ti.field(float, (), needs_grad=True)
vals = ti.field(float, (n, 4))
ints = ti.field(ti.i32, (n, 2))


@ti.func
def spread(v):
    return v.max() - 0.5 * v.min()


@ti.kernel
def total():
    for i in range(n):
        loss[None] += a[i].max() + 2.0 * a[i].min() + 3.0 * m[i].max() + 5.0 * spread(m[i]) \\
            + 7.0 * (a[i] * a[i]).max()


@ti.kernel
def values():
    for i in range(n):
        vals[i, 0] = a[i].max()
        vals[i, 1] = a[i].min()
        vals[i, 2] = m[i].max()
        vals[i, 3] = m[i].min()
        ints[i, 0] = k[i].max()
        ints[i, 1] = k[i].min()


def run(seed):
    rng = np.random.default_rng(seed)
    ties = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 0.0], [0.0, 2.0, 2.0], [2.0, 0.0, 2.0], [-1.0, -1.0, 3.0],
                     [0.0, -0.0, 0.0], [-0.0, 0.0, -1.0], [1.0, -1.0, -1.0], [np.nan, 1.0, 2.0],
                     [1.0, np.nan, 1.0]])
    av = np.concatenate([ties, rng.normal(size=(n - len(ties), 3))])
    mv = rng.integers(-1, 2, size=(n, 2, 2)).astype(np.float64)    # many ties
    mv[n - 3:] = rng.normal(size=(3, 2, 2))
    a.from_numpy(av)
    m.from_numpy(mv)
    k.from_numpy(rng.integers(-3, 4, size=(n, 4)).astype(np.int32))
    with ti.ad.Tape(loss):
        total()
    values()
    return [loss[None], a.grad.to_numpy(), m.grad.to_numpy(), vals.to_numpy(), ints.to_numpy()]
'''


def test_vector_max_min_methods_as_in_taichi(tmp_path, device):
    """Ties (several components equal, +-0), NaN components, integer vectors, matrices in row order, in a
    kernel and through a ti.func: values and gradients equal Taichi's."""
    pytest.importorskip("taichi")
    got = run_program(METHODS.replace("arch=ti.cpu", f"arch=ti.cpu, device={device!r}"), "gradkit.taichi",
                      tmp_path, "methods")["run"](5)
    theirs = run_program(METHODS, "taichi", tmp_path, "methods")["run"](5)
    for j, (g, t) in enumerate(zip(got, theirs)):
        g, t = np.asarray(g, np.float64), np.asarray(t, np.float64)
        nan = np.isnan(t)           # a * a's gradient at a NaN component is NaN in both
        np.testing.assert_array_equal(np.isnan(g), nan)
        assert rel_err(g[~nan], t[~nan]) < 1e-12, j
    # the ties are there and Taichi gives them to the later component
    grad_a = theirs[1]
    assert grad_a[0][0] == grad_a[0][1] == 0.0 and grad_a[0][2] > 0.0
    assert grad_a[4][1] == 2.0 and grad_a[4][0] == 0.0
