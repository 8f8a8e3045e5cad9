"""`*=` on one constant element again after another element's `*=` is refused: tape.backward raises
GradientRuleError "reads elements of 'p' that it overwrites later (in a loop, or at an index that may be
the same element)" for
  f) p[i, 0] *= x; p[i, 1] *= x; p[i, 0] *= x   (straight line; p[i, 0] *= x twice in a row works),
  d) the same through an unrolled loop: for t in gk.static(range(2)): p[i, 0] *= x; p[i, 1] *= x,
  e) for t in gk.static(range(2)): if x > 0: p[i, 0] *= x   (the dynamic `range` loop works).
Every index is a constant, so which value each read sees is known. Every device."""
import warnings

import numpy as np
import gradkit as gk

warnings.simplefilter("ignore", gk.GradientRuleWarning)   # rule 1 on `*=`: expected, documented


@gk.kernel
def f(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    p[i, 0] *= x[i]
    p[i, 1] *= x[i]
    p[i, 0] *= x[i]


@gk.kernel
def d(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    for t in gk.static(range(2)):
        p[i, 0] *= x[i]
        p[i, 1] *= x[i]


@gk.kernel
def e(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    for t in gk.static(range(2)):
        if x[i] > 0.0:
            p[i, 0] *= x[i]


xv = np.array([1.5, 2.0])
for name, k, want in (("f", f, 2 * xv + 1), ("d", d, 4 * xv), ("e", e, 2 * xv)):
    x = gk.array(xv, dtype=gk.float64, requires_grad=True)
    p = gk.ones((2, 3), dtype=gk.float64, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(k, 2, inputs=[x], outputs=[p])
    try:
        tape.backward(grads={p: gk.ones((2, 3), dtype=gk.float64)})
        print(name, "x.grad", x.grad.numpy(), "expected", want)
    except gk.GradientRuleError as e_:
        print(name, "GradientRuleError:", str(e_)[:90], "...")
