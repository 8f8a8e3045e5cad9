"""Uniform (ad/uniform.py): launched with adj_outputs=[1.0] the gradient of y is one number, so adjoint@u3
takes adj_y (adjoint parameter 3) as a float32 scalar and each load of adj_y[i] becomes that parameter;
adj_x, which the adjoint adds into, stays an array."""
import gradkit as gk

STAGES = ("adjoint", "uniform")
UNIFORM = ("adjoint", (3,))         # the variant adjoint@u3


@gk.kernel
def stream(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = gk.exp(v) * v + 0.5 * v
