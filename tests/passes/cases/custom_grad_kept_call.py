"""A call whose @gk.func has a custom gradient stays a `call` through LOWER (forward_ad), so reverse mode
applies the custom rule instead of differentiating the body; the `forward` variant inlines it
(inline_kept, simplify) for backends; the adjoint runs the custom rule's body (the `if x > 0` guard)."""
import gradkit as gk

STAGES = ("lower", "forward", "adjoint")


@gk.func
def safe_sqrt(x: float) -> float:
    return gk.sqrt(x)


@gk.func_grad(safe_sqrt)
def adj_safe_sqrt(x: float, adj_ret: float):
    if x > 0.0:
        gk.adjoint[x] += 1.0 / (2.0 * gk.sqrt(x)) * adj_ret


@gk.kernel
def kept_call(xs: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = safe_sqrt(xs[i]) * 2.0
