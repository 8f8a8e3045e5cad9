"""Frontend: a 2-D tid, shape, int arithmetic and explicit int → float casts (no implicit promotion)."""
import gradkit as gk

STAGES = ("frontend",)


@gk.kernel
def int_promotion(n: int, x: gk.array(dtype=float, ndim=2), out: gk.array(dtype=float, ndim=2)):
    i, j = gk.tid()
    w = x.shape[1]
    out[i, j] = x[i, j] * float(n) + float(i * w + j) / 2.0
