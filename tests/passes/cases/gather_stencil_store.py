"""Store (ad/fresh_store.py): adjoint_gather_store is adjoint_gather with its one top-level add of the gathered
sum into adj_u[i] turned into a store, for gradients the tape knows are zero and first written by this
launch (runtime/tape/fresh.py); every other instruction is unchanged."""
import gradkit as gk

STAGES = ("adjoint_gather", "adjoint_gather_store")


@gk.kernel
def blur_store(u: gk.array(dtype=float), w: float, out: gk.array(dtype=float)):
    i = gk.tid()
    if i >= 1 and i < u.shape[0] - 1:
        out[i] = u[i] + w * (u[i - 1] + u[i + 1])
    else:
        out[i] = u[i]
