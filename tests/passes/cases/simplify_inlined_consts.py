"""Simplify: constants the frontend cannot see (they reach the IR through an inlined @gk.func's
parameters) fold in simplify: `2 * 3 + 1` → 7. `//` and `%` of constant ints are NOT folded today
(simplify.py's _NO_FOLD keeps every int div/floordiv/mod, to leave division by zero to the backend,
even for a nonzero constant divisor), so this golden keeps `floordiv -7, 3` and `mod -7, 3`. Once
simplify folds a nonzero divisor with floored semantics the golden should show -7 // 3 == -3,
-7 % 3 == 2 (out[1] = -28) and 7 // -3 == -3, 7 % -3 == -2 (out[2] = -32)."""
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
