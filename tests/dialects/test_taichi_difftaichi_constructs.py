"""Constructs DiffTaichi's examples use (mass_spring, wave, rigid_body, billiards, electric, diffmpm, smoke),
each in a small program written for this test and run under the real Taichi and gradkit.taichi (float64,
1e-12): axis letters ordering a field's indices, Python lists as kernel constants, @ti.func calling
@ti.func, class-qualified methods and Taichi's normalized(eps), 2-d cross, ti.types.ndarray() arguments and
ti.ndarray, Python-scope writes through `x[None][d]`, and a Tape whose kernels read a value a later kernel
overwrites (Taichi's gradient, from the values at backward time)."""

from __future__ import annotations

import numpy as np
import pytest

from taichi_programs import rel_err, run_program

CONSTRUCTS = '''
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)

T = 6
n = 3
goal = [0.25, -0.5]
anchors = [[0.1, 0.2], [0.7, 0.4], [0.3, 0.9]]
h = ti.field(ti.f64)
p = ti.Vector.field(2, ti.f64)
w = ti.field(ti.f64)
img = ti.field(ti.f64)
loss = ti.field(ti.f64)
init = ti.Vector.field(2, ti.f64)
ti.root.dense(ti.l, T).dense(ti.i, n).place(h)        # indexed h[i, t]: shape (n, T)
ti.root.dense(ti.l, T).place(p)
ti.root.dense(ti.i, n).place(w)
ti.root.dense(ti.ij, 4).place(img)
ti.root.place(loss, init)
u = ti.Vector.field(2, ti.f64)
M = ti.Matrix.field(2, 2, ti.f64)
block = ti.root.dense(ti.i, 3)


def soa(f):                                           # smoke's layout helper, as written there
    if isinstance(f, ti.ScalarField):
        block.dense(ti.j, 4).place(f)
    else:
        for c in range(f.n):
            soa(f.get_scalar_field(c))


soa(u)
ti.root.dense(ti.i, 3).place(M)
ti.root.lazy_grad()


@ti.func
def pull(q, a):
    return ti.Vector.normalized(q - a, 1e-3) * 0.1


@ti.func
def force(q, t):
    f = ti.Vector([0.0, 0.0])
    for k in ti.static(range(n)):
        f += pull(q, ti.Vector(anchors[k])) * h[k, t]
    return f


@ti.kernel
def hidden(t: ti.i32):
    for i in range(n):
        h[i, t] = ti.tanh(w[i] * (p[t][0] - goal[0]) + p[t].norm_inv(0.5))


@ti.kernel
def step(t: ti.i32):
    q = p[t - 1]
    r = q.normalized(0.25)
    p[t] = q + force(q, t) + 0.01 * q.cross(r) * ti.Vector([1.0, -1.0])


@ti.kernel
def start():
    p[0] = init[None]


@ti.kernel
def compute_loss():
    d = p[T - 1] - ti.Vector(goal)
    loss[None] = d.dot(d)


@ti.kernel
def to_img(a: ti.types.ndarray(), s: ti.f64):
    for i, j in ti.ndrange(4, 4):
        img[i, j] = a[i, j] * s


@ti.kernel
def from_img(a: ti.types.ndarray()):
    for i, j in ti.ndrange(4, 4):
        a[i, j] = img[i, j] + i


@ti.kernel
def nd_sum(a: ti.types.ndarray(), b: ti.types.ndarray()):
    for i in range(4):
        b[i] = a[i] * 2.0 + 1.0


@ti.kernel
def components(s: ti.f64):
    for i, j in u:
        u[i, j] = [0, 1]                              # list literals stored into vector / matrix fields
        u[i, j][0] = s * i + j                        # one component of a field element
        u[i, j][1] += s * u[i, j][0]
    for i in M:
        M[i] = [[1, 0], [0, 1]]
        M[i] = (ti.Matrix.diag(dim=2, val=1) + s * M[i]) @ M[i]
        M[i][0, 1] = s
    for i, j in u:
        loss[None] += u[i, j].dot(M[i] @ u[i, j])


def run(seed):
    rng = np.random.default_rng(seed)
    w.from_numpy(rng.uniform(-1, 1, n))
    init[None] = [0.4, 0.6]
    out = []
    for it in range(2):
        with ti.ad.Tape(loss=loss):
            start()
            for t in range(1, T):
                hidden(t)                     # reads p[t]: still last iteration's, overwritten by step(t)
                step(t)
            compute_loss()
        out += [loss[None], w.grad.to_numpy(), init.grad.to_numpy()]
        for d in range(2):
            init[None][d] -= 0.5 * init.grad[None][d]        # writes through, as Taichi's host accessors
    a = rng.uniform(size=(4, 4))
    to_img(a, 2.0)
    b = np.zeros((4, 4))
    from_img(b)
    src = ti.ndarray(ti.f64, shape=4)
    dst = ti.ndarray(ti.f64, shape=4)
    src.from_numpy(np.arange(4.0))
    nd_sum(src, dst)
    with ti.ad.Tape(loss=loss):
        components(0.75)
    out += [loss[None], u.to_numpy(), M.to_numpy()]
    out += [h.to_numpy(), np.array(h.shape), b, dst.to_numpy(), init.to_numpy()]
    return out
'''


@pytest.mark.filterwarnings("ignore::gradkit.GradientRuleWarning")  # the test writes an element twice on purpose
def test_difftaichi_constructs_match_taichi(tmp_path, capsys):
    pytest.importorskip("taichi")
    got = run_program(CONSTRUCTS, "gradkit.taichi", tmp_path, "dtc")["run"](3)
    theirs = run_program(CONSTRUCTS, "taichi", tmp_path, "dtc")["run"](3)
    assert len(got) == len(theirs)
    for k, (g, t) in enumerate(zip(got, theirs)):
        assert rel_err(g, t) < 1e-12, k
    assert tuple(got[-4]) == (3, 6)
    assert np.abs(got[1]).max() > 0 and got[0] != got[3]       # gradients flow; the update wrote init
    # Taichi checks nothing without validation=True, and says nothing: neither does gradkit.taichi
    assert "Taichi computes this gradient" not in capsys.readouterr().err
    # under ti.init(debug=True) gradkit.taichi checks the first tape and notes what Taichi would not raise
    from gradkit.dialects.taichi import ad
    ad._noted.clear()
    debug = CONSTRUCTS.replace("ti.init(arch=ti.cpu, default_fp=ti.f64)", "ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)")
    assert debug != CONSTRUCTS
    checked = run_program(debug, "gradkit.taichi", tmp_path, "dtd")["run"](3)
    for k, (g, t) in enumerate(zip(checked, theirs)):
        assert rel_err(g, t) < 1e-12, k
    assert "Taichi computes this gradient from the values as they are now" in capsys.readouterr().err


def test_tape_validation_raises_where_taichi_would_use_overwritten_values(tmp_path):
    import gradkit as gk
    g = run_program(CONSTRUCTS, "gradkit.taichi", tmp_path, "dtv")
    ti = g["ti"]
    g["init"][None] = [0.4, 0.6]
    g["w"].fill(0.5)
    g["hidden"](2)
    g["step"](2)
    assert g["p"].arr.label == "p" and g["w"].arr.label == "w"    # errors and the debugger name fields                              # p[2] written: later reads of the tape see new values
    with pytest.raises(gk.GradientRuleError):
        with ti.ad.Tape(loss=g["loss"], validation=True):
            g["start"]()
            for t in range(1, g["T"]):
                g["hidden"](t)
                g["step"](t)
            g["compute_loss"]()
