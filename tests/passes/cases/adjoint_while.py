"""Adjoint of a while loop: the forward replay counts the trips (and pushes the carried float), the
reverse loop runs that many times, popping.

No tangent stage: forward mode of a while loop with exactly one carried float is malformed today
(ad/forward.py tells the condition region from the body by `len(r.yields) == len(carried)`, which
holds for both when one value is carried, so the condition yields `%12, %13: bool = const 0.0`; the
CPU backend then fails with "too many values to unpack"). Add "tangent" to STAGES once that is fixed;
the condition region must yield only `lt %s, 10.0`."""
import gradkit as gk

STAGES = ("lower", "adjoint")


@gk.kernel
def while_loop(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = x[i]
    while s < 10.0:
        s = s * s + 1.0
    y[i] = s
