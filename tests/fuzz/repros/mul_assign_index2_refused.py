"""`p[i, 2] *= x[i]` in a `for` loop: backward raises GradientRuleError ("reads elements of 'p' that it
overwrites later in a loop") although the element index is a constant; with p[i, 0] or p[i, 1] the same
kernel is differentiated correctly (any constant >= 2 is refused, whatever the shape and thread count).
docs/errors.md refuses only a *varying* index (y[i, k % 2] *= v)."""
import warnings

import gradkit as gk

warnings.simplefilter("ignore", gk.GradientRuleWarning)   # rule 1 on `*=`: expected, documented


def make(col):
    @gk.kernel
    def k(x: gk.array(dtype=gk.float64), n: int, p: gk.array(dtype=gk.float64, ndim=2)):
        i = gk.tid()
        for t in range(n):
            p[i, col] *= x[i]
    return k


for col in (0, 1, 2, 3):
    x = gk.array([1.5, 2.0], dtype=gk.float64, requires_grad=True)
    p = gk.ones((2, 4), dtype=gk.float64, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(make(col), 2, inputs=[x, 3], outputs=[p])
    try:
        tape.backward(grads={p: gk.ones((2, 4), dtype=gk.float64)})
        print(f"p[i, {col}]: x.grad", x.grad.numpy(), "expected", 3 * x.numpy() ** 2)
    except gk.GradientRuleError as e:        # col 2 and 3
        print(f"p[i, {col}]: GradientRuleError:", str(e)[:90], "...")
