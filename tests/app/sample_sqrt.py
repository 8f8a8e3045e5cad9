"""Debugger test script: sqrt of an array holding a zero is finite going forward, but its adjoint
0.5 / sqrt(0) is infinite: the backward pass of `root` writes the first non-finite value (into x.grad).
With the argument `fixed` x starts at 1 (the fix): no NaN/Inf (the "after" bundle of the Compare view)."""

import sys

import numpy as np

import gradkit as gk


@gk.kernel
def root(x: gk.array(dtype=float), r: gk.array(dtype=float)):
    i = gk.tid()
    r[i] = gk.sqrt(x[i])


@gk.kernel
def total(r: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, r[i])


def main(n: int = 8, fixed: bool = False) -> None:
    start = 1.0 if fixed else 0.0
    x = gk.array(np.arange(n, dtype=np.float32) + start, requires_grad=True, label="x")     # x[0] == 0 unless fixed
    r = gk.zeros(n, requires_grad=True, label="r")
    loss = gk.zeros(1, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        gk.launch(root, n, inputs=[x], outputs=[r])
        gk.launch(total, n, inputs=[r], outputs=[loss])
    tape.backward(loss=loss)


if __name__ == "__main__":
    main(fixed=sys.argv[1:] == ["fixed"])
