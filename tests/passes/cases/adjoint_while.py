"""Adjoint of a while loop: the forward replay counts the trips (and pushes the carried float), the
reverse loop runs that many times, popping. Tangent: the loop carries (s, ds); the condition region yields
only `lt %s, 10.0` (it once got a tangent yield too when exactly one float was carried)."""
import gradkit as gk

STAGES = ("lower", "adjoint", "tangent")


@gk.kernel
def while_loop(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = x[i]
    while s < 10.0:
        s = s * s + 1.0
    y[i] = s
