"""An early `return` under an `if`, then a store of a vector or matrix into an array element (`out[i] =
gk.vec3d(...)` as well): compiling the kernel recurses without end in core/passes/promote.py
(_straight_line), RecursionError (not a gk.GradkitError) at the first launch, every device and mode.
Without the early return it compiles."""
import gradkit as gk


@gk.kernel
def k(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.mat22d)):
    i = gk.tid()
    if x[i] > 1.0:
        return
    out[i] = gk.outer(gk.vec2d(x[i], 1.0), gk.vec2d(2.0, x[i]))


out = gk.zeros(2, dtype=gk.mat22d)
gk.launch(k, 2, inputs=[gk.array([0.5, 2.0], dtype=gk.float64)], outputs=[out])
print(out.numpy().tolist(), "expected [[[1.0, 0.25], [2.0, 0.5]], [[0, 0], [0, 0]]]")
