"""`*=` at constant, distinct indices is refused: tape.backward raises GradientRuleError "reads elements of
'p' that it overwrites later (in a loop, or at an index that may be the same element)" for
  a) two straight-line `*=` at p[i, 1] and p[i, 0] (distinct constants: they cannot coincide),
  b) one `*=` at p[i, 0] under an `if` inside a `for` loop (without the `if` it is differentiated),
  c) p[i, 0] *= ... and then p[i, 1] *= ... in a loop that may `break`.
docs/errors.md refuses only a varying index in a loop or indices that may coincide. Every device."""
import warnings

import numpy as np
import gradkit as gk

warnings.simplefilter("ignore", gk.GradientRuleWarning)   # rule 1 on `*=`: expected, documented


@gk.kernel
def a(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    p[i, 1] *= x[i]
    p[i, 0] *= x[i]


@gk.kernel
def b(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    for t in range(3):
        if x[i] > 0.0:
            p[i, 0] *= x[i]


@gk.kernel
def c(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    p[i, 0] *= x[i]
    for t in range(3):
        if t > 1:
            break
        p[i, 1] *= x[i]


xv = np.array([1.5, 2.0])
for name, k, want in (("a", a, 2 * np.ones(2)), ("b", b, 3 * xv ** 2), ("c", c, 1 + 2 * xv)):
    x = gk.array(xv, dtype=gk.float64, requires_grad=True)
    p = gk.ones((2, 3), dtype=gk.float64, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(k, 2, inputs=[x], outputs=[p])
    try:
        tape.backward(grads={p: gk.ones((2, 3), dtype=gk.float64)})
        print(name, "x.grad", x.grad.numpy(), "expected", want)
    except gk.GradientRuleError as e:
        print(name, "GradientRuleError:", str(e)[:90], "...")
