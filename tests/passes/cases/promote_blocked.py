"""Promote: not promoted when the loop also reads another element of the same array (a[k, 0])."""
import gradkit as gk

STAGES = ("promote",)


@gk.kernel
def promote_blocked(n: int, a: gk.array(dtype=float, ndim=2)):
    i = gk.tid()
    for k in range(n):
        a[i, 0] = a[i, 0] + a[k, 0]
