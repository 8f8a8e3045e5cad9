"""FOUND.md #10: forward mode through a while loop whose only carried local is one float (fixed in 90de188).

Expected: the tangent of s -> s*s + 1 iterated until s >= 10, i.e. the product of 2*s over the trips.
"""
import numpy as np

import gradkit as gk


@gk.kernel
def while_loop(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    s = x[i]
    while s < 10.0:
        s = s * s + 1.0
    y[i] = s


x = gk.array(np.array([1.5], np.float32))
y = gk.zeros(1)
with gk.ForwardMode(seeds={x: gk.ones(1)}):
    gk.launch(while_loop, 1, inputs=[x], outputs=[y])
    print("y", y.numpy(), "dy", y.dual.numpy(), "expected dy", 2 * 1.5 * 2 * 3.25)
