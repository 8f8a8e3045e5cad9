"""Store (ad/fresh_store.py) in a plain adjoint: the adjoint of a reduction adds into adj_u[i] at the thread's
own index (exclusive) and adj_w[i] likewise; adjoint_store stores both, for gradients the tape knows are
zero and first written by this launch. adj_loss is only read and stays as it is."""
import gradkit as gk

STAGES = ("adjoint", "adjoint_store")


@gk.kernel
def weighted_squares(u: gk.array(dtype=float), w: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, w[i] * u[i] * u[i])
