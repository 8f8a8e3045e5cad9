"""Expand: clamp is min(max(x, lo), hi); sign is a where-chain (NumPy's: a float NaN stays NaN, ±0 gives +0; a uint
is 0 or 1); integer abs is where(x < 0, -x, x) while float abs stays a native call (it clears -0.0's
sign bit, which a where-chain would not)."""
import gradkit as gk

STAGES = ("expand",)


@gk.kernel
def clamp_sign_abs(x: gk.array(dtype=float), k: gk.array(dtype=int), u: gk.array(dtype=gk.uint32),
                   fo: gk.array(dtype=float), io: gk.array(dtype=int)):
    i = gk.tid()
    fo[i] = gk.clamp(x[i], -1.0, 1.0) + gk.sign(x[i]) + gk.abs(x[i])
    io[i] = gk.clamp(k[i], 0, 9) + gk.sign(k[i]) + gk.abs(k[i]) + int(gk.sign(u[i]))
