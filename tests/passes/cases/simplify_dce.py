"""Simplify (dead-code elimination): an unused value and the values only it used disappear, a loop whose
results are unused and that writes nothing disappears. The overwritten store `y[i] = 1.0` stays:
simplify has no dead-store elimination (noted in the golden-test report as a missed optimisation)."""
import gradkit as gk

STAGES = ("frontend", "simplify")


@gk.kernel
def dce(x: gk.array(dtype=float), n: int, y: gk.array(dtype=float)):
    i = gk.tid()
    unused = gk.sin(x[i]) * 2.0
    also_unused = unused + 1.0
    t = float(0.0)
    for k in range(n):
        t = t + gk.exp(x[k])
    y[i] = 1.0
    y[i] = x[i]
