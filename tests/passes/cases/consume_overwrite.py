"""Consume (ad/consume.py): y[i] is written once per thread and never read, so plain reverse mode reads
adj_y[i] and leaves it as it is; the consuming adjoint (for tapes where an earlier launch used y's memory)
stores 0.0 into adj_y[i] right after reading it. The tangent forms differentiate each of them again (forward
over reverse): adj_y's tangent dual_adj_y[i] is read beside it, and reset beside it in the consuming form."""
import gradkit as gk

STAGES = ("adjoint", "adjoint_consume", "adjoint_tangent", "adjoint_consume_tangent")


@gk.kernel
def overwrite(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = gk.sin(v) * v
