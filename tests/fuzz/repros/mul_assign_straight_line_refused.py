"""Two straight-line `*=` on elements that may be the same (`p[i, i % 3]` and `p[i, 1]`; no loop):
tape.backward raises GradientRuleError "reads elements of 'p' that it overwrites later in a loop" although
there is no loop. docs/errors.md refuses only re-reads after a *loop* overwrote elements at a varying index.
Expected x.grad = d/dx of sum(p) with p[1, 1] = x1 * x1 (thread 1 hits the same element twice)."""
import warnings

import numpy as np
import gradkit as gk

warnings.simplefilter("ignore", gk.GradientRuleWarning)   # rule 1 on `*=`: expected, documented


@gk.kernel
def k(x: gk.array(dtype=gk.float64), p: gk.array(dtype=gk.float64, ndim=2)):
    i = gk.tid()
    p[i, i % 3] *= x[i]
    p[i, 1] *= x[i]


xv = np.array([1.5, 2.0, 0.5])
x = gk.array(xv, dtype=gk.float64, requires_grad=True)
p = gk.ones((3, 3), dtype=gk.float64, requires_grad=True)
tape = gk.Tape()
with tape:
    gk.launch(k, 3, inputs=[x], outputs=[p])
print("p", p.numpy().tolist())
try:
    tape.backward(grads={p: gk.ones((3, 3), dtype=gk.float64)})
    print("x.grad", x.grad.numpy(), "expected", [2.0, 2 * xv[1], 2.0])
except gk.GradientRuleError as e:
    print("GradientRuleError:", str(e)[:110], "...")
