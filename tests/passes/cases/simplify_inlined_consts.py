"""Simplify: constants the frontend cannot see (they reach the IR through an inlined @gk.func's
parameters) fold in simplify: `2 * 3 + 1` → 7. `//` and `%` of constant ints fold with floored
semantics when the divisor is nonzero (a zero divisor, and INT_MIN // -1, stay for the backend):
-7 // 3 == -3, -7 % 3 == 2 (out[1] = -28) and 7 // -3 == -3, 7 % -3 == -2 (out[2] = -32);
the folded constants keep the line of the @gk.func expression they came from (17).
"""
import gradkit as gk


@gk.func
def affine(a: int, b: int) -> int:
    return a * b + 1


@gk.func
def div_mod(a: int, b: int) -> int:
    return (a // b) * 10 + a % b


STAGES = ("inline", "simplify")


@gk.kernel
def inlined_consts(out: gk.array(dtype=int)):
    out[0] = affine(2, 3)
    out[1] = div_mod(-7, 3)
    out[2] = div_mod(7, -3)
