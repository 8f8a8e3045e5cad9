"""Gather (ad/gather.py): the adjoint of a 1-D stencil's shifted reads u[i - 1], u[i + 1] scatters atomic adds
into adj_u[i - 1], adj_u[i + 1]; adjoint_gather replays the adjoint body as threads i + 1 and i - 1 (the
index clamped to the thread itself where that neighbour does not exist, its add then a 0 through `where`)
and adds all three contributions to adj_u[i] once, with no neighbour's element touched."""
import gradkit as gk

STAGES = ("adjoint", "adjoint_gather")


@gk.kernel
def blur(u: gk.array(dtype=float), w: float, out: gk.array(dtype=float)):
    i = gk.tid()
    if i >= 1 and i < u.shape[0] - 1:
        out[i] = u[i] + w * (u[i - 1] + u[i + 1])
    else:
        out[i] = u[i]
