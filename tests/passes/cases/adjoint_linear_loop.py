"""Adjoint of a loop whose carried float enters linearly (s = s + x[k]): no value needs the stack."""
import gradkit as gk

STAGES = ("adjoint",)


@gk.kernel
def linear_loop(x: gk.array(dtype=float), n: int, y: gk.array(dtype=float)):
    i = gk.tid()
    s = float(0.0)
    for k in range(n):
        s = s + 2.0 * x[k]
    y[i] = s
